package modelgate.library.max_gpus_per_pod_test

import data.modelgate.library.max_gpus_per_pod as policy

# review builds an admission input in the contract's shape around a workload
# whose containers ask for the given GPUs.
review(containers, params) := {
	"workload": object.union(base, {
		"containers": containers,
		"gpu": {"resource": "nvidia.com/gpu", "count": sum([c.gpus | some c in containers]), "products": [], "memoryMiB": 0},
	}),
	"object": {"kind": "Deployment"},
	"oldObject": null,
	"parameters": params,
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

container(name, gpus) := {
	"name": name, "image": "vllm/vllm-openai:v0.6.0", "gpus": gpus,
	"resources": {"limits": {"nvidia.com/gpu": format_int(gpus, 10)}, "requests": {"nvidia.com/gpu": format_int(gpus, 10)}},
	"securityContext": {}, "privileged": false, "ports": [8000],
	"readinessProbe": true, "startupProbe": true, "livenessProbe": false,
}

in_namespace(r, ns) := object.union(r, {"workload": {"namespace": ns}})

of_kind(r, kind, api_version, name) := object.union(r, {"workload": {"kind": kind, "apiVersion": api_version, "name": name}, "object": {"kind": kind}})

update(r) := object.union(r, {"workload": {"operation": "UPDATE"}, "oldObject": {"kind": "Deployment"}})

test_allows_up_to_the_default_max if {
	count(policy.deny) == 0 with input as review([container("vllm", 8)], {})
}

test_allows_a_cpu_only_pod if {
	count(policy.deny) == 0 with input as review([container("api", 0)], {})
}

test_denies_over_the_default_max if {
	policy.deny == {`each pod of Deployment "llama" asks for 9 GPUs (container "vllm"); at most 8 are allowed per pod in namespace "team-a"`} with input as review([container("vllm", 9)], {})
}

test_denies_over_the_default_max_on_update if {
	policy.deny == {`each pod of Deployment "llama" asks for 9 GPUs (container "vllm"); at most 8 are allowed per pod in namespace "team-a"`} with input as update(review([container("vllm", 9)], {}))
}

test_max_parameter_replaces_the_default if {
	count(policy.deny) == 0 with input as review([container("vllm", 9)], {"max": 12})
	policy.deny == {`each pod of Deployment "llama" asks for 4 GPUs (container "vllm"); at most 2 are allowed per pod in namespace "team-a"`} with input as review([container("vllm", 4)], {"max": 2})
}

test_max_zero_forbids_gpus if {
	policy.deny == {`each pod of Deployment "llama" asks for 1 GPU (container "vllm"); at most 0 are allowed per pod in namespace "team-a"`} with input as review([container("vllm", 1)], {"max": 0})
}

test_namespace_override_raises_the_limit if {
	params := {"max": 8, "namespaces": {"research": 16}}
	count(policy.deny) == 0 with input as in_namespace(review([container("trainer", 16)], params), "research")
	policy.deny == {`each pod of Deployment "llama" asks for 17 GPUs (container "trainer"); at most 16 are allowed per pod in namespace "research"`} with input as in_namespace(review([container("trainer", 17)], params), "research")
}

test_namespace_override_lowers_the_limit if {
	params := {"max": 8, "namespaces": {"sandbox": 1}}
	policy.deny == {`each pod of Deployment "llama" asks for 2 GPUs (container "vllm"); at most 1 is allowed per pod in namespace "sandbox"`} with input as in_namespace(review([container("vllm", 2)], params), "sandbox")
}

test_override_applies_only_to_its_namespace if {
	params := {"namespaces": {"research": 16}}
	policy.deny == {`each pod of Deployment "llama" asks for 16 GPUs (container "trainer"); at most 8 are allowed per pod in namespace "team-a"`} with input as review([container("trainer", 16)], params)
}

test_names_each_container_when_several_ask if {
	r := review([container("a", 6), container("sidecar", 0), container("b", 4)], {})
	policy.deny == {`each pod of Deployment "llama" asks for 10 GPUs (container "a": 6, container "b": 4); at most 8 are allowed per pod in namespace "team-a"`} with input as r
}

test_counts_a_larger_init_container if {
	r := object.union(review([container("vllm", 1)], {}), {"workload": {
		"initContainers": [container("warmup", 12)],
		"gpu": {"count": 12},
	}})
	policy.deny == {`each pod of Deployment "llama" asks for 12 GPUs (container "vllm": 1, init container "warmup": 12); at most 8 are allowed per pod in namespace "team-a"`} with input as r
}

test_names_a_lone_init_container if {
	r := object.union(review([container("app", 0)], {}), {"workload": {
		"initContainers": [container("warmup", 10)],
		"gpu": {"count": 10},
	}})
	policy.deny == {`each pod of Deployment "llama" asks for 10 GPUs (init container "warmup"); at most 8 are allowed per pod in namespace "team-a"`} with input as r
}

test_names_the_pods_in_the_workloads_own_words if {
	r := review([container("a", 6), container("b", 4)], {})
	policy.deny == {`pod asks for 10 GPUs (container "a": 6, container "b": 4); at most 8 are allowed per pod in namespace "team-a"`} with input as of_kind(r, "Pod", "v1", "llama-0")
	policy.deny == {`each pod of CronJob "nightly-eval" asks for 10 GPUs (container "a": 6, container "b": 4); at most 8 are allowed per pod in namespace "team-a"`} with input as of_kind(r, "CronJob", "batch/v1", "nightly-eval")
	policy.deny == {`each pod of Job "pretrain" asks for 10 GPUs (container "a": 6, container "b": 4); at most 8 are allowed per pod in namespace "team-a"`} with input as of_kind(r, "Job", "batch/v1", "pretrain")
}

dra_device(mode, n) := {"claim": "modelgate-gpu", "request": "gpu", "deviceClass": "gpu.nvidia.com", "allocationMode": mode, "count": n, "gpu": true}

with_devices(r, devices, unresolved) := object.union(r, {"workload": {"gpu": {"devices": devices, "unresolvedClaims": unresolved}}})

test_counts_dra_gpus_as_limits if {
	# The view counts a claim's GPUs into the container's gpus.
	r := with_devices(review([container("vllm", 12)], {}), [dra_device("ExactCount", 12)], [])
	some msg in policy.deny with input as r
	contains(msg, "12 GPUs")
}

test_denies_a_gpu_claim_for_every_device if {
	r := with_devices(review([container("vllm", 0)], {}), [dra_device("All", 0)], [])
	policy.deny == {`each pod of Deployment "llama" asks for every GPU of a node (resource claim "modelgate-gpu", request "gpu": allocationMode All of device class "gpu.nvidia.com"); ask for an exact count, at most 8 per pod`} with input as r
}

test_allows_an_all_request_for_other_devices if {
	nic := object.union(dra_device("All", 0), {"deviceClass": "rdma.example.com", "gpu": false})
	r := with_devices(review([container("vllm", 1)], {}), [nic], [])
	count(policy.deny) == 0 with input as r
}

test_denies_an_unresolved_claim if {
	r := with_devices(review([container("vllm", 1)], {}), [], ["accel"])
	policy.deny == {`each pod of Deployment "llama" uses resource claim "accel", whose ResourceClaimTemplate or ResourceClaim was not found in namespace "team-a", so its GPUs cannot be counted; create it first, then retry`} with input as r
}

# claim_review is the view of a ResourceClaim or ResourceClaimTemplate named
# "big": no containers, its requests as devices, their GPUs as its count.
claim_review(kind, devices, params) := {
	"workload": object.union(base, {
		"kind": kind, "apiVersion": "resource.k8s.io/v1", "name": "big",
		"owner": "", "team": "", "injected": false, "servingContainer": "",
		"containers": [], "initContainers": [], "ephemeralContainers": [],
		"gpu": {
			"resource": "nvidia.com/gpu", "products": [], "memoryMiB": 0,
			"count": sum([d.count | some d in devices; d.gpu]),
			"claims": ["big"], "devices": devices, "unresolvedClaims": [],
		},
		"engine": "", "serving": false,
	}),
	"object": {"kind": kind},
	"oldObject": null,
	"parameters": params,
}

claim_device(request, mode, n) := {"claim": "big", "request": request, "deviceClass": "gpu.nvidia.com", "allocationMode": mode, "count": n, "gpu": true}

test_allows_a_claim_within_the_limit if {
	count(policy.deny) == 0 with input as claim_review("ResourceClaim", [claim_device("gpu", "ExactCount", 8)], {})
	count(policy.deny) == 0 with input as claim_review("ResourceClaimTemplate", [claim_device("gpu", "ExactCount", 8)], {})
}

test_denies_a_claim_asking_for_more_than_a_pod_may_hold if {
	policy.deny == {`ResourceClaim "big" asks for 16 GPUs (request "gpu"); at most 8 are allowed per pod in namespace "team-a"`} with input as claim_review("ResourceClaim", [claim_device("gpu", "ExactCount", 16)], {})
	policy.deny == {`ResourceClaimTemplate "big" asks for 10 GPUs (request "a": 4, request "b": 6); at most 8 are allowed per pod in namespace "team-a"`} with input as claim_review("ResourceClaimTemplate", [claim_device("a", "ExactCount", 4), claim_device("b", "ExactCount", 6)], {})
}

test_holds_a_claim_to_its_namespaces_limit if {
	params := {"max": 8, "namespaces": {"sandbox": 1}}
	policy.deny == {`ResourceClaim "big" asks for 2 GPUs (request "gpu"); at most 1 is allowed per pod in namespace "sandbox"`} with input as in_namespace(claim_review("ResourceClaim", [claim_device("gpu", "ExactCount", 2)], params), "sandbox")
}

test_denies_a_claim_for_every_gpu_of_a_node if {
	policy.deny == {`ResourceClaim "big" asks for every GPU of a node (request "gpu": allocationMode All of device class "gpu.nvidia.com"); ask for an exact count, at most 8 per pod`} with input as claim_review("ResourceClaim", [claim_device("gpu", "All", 0)], {})
	policy.deny == {`ResourceClaimTemplate "big" asks for every GPU of a node (request "gpu": allocationMode All of device class "gpu.nvidia.com"); ask for an exact count, at most 8 per pod`} with input as claim_review("ResourceClaimTemplate", [claim_device("gpu", "All", 0)], {})
}

test_allows_a_claim_for_every_nic_of_a_node if {
	nic := object.union(claim_device("nic", "All", 0), {"deviceClass": "rdma.example.com", "gpu": false})
	count(policy.deny) == 0 with input as claim_review("ResourceClaim", [nic], {})
}
