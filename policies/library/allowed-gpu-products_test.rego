package modelgate.library.allowed_gpu_products_test

import data.modelgate.library.allowed_gpu_products as policy

a100 := "NVIDIA-A100-SXM4-80GB"

h100 := "NVIDIA-H100-80GB-HBM3"

t4 := "Tesla-T4"

params := {"products": [a100, h100]}

# review builds an admission input in the contract's shape for a pod with
# one container asking for gpus GPUs of the given products.
review(gpus, products, parameters) := {
	"workload": object.union(base, {
		"containers": [container("vllm", gpus)],
		"gpu": {"resource": "nvidia.com/gpu", "count": gpus, "products": products, "memoryMiB": 0},
	}),
	"object": {"kind": "Deployment"},
	"oldObject": null,
	"parameters": parameters,
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

test_allows_listed_products if {
	count(policy.deny) == 0 with input as review(1, [a100], params)
	count(policy.deny) == 0 with input as review(1, [a100, h100], params)
}

test_allows_a_workload_naming_no_product_by_default if {
	count(policy.deny) == 0 with input as review(1, [], params)
}

test_allows_any_product_without_a_list if {
	count(policy.deny) == 0 with input as review(1, [t4], {})
	count(policy.deny) == 0 with input as review(1, [t4], {"products": []})
}

test_denies_an_unlisted_product if {
	policy.deny == {`requested GPU product "Tesla-T4" is not allowed in namespace "team-a"; allowed products: "NVIDIA-A100-SXM4-80GB", "NVIDIA-H100-80GB-HBM3"`} with input as review(1, [t4], params)
}

test_denies_an_unlisted_product_on_update if {
	policy.deny == {`requested GPU product "Tesla-T4" is not allowed in namespace "team-a"; allowed products: "NVIDIA-A100-SXM4-80GB", "NVIDIA-H100-80GB-HBM3"`} with input as update(review(1, [t4], params))
}

test_denies_each_unlisted_product_among_allowed_ones if {
	policy.deny == {
		`requested GPU product "Tesla-T4" is not allowed in namespace "team-a"; allowed products: "NVIDIA-A100-SXM4-80GB", "NVIDIA-H100-80GB-HBM3"`,
		`requested GPU product "NVIDIA-L4" is not allowed in namespace "team-a"; allowed products: "NVIDIA-A100-SXM4-80GB", "NVIDIA-H100-80GB-HBM3"`,
	} with input as review(2, [a100, t4, "NVIDIA-L4"], params)
}

test_compares_products_exactly if {
	policy.deny == {`requested GPU product "nvidia-a100-sxm4-80gb" is not allowed in namespace "team-a"; allowed products: "NVIDIA-A100-SXM4-80GB", "NVIDIA-H100-80GB-HBM3"`} with input as review(1, ["nvidia-a100-sxm4-80gb"], params)
}

test_namespace_list_replaces_the_default if {
	p := object.union(params, {"namespaces": {"sandbox": ["NVIDIA-L4"]}})
	count(policy.deny) == 0 with input as in_namespace(review(1, ["NVIDIA-L4"], p), "sandbox")
	policy.deny == {`requested GPU product "NVIDIA-A100-SXM4-80GB" is not allowed in namespace "sandbox"; allowed products: "NVIDIA-L4"`} with input as in_namespace(review(1, [a100], p), "sandbox")
}

test_namespace_list_applies_only_to_its_namespace if {
	p := object.union(params, {"namespaces": {"sandbox": ["NVIDIA-L4"]}})
	policy.deny == {`requested GPU product "NVIDIA-L4" is not allowed in namespace "team-a"; allowed products: "NVIDIA-A100-SXM4-80GB", "NVIDIA-H100-80GB-HBM3"`} with input as review(1, ["NVIDIA-L4"], p)
}

test_empty_namespace_list_allows_any_product if {
	p := object.union(params, {"namespaces": {"research": []}})
	count(policy.deny) == 0 with input as in_namespace(review(1, [t4], p), "research")
}

test_require_product_denies_a_gpu_workload_without_one if {
	p := object.union(params, {"requireProduct": true})
	policy.deny == {`each pod of Deployment "llama" asks for 2 GPUs but names no GPU product; set modelgate.io/gpu-product to one of "NVIDIA-A100-SXM4-80GB", "NVIDIA-H100-80GB-HBM3" (allowed in namespace "team-a")`} with input as review(2, [], p)
	policy.deny == {`each pod of Deployment "llama" asks for 2 GPUs but names no GPU product; set modelgate.io/gpu-product to one of "NVIDIA-A100-SXM4-80GB", "NVIDIA-H100-80GB-HBM3" (allowed in namespace "team-a")`} with input as update(review(2, [], p))
}

test_require_product_without_a_list if {
	policy.deny == {`each pod of Deployment "llama" asks for 1 GPU but names no GPU product; set modelgate.io/gpu-product`} with input as review(1, [], {"requireProduct": true})
}

test_require_product_names_the_workload_in_its_own_words if {
	p := {"requireProduct": true}
	policy.deny == {`each pod of CronJob "nightly-eval" asks for 1 GPU but names no GPU product; set modelgate.io/gpu-product`} with input as of_kind(review(1, [], p), "CronJob", "batch/v1", "nightly-eval")
	policy.deny == {`each pod of StatefulSet "llama" asks for 1 GPU but names no GPU product; set modelgate.io/gpu-product`} with input as of_kind(review(1, [], p), "StatefulSet", "apps/v1", "llama")
	policy.deny == {`pod asks for 1 GPU but names no GPU product; set modelgate.io/gpu-product`} with input as of_kind(review(1, [], p), "Pod", "v1", "llama-0")
}

test_require_product_allows_a_workload_naming_one if {
	p := object.union(params, {"requireProduct": true})
	count(policy.deny) == 0 with input as review(1, [h100], p)
}

test_require_product_ignores_cpu_workloads if {
	p := object.union(params, {"requireProduct": true})
	count(policy.deny) == 0 with input as review(0, [], p)
}

test_require_product_is_off_unless_true if {
	count(policy.deny) == 0 with input as review(1, [], object.union(params, {"requireProduct": false}))
	count(policy.deny) == 0 with input as review(1, [], object.union(params, {"requireProduct": "yes"}))
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
		count(policy.deny) == 0 with input as claim_view(kind, {"products": ["NVIDIA-H100-80GB-HBM3"], "requireProduct": true})
	}
}
