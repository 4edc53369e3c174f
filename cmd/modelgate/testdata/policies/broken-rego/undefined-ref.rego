package acme.undefined_ref

deny contains msg if {
	msg := no_such_rule
}
