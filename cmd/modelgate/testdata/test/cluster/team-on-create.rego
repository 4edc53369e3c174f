# team-on-create: a new workload names its team.
package acme.team_on_create

deny contains sprintf("%s %q has no label modelgate.io/team", [input.workload.kind, input.workload.name]) if {
	input.oldObject == null
	input.workload.team == ""
}
