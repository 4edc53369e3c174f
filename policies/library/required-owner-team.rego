# required-owner-team: every workload must say who created it and which team
# owns it, so GPU usage can be attributed and charged back.
#
# modelgate's owner-metadata mutator writes both labels on workloads that opt
# in: modelgate.io/owner from the requester, modelgate.io/team from the
# namespace's modelgate.io/team label. This policy denies workloads where
# input.workload.owner or input.workload.team is still empty: the workload did
# not opt in, or its namespace has no team. On UPDATE the mutator restores the
# previous owner, so the rule holds for the workload's whole life.
#
# Parameters:
#   requireTeam  also require modelgate.io/team (default true); false when
#                some namespaces have no team yet
#
#   {"requireTeam": true}
#
# Not covered: whether the owner or team is the right one (modelgate sets them,
# nobody else can), owner-full, and Pods that a controller creates from an
# older template without an owner: they are denied like any other, so the
# workload must be updated (or this policy scoped away from Pods with
# spec.match.kinds). ResourceClaims and ResourceClaimTemplates, on which
# modelgate stamps no owner, are not judged.
package modelgate.library.required_owner_team

require_team := object.get(input.parameters, ["requireTeam"], true)

# Named through input.workload.namespaceLabels, not object.get on the whole
# view: a policy that names the keys it reads is given only those.
namespace_team := object.get(input.workload.namespaceLabels, "modelgate.io/team", "") if {
	is_object(input.workload.namespaceLabels)
} else := ""

# A workload that did not opt in, in a namespace with a team, lacks both
# labels for one reason: one violation names both, and the team rule below
# stays quiet. Every other missing label is its own problem with its own fix.

deny contains msg if {
	input.workload.owner == ""
	not team_follows_opt_in
	not claim
	msg := sprintf(
		"label modelgate.io/owner is missing: modelgate records the creator of workloads that opt in; annotate %s %q with modelgate.io/inject: \"true\" or label namespace %q with modelgate.io/injection=enabled",
		[input.workload.kind, input.workload.name, input.workload.namespace],
	)
}

deny contains msg if {
	input.workload.owner == ""
	team_follows_opt_in
	not claim
	msg := sprintf(
		"labels modelgate.io/owner and modelgate.io/team are missing: modelgate records the creator of workloads that opt in and copies namespace %q's modelgate.io/team=%s to them; annotate %s %q with modelgate.io/inject: \"true\" or label namespace %q with modelgate.io/injection=enabled",
		[input.workload.namespace, namespace_team, input.workload.kind, input.workload.name, input.workload.namespace],
	)
}

deny contains msg if {
	require_team == true
	input.workload.team == ""
	namespace_team == ""
	not claim
	msg := sprintf("label modelgate.io/team is missing: label namespace %q with modelgate.io/team", [input.workload.namespace])
}

deny contains msg if {
	input.workload.owner != ""
	team_follows_opt_in
	not claim
	msg := sprintf(
		"label modelgate.io/team is missing: namespace %q has modelgate.io/team=%s, which modelgate copies to workloads that opt in; annotate %s %q with modelgate.io/inject: \"true\"",
		[input.workload.namespace, namespace_team, input.workload.kind, input.workload.name],
	)
}

# team_follows_opt_in: the team is required and missing, and opting in would
# copy it from the namespace.
team_follows_opt_in if {
	require_team == true
	input.workload.team == ""
	namespace_team != ""
}

# claim is a ResourceClaim or ResourceClaimTemplate: no owner is stamped on
# it.
claim if input.workload.kind in {"ResourceClaim", "ResourceClaimTemplate"}
