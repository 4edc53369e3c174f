package modelgate.library.required_owner_team_test

import data.modelgate.library.required_owner_team as policy

# review builds an admission input in the contract's shape for a Deployment
# with the given workload fields replaced (not merged: {} empties a map).
review(fields, parameters) := {
	"workload": object.union(object.remove(base, object.keys(fields)), fields),
	"object": {"kind": "Deployment"},
	"oldObject": null,
	"parameters": parameters,
}

base := {
	"kind": "Deployment", "apiVersion": "apps/v1",
	"name": "llama", "namespace": "team-a",
	"operation": "CREATE",
	"labels": {"modelgate.io/owner": "alice_example.com", "modelgate.io/team": "nlp"},
	"annotations": {}, "podLabels": {}, "podAnnotations": {},
	"userInfo": {"username": "alice@example.com", "groups": ["system:authenticated"], "uid": ""},
	"namespaceLabels": {"modelgate.io/team": "nlp"},
	"owner": "alice_example.com", "team": "nlp", "injected": true,
	"servingContainer": "vllm",
	"hostNetwork": false, "hostPID": false, "hostIPC": false,
	"containers": [{
		"name": "vllm", "image": "vllm/vllm-openai:v0.6.0", "gpus": 1,
		"resources": {"limits": {"nvidia.com/gpu": "1"}, "requests": {"nvidia.com/gpu": "1"}},
		"securityContext": {}, "privileged": false, "ports": [8000],
		"readinessProbe": true, "startupProbe": true, "livenessProbe": false,
	}],
	"initContainers": [],
	"gpu": {"resource": "nvidia.com/gpu", "count": 1, "products": [], "memoryMiB": 0},
	"model": null, "engine": "vllm", "serving": true,
}

# not_opted_in is a workload modelgate did not touch, in a namespace with a team.
not_opted_in := {"labels": {}, "owner": "", "team": "", "injected": false}

# no_namespace_team is an opted-in workload whose namespace has no team.
no_namespace_team := {"labels": {"modelgate.io/owner": "alice_example.com"}, "namespaceLabels": {}, "team": ""}

update(r) := object.union(r, {"workload": {"operation": "UPDATE"}, "oldObject": {"kind": "Deployment"}})

test_allows_a_workload_with_owner_and_team if {
	count(policy.deny) == 0 with input as review({}, {})
	count(policy.deny) == 0 with input as update(review({}, {}))
}

test_denies_a_missing_owner if {
	policy.deny == {`label modelgate.io/owner is missing: modelgate records the creator of workloads that opt in; annotate Deployment "llama" with modelgate.io/inject: "true" or label namespace "team-a" with modelgate.io/injection=enabled`} with input as review({"owner": ""}, {})
}

test_denies_a_missing_team_when_the_namespace_has_none if {
	policy.deny == {`label modelgate.io/team is missing: label namespace "team-a" with modelgate.io/team`} with input as review(no_namespace_team, {})
}

test_reports_a_workload_that_did_not_opt_in_once if {
	policy.deny == {`labels modelgate.io/owner and modelgate.io/team are missing: modelgate records the creator of workloads that opt in and copies namespace "team-a"'s modelgate.io/team=nlp to them; annotate Deployment "llama" with modelgate.io/inject: "true" or label namespace "team-a" with modelgate.io/injection=enabled`} with input as review(not_opted_in, {})
}

test_denies_on_update if {
	policy.deny == {`labels modelgate.io/owner and modelgate.io/team are missing: modelgate records the creator of workloads that opt in and copies namespace "team-a"'s modelgate.io/team=nlp to them; annotate Deployment "llama" with modelgate.io/inject: "true" or label namespace "team-a" with modelgate.io/injection=enabled`} with input as update(review(not_opted_in, {}))
}

test_denies_a_missing_team_that_opting_in_would_copy if {
	policy.deny == {`label modelgate.io/team is missing: namespace "team-a" has modelgate.io/team=nlp, which modelgate copies to workloads that opt in; annotate Deployment "llama" with modelgate.io/inject: "true"`} with input as review({"team": ""}, {})
}

test_reports_each_fix_when_the_namespace_has_no_team if {
	policy.deny == {
		`label modelgate.io/owner is missing: modelgate records the creator of workloads that opt in; annotate Deployment "llama" with modelgate.io/inject: "true" or label namespace "team-a" with modelgate.io/injection=enabled`,
		`label modelgate.io/team is missing: label namespace "team-a" with modelgate.io/team`,
	} with input as review(object.union(not_opted_in, {"namespaceLabels": {}}), {})
}

test_names_the_workload_kind if {
	policy.deny == {`label modelgate.io/owner is missing: modelgate records the creator of workloads that opt in; annotate Pod "trainer" with modelgate.io/inject: "true" or label namespace "research" with modelgate.io/injection=enabled`} with input as review({"kind": "Pod", "apiVersion": "v1", "name": "trainer", "namespace": "research", "owner": ""}, {})
}

test_require_team_defaults_to_true if {
	policy.deny == {`label modelgate.io/team is missing: label namespace "team-a" with modelgate.io/team`} with input as review(no_namespace_team, {"requireTeam": true})
}

test_require_team_false_checks_only_the_owner if {
	count(policy.deny) == 0 with input as review(no_namespace_team, {"requireTeam": false})
	policy.deny == {`label modelgate.io/owner is missing: modelgate records the creator of workloads that opt in; annotate Deployment "llama" with modelgate.io/inject: "true" or label namespace "team-a" with modelgate.io/injection=enabled`} with input as review(not_opted_in, {"requireTeam": false})
}

# claim_view is the view of a ResourceClaim or ResourceClaimTemplate, in
# the contract's shape: no pod, no owner, no model, its requests as
# devices (here 16 GPUs) and their GPUs as its count.
claim_view(kind, parameters) := {
	"workload": {
		"kind": kind, "apiVersion": "resource.k8s.io/v1",
		"name": "big", "namespace": "team-a",
		"operation": "CREATE",
		"labels": {}, "annotations": {}, "podLabels": {}, "podAnnotations": {},
		"userInfo": {"username": "alice@example.com", "groups": ["system:authenticated"], "uid": ""},
		"namespaceLabels": {"modelgate.io/team": "nlp"},
		"owner": "", "team": "", "injected": false,
		"servingContainer": "",
		"hostNetwork": false, "hostPID": false, "hostIPC": false,
		"containers": [], "initContainers": [], "ephemeralContainers": [],
		"gpu": {
			"resource": "nvidia.com/gpu", "count": 16, "products": [], "memoryMiB": 0,
			"claims": ["big"], "unresolvedClaims": [],
			"devices": [{"claim": "big", "request": "gpu", "deviceClass": "gpu.nvidia.com", "allocationMode": "ExactCount", "count": 16, "gpu": true}],
		},
		"model": null, "engine": "", "serving": false,
	},
	"object": {"kind": kind},
	"oldObject": null,
	"parameters": parameters,
}

# A policy written for workloads judges a claim only when its match lists
# the claim's kind; then it does not deny what a claim cannot have.
test_does_not_judge_a_claim if {
	every kind in ["ResourceClaim", "ResourceClaimTemplate"] {
		count(policy.deny) == 0 with input as claim_view(kind, {"requireTeam": true})
	}
}
