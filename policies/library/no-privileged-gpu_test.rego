package modelgate.library.no_privileged_gpu_test

import data.modelgate.library.no_privileged_gpu as policy

# review builds an admission input in the contract's shape for a pod with
# the given containers and pod-level fields.
review(containers, init_containers, pod) := {
	"workload": object.union(object.union(base, pod), {
		"containers": containers,
		"initContainers": init_containers,
		"gpu": {"resource": "nvidia.com/gpu", "count": sum([c.gpus | some c in containers]), "products": [], "memoryMiB": 0},
	}),
	"object": {"kind": "Pod"},
	"oldObject": null,
	"parameters": {},
}

base := {
	"kind": "Pod", "apiVersion": "v1",
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

privileged(c) := object.union(c, {"securityContext": {"privileged": true}, "privileged": true})

update(r) := object.union(r, {"workload": {"operation": "UPDATE"}, "oldObject": {"kind": "Pod"}})

test_allows_an_unprivileged_gpu_pod if {
	count(policy.deny) == 0 with input as review([container("vllm", 1)], [], {})
}

test_allows_privileged_containers_without_gpus if {
	count(policy.deny) == 0 with input as review([container("vllm", 1), privileged(container("agent", 0))], [privileged(container("setup", 0))], {})
}

test_allows_host_namespaces_without_gpus if {
	count(policy.deny) == 0 with input as review([container("exporter", 0)], [], {"hostNetwork": true, "hostPID": true, "hostIPC": true})
}

test_denies_a_privileged_gpu_container if {
	policy.deny == {`container "vllm" has 2 GPUs and sets securityContext.privileged: true; containers with GPUs must not be privileged`} with input as review([privileged(container("vllm", 2))], [], {})
}

test_denies_a_privileged_gpu_container_on_update if {
	policy.deny == {`container "vllm" has 1 GPU and sets securityContext.privileged: true; containers with GPUs must not be privileged`} with input as update(review([privileged(container("vllm", 1))], [], {}))
}

test_denies_a_privileged_gpu_init_container if {
	policy.deny == {`init container "warmup" has 1 GPU and sets securityContext.privileged: true; containers with GPUs must not be privileged`} with input as review([container("vllm", 1)], [privileged(container("warmup", 1))], {})
}

test_denies_host_network if {
	policy.deny == {`pod sets hostNetwork: true and has GPUs (container "vllm"); pods with GPUs must not share the host's network namespace`} with input as review([container("vllm", 1)], [], {"hostNetwork": true})
}

test_denies_host_pid if {
	policy.deny == {`pod sets hostPID: true and has GPUs (container "vllm"); pods with GPUs must not share the host's process ID namespace`} with input as review([container("vllm", 1)], [], {"hostPID": true})
}

test_denies_host_ipc_naming_every_gpu_container if {
	policy.deny == {`pod sets hostIPC: true and has GPUs (container "a", container "b", init container "warmup"); pods with GPUs must not share the host's IPC namespace`} with input as review([container("a", 1), container("sidecar", 0), container("b", 1)], [container("warmup", 1)], {"hostIPC": true})
}

test_names_the_pods_of_a_workload if {
	policy.deny == {`each pod of CronJob "nightly-eval" sets hostNetwork: true and has GPUs (container "vllm"); pods with GPUs must not share the host's network namespace`} with input as review([container("vllm", 1)], [], {"kind": "CronJob", "apiVersion": "batch/v1", "name": "nightly-eval", "hostNetwork": true})
	policy.deny == {`each pod of Deployment "llama" sets hostPID: true and has GPUs (container "vllm"); pods with GPUs must not share the host's process ID namespace`} with input as review([container("vllm", 1)], [], {"kind": "Deployment", "apiVersion": "apps/v1", "hostPID": true})
}

test_denies_every_violation_at_once if {
	policy.deny == {
		`container "vllm" has 1 GPU and sets securityContext.privileged: true; containers with GPUs must not be privileged`,
		`pod sets hostNetwork: true and has GPUs (container "vllm"); pods with GPUs must not share the host's network namespace`,
		`pod sets hostPID: true and has GPUs (container "vllm"); pods with GPUs must not share the host's process ID namespace`,
		`pod sets hostIPC: true and has GPUs (container "vllm"); pods with GPUs must not share the host's IPC namespace`,
	} with input as update(review([privileged(container("vllm", 1))], [], {"hostNetwork": true, "hostPID": true, "hostIPC": true}))
}

claimed(c, names) := object.union(c, {"gpus": 0, "resources": {"limits": {}, "requests": {}}, "claims": names})

debugger(priv) := {
	"name": "debugger", "image": "busybox", "gpus": 0, "claims": [],
	"resources": {"limits": {}, "requests": {}},
	"securityContext": {"privileged": priv}, "privileged": priv, "ports": [],
	"readinessProbe": false, "startupProbe": false, "livenessProbe": false,
}

with_debugger(r, priv) := object.union(r, {"workload": {"ephemeralContainers": [debugger(priv)], "operation": "UPDATE"}})

test_denies_a_privileged_container_with_a_resource_claim if {
	policy.deny == {`container "vllm" has resource claims "gpu" and sets securityContext.privileged: true; containers with GPUs must not be privileged`} with input as review([privileged(claimed(container("vllm", 0), ["gpu"]))], [], {})
}

test_denies_host_namespaces_with_a_resource_claim if {
	policy.deny == {`pod sets hostNetwork: true and has GPUs (container "vllm"); pods with GPUs must not share the host's network namespace`} with input as review([claimed(container("vllm", 0), ["gpu"])], [], {"hostNetwork": true})
}

test_denies_a_privileged_debug_container_in_a_gpu_pod if {
	policy.deny == {`ephemeral container "debugger" sets securityContext.privileged: true in pod, which has GPUs (container "vllm"); debug containers in pods with GPUs must not be privileged`} with input as with_debugger(review([container("vllm", 1)], [], {}), true)
}

test_allows_an_unprivileged_debug_container_in_a_gpu_pod if {
	count(policy.deny) == 0 with input as with_debugger(review([container("vllm", 1)], [], {}), false)
}

test_allows_a_privileged_debug_container_in_a_pod_without_gpus if {
	count(policy.deny) == 0 with input as with_debugger(review([container("web", 0)], [], {}), true)
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
