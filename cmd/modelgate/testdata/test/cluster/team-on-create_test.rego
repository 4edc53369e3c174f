package acme.team_on_create_test

import data.acme.team_on_create

review(team, old) := {
	"workload": {"kind": "Deployment", "name": "llama", "team": team},
	"object": {}, "oldObject": old, "parameters": {},
}

test_denies_a_new_workload_without_a_team if {
	team_on_create.deny == {`Deployment "llama" has no label modelgate.io/team`} with input as review("", null)
}

test_allows_an_update_without_a_team if {
	count(team_on_create.deny) == 0 with input as review("", {"kind": "Deployment"})
}

# Holds in OPA, but the input has no oldObject: the cluster sends
# "oldObject": null, a create, and denies it.
test_allows_an_update_without_a_team_but_no_old_object if {
	count(team_on_create.deny) == 0 with input as {"workload": {"kind": "Deployment", "name": "llama", "team": ""}}
}
