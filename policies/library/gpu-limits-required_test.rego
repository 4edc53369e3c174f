package modelgate.library.gpu_limits_required_test

import data.modelgate.library.gpu_limits_required as policy

# review builds an admission input in the contract's shape for a Deployment
# with the given containers, whose GPU resource is gpu_resource.
review(containers, init_containers, gpu_resource) := {
	"workload": object.union(base, {
		"containers": containers,
		"initContainers": init_containers,
		"gpu": {"resource": gpu_resource, "count": sum([c.gpus | some c in containers]), "products": [], "memoryMiB": 0},
	}),
	"object": {"kind": "Deployment"},
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
	"gpu": {"resource": "nvidia.com/gpu", "count": 0, "products": [], "memoryMiB": 0},
	"model": null, "engine": "vllm", "serving": true,
}

# container has the given resources; gpus follows the contract (the limit,
# else the request).
container(name, resources) := {
	"name": name, "image": "vllm/vllm-openai:v0.6.0", "gpus": gpus(resources),
	"resources": resources,
	"securityContext": {}, "privileged": false, "ports": [8000],
	"readinessProbe": true, "startupProbe": true, "livenessProbe": false,
}

gpus(resources) := to_number(object.get(resources, ["limits", "nvidia.com/gpu"], object.get(resources, ["requests", "nvidia.com/gpu"], "0")))

update(r) := object.union(r, {"workload": {"operation": "UPDATE"}, "oldObject": {"kind": "Deployment"}})

test_allows_equal_request_and_limit if {
	r := {"requests": {"nvidia.com/gpu": "2", "memory": "64Gi"}, "limits": {"nvidia.com/gpu": "2", "memory": "64Gi"}}
	count(policy.deny) == 0 with input as review([container("vllm", r)], [], "nvidia.com/gpu")
}

test_allows_a_limit_without_a_request if {
	count(policy.deny) == 0 with input as review([container("vllm", {"limits": {"nvidia.com/gpu": "1"}})], [], "nvidia.com/gpu")
}

test_allows_containers_without_gpus if {
	count(policy.deny) == 0 with input as review([container("api", {"requests": {"cpu": "1"}}), container("idle", {})], [], "nvidia.com/gpu")
}

test_compares_quantities_as_numbers if {
	r := {"requests": {"nvidia.com/gpu": "1000m"}, "limits": {"nvidia.com/gpu": "1"}}
	count(policy.deny) == 0 with input as review([container("vllm", r)], [], "nvidia.com/gpu")
}

test_denies_a_request_without_a_limit if {
	r := {"requests": {"nvidia.com/gpu": "2"}, "limits": {"memory": "64Gi"}}
	policy.deny == {`container "vllm" requests 2 nvidia.com/gpu but sets no limit; set resources.limits["nvidia.com/gpu"] to 2, equal to the request`} with input as review([container("vllm", r)], [], "nvidia.com/gpu")
}

test_denies_a_request_without_any_limits if {
	r := {"requests": {"nvidia.com/gpu": "1"}}
	policy.deny == {`container "vllm" requests 1 nvidia.com/gpu but sets no limit; set resources.limits["nvidia.com/gpu"] to 1, equal to the request`} with input as review([container("vllm", r)], [], "nvidia.com/gpu")
}

test_denies_a_different_limit if {
	r := {"requests": {"nvidia.com/gpu": "1"}, "limits": {"nvidia.com/gpu": "4"}}
	policy.deny == {`container "vllm" requests 1 nvidia.com/gpu but limits it to 4; resources.limits["nvidia.com/gpu"] must equal the request (1)`} with input as review([container("vllm", r)], [], "nvidia.com/gpu")
}

test_denies_a_different_limit_on_update if {
	r := {"requests": {"nvidia.com/gpu": "1"}, "limits": {"nvidia.com/gpu": "4"}}
	policy.deny == {`container "vllm" requests 1 nvidia.com/gpu but limits it to 4; resources.limits["nvidia.com/gpu"] must equal the request (1)`} with input as update(review([container("vllm", r)], [], "nvidia.com/gpu"))
}

test_denies_an_init_container if {
	ok := {"requests": {"nvidia.com/gpu": "1"}, "limits": {"nvidia.com/gpu": "1"}}
	policy.deny == {`init container "warmup" requests 1 nvidia.com/gpu but sets no limit; set resources.limits["nvidia.com/gpu"] to 1, equal to the request`} with input as review([container("vllm", ok)], [container("warmup", {"requests": {"nvidia.com/gpu": "1"}})], "nvidia.com/gpu")
}

test_reports_each_container if {
	policy.deny == {
		`container "a" requests 1 nvidia.com/gpu but sets no limit; set resources.limits["nvidia.com/gpu"] to 1, equal to the request`,
		`container "b" requests 2 nvidia.com/gpu but limits it to 1; resources.limits["nvidia.com/gpu"] must equal the request (2)`,
	} with input as review(
		[
			container("a", {"requests": {"nvidia.com/gpu": "1"}}),
			container("b", {"requests": {"nvidia.com/gpu": "2"}, "limits": {"nvidia.com/gpu": "1"}}),
		],
		[], "nvidia.com/gpu",
	)
}

test_uses_the_configured_gpu_resource if {
	amd := {"requests": {"amd.com/gpu": "1"}}
	policy.deny == {`container "vllm" requests 1 amd.com/gpu but sets no limit; set resources.limits["amd.com/gpu"] to 1, equal to the request`} with input as review([container("vllm", amd)], [], "amd.com/gpu")
	count(policy.deny) == 0 with input as review([container("vllm", amd)], [], "nvidia.com/gpu")
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
