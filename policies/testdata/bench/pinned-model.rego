package modelgate.pinned

deny contains msg if {
	model := input.workload.model
	model != null
	not model.pinned
	msg := sprintf("model %s must be pinned to a commit or digest", [model.uri])
}
