package modelgate.library.pinned_model_revisions_test

import data.modelgate.library.pinned_model_revisions as policy

commit := "0e9e39f249a16976918f6564b8830bc894c89659"

digest := "sha256:6c3c624b58dbbcd3c0dd82b4c53f04194d1247c6eebdaab7c610cf7d66709b3b"

# Models as the contract describes them.
hf(revision) := model(hf_uri(revision), {
	"scheme": "hf", "path": "meta-llama/Llama-3.1-8B", "org": "meta-llama",
	"revision": revision, "pinned": regex.match(`^[0-9a-f]{40}$`, revision),
})

hf_uri("") := "hf://meta-llama/Llama-3.1-8B"

hf_uri(revision) := sprintf("hf://meta-llama/Llama-3.1-8B@%s", [revision]) if revision != ""

oci_tag := model("oci://ghcr.io/acme/llama:v1", {"scheme": "oci", "host": "ghcr.io", "path": "acme/llama", "tag": "v1"})

oci_digest := model(sprintf("oci://ghcr.io/acme/llama@%s", [digest]), {
	"scheme": "oci", "host": "ghcr.io", "path": "acme/llama",
	"digest": digest, "pinned": true,
})

oci_tag_and_digest := model(sprintf("oci://ghcr.io/acme/llama:v1@%s", [digest]), {
	"scheme": "oci", "host": "ghcr.io", "path": "acme/llama",
	"tag": "v1", "digest": digest, "pinned": true,
})

model(uri, fields) := object.union(
	{
		"uri": uri, "scheme": "", "bucket": "", "host": "", "path": "", "org": "", "claim": "",
		"revision": "", "tag": "", "digest": "", "pinned": false,
	},
	fields,
)

# review builds an admission input in the contract's shape for a Deployment
# serving model m (null for none).
review(m, parameters) := {
	"workload": object.union(base, {"model": m}),
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

update(r) := object.union(r, {"workload": {"operation": "UPDATE"}, "oldObject": {"kind": "Deployment"}})

test_allows_pinned_models if {
	count(policy.deny) == 0 with input as review(hf(commit), {})
	count(policy.deny) == 0 with input as review(oci_digest, {})
	count(policy.deny) == 0 with input as review(oci_tag_and_digest, {})
}

test_allows_a_workload_without_a_model if {
	count(policy.deny) == 0 with input as review(null, {})
}

test_allows_schemes_that_cannot_be_pinned if {
	s3 := model("s3://acme-models/llama", {"scheme": "s3", "bucket": "acme-models", "path": "llama"})
	https := model("https://files.acme.internal/llama.gguf", {"scheme": "https", "host": "files.acme.internal", "path": "llama.gguf"})
	pvc := model("pvc://models/llama", {"scheme": "pvc", "claim": "models", "path": "llama"})
	count(policy.deny) == 0 with input as review(s3, {})
	count(policy.deny) == 0 with input as review(https, {})
	count(policy.deny) == 0 with input as review(pvc, {})
	count(policy.deny) == 0 with input as review(s3, {"schemes": ["hf", "oci", "s3", "https", "pvc"]})
}

test_denies_hf_without_a_revision if {
	policy.deny == {`modelgate.io/model "hf://meta-llama/Llama-3.1-8B" names no revision; pin a commit: hf://meta-llama/Llama-3.1-8B@<40-hex commit>`} with input as review(hf(""), {})
}

test_denies_hf_on_a_branch if {
	policy.deny == {`modelgate.io/model "hf://meta-llama/Llama-3.1-8B@main" names revision "main", a branch or tag that can move; pin a commit: hf://meta-llama/Llama-3.1-8B@<40-hex commit>`} with input as review(hf("main"), {})
}

test_denies_hf_on_an_abbreviated_commit if {
	policy.deny == {`modelgate.io/model "hf://meta-llama/Llama-3.1-8B@0e9e39f" names revision "0e9e39f", a branch or tag that can move; pin a commit: hf://meta-llama/Llama-3.1-8B@<40-hex commit>`} with input as review(hf("0e9e39f"), {})
}

test_denies_an_unpinned_model_on_update if {
	policy.deny == {`modelgate.io/model "hf://meta-llama/Llama-3.1-8B@main" names revision "main", a branch or tag that can move; pin a commit: hf://meta-llama/Llama-3.1-8B@<40-hex commit>`} with input as update(review(hf("main"), {}))
	policy.deny == {`modelgate.io/model "oci://ghcr.io/acme/llama:v1" names tag "v1", which can move; pin a digest: oci://ghcr.io/acme/llama@sha256:<64-hex digest>`} with input as update(review(oci_tag, {}))
}

test_denies_oci_with_only_a_tag if {
	policy.deny == {`modelgate.io/model "oci://ghcr.io/acme/llama:v1" names tag "v1", which can move; pin a digest: oci://ghcr.io/acme/llama@sha256:<64-hex digest>`} with input as review(oci_tag, {})
}

test_schemes_parameter_chooses_what_must_be_pinned if {
	count(policy.deny) == 0 with input as review(oci_tag, {"schemes": ["hf"]})
	policy.deny == {`modelgate.io/model "hf://meta-llama/Llama-3.1-8B@main" names revision "main", a branch or tag that can move; pin a commit: hf://meta-llama/Llama-3.1-8B@<40-hex commit>`} with input as review(hf("main"), {"schemes": ["hf"]})
	count(policy.deny) == 0 with input as review(hf("main"), {"schemes": ["oci"]})
	count(policy.deny) == 0 with input as review(hf("main"), {"schemes": []})
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
