package modelgate.library.serving_readiness_probe_test

import data.modelgate.library.serving_readiness_probe as policy

# review builds an admission input in the contract's shape for a workload of
# the given kind with the given containers and serving container.
review(kind, containers, serving_container) := {
	"workload": object.union(base, {
		"kind": kind,
		"containers": containers,
		"servingContainer": serving_container,
	}),
	"object": {"kind": kind},
	"oldObject": null,
	"parameters": {},
}

base := {
	"kind": "Deployment", "apiVersion": "apps/v1",
	"name": "llama", "namespace": "team-a",
	"operation": "CREATE",
	"labels": {}, "annotations": {}, "podLabels": {}, "podAnnotations": {},
	"userInfo": {"username": "alice@example.com", "groups": ["system:authenticated"], "uid": ""},
	"namespaceLabels": {"modelgate.io/team": "nlp"},
	"owner": "alice_example.com", "team": "nlp", "injected": true,
	"servingContainer": "vllm",
	"hostNetwork": false, "hostPID": false, "hostIPC": false,
	"containers": [], "initContainers": [],
	"gpu": {"resource": "nvidia.com/gpu", "count": 1, "products": [], "memoryMiB": 0},
	"model": null, "engine": "vllm", "serving": true,
}

container(name, readiness) := {
	"name": name, "image": "vllm/vllm-openai:v0.6.0", "gpus": 1,
	"resources": {"limits": {"nvidia.com/gpu": "1"}, "requests": {"nvidia.com/gpu": "1"}},
	"securityContext": {}, "privileged": false, "ports": [8000],
	"readinessProbe": readiness, "startupProbe": false, "livenessProbe": false,
}

not_serving(r) := object.union(r, {"workload": {"engine": "", "serving": false}})

update(r) := object.union(r, {"workload": {"operation": "UPDATE"}, "oldObject": {"kind": r.workload.kind}})

test_allows_a_serving_container_with_a_probe if {
	count(policy.deny) == 0 with input as review("Deployment", [container("vllm", true)], "vllm")
	count(policy.deny) == 0 with input as update(review("Deployment", [container("vllm", true)], "vllm"))
}

test_ignores_other_containers if {
	count(policy.deny) == 0 with input as review("Deployment", [container("vllm", true), container("log-shipper", false)], "vllm")
}

test_allows_workloads_that_do_not_serve if {
	count(policy.deny) == 0 with input as not_serving(review("Deployment", [container("vllm", false)], "vllm"))
}

test_denies_a_serving_container_without_a_probe if {
	policy.deny == {`container "vllm" serves a model (engine "vllm") but has no readinessProbe; add one so traffic waits until the model is loaded`} with input as review("Deployment", [container("vllm", false), container("log-shipper", false)], "vllm")
}

test_denies_on_update if {
	policy.deny == {`container "vllm" serves a model (engine "vllm") but has no readinessProbe; add one so traffic waits until the model is loaded`} with input as update(review("Deployment", [container("vllm", false)], "vllm"))
}

test_denies_pods_and_statefulsets if {
	policy.deny == {`container "vllm" serves a model (engine "vllm") but has no readinessProbe; add one so traffic waits until the model is loaded`} with input as review("Pod", [container("vllm", false)], "vllm")
	policy.deny == {`container "vllm" serves a model (engine "vllm") but has no readinessProbe; add one so traffic waits until the model is loaded`} with input as review("StatefulSet", [container("vllm", false)], "vllm")
}

test_reports_unprobed_containers_once_without_a_serving_container if {
	policy.deny == {`containers "a", "c" have no readinessProbe, and no container is named as the one serving the model (engine "vllm"); name it with modelgate.io/container and give it a readinessProbe so traffic waits until the model is loaded`} with input as review("Deployment", [container("a", false), container("b", true), container("c", false)], "")
	policy.deny == {`container "c" has no readinessProbe, and no container is named as the one serving the model (engine "vllm"); name it with modelgate.io/container and give it a readinessProbe so traffic waits until the model is loaded`} with input as review("Deployment", [container("b", true), container("c", false)], "")
	count(policy.deny) == 0 with input as review("Deployment", [container("a", true), container("b", true)], "")
}

test_skips_jobs_and_cronjobs if {
	count(policy.deny) == 0 with input as review("Job", [container("vllm", false)], "vllm")
	count(policy.deny) == 0 with input as review("CronJob", [container("vllm", false)], "vllm")
	count(policy.deny) == 0 with input as update(review("Job", [container("vllm", false)], ""))
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
		count(policy.deny) == 0 with input as claim_view(kind, {})
	}
}
