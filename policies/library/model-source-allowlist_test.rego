package modelgate.library.model_source_allowlist_test

import data.modelgate.library.model_source_allowlist as policy

params := {
	"schemes": ["s3", "hf", "oci", "https", "pvc"],
	"buckets": ["acme-models"],
	"hfOrgs": ["meta-llama", "acme"],
	"hosts": ["registry.acme.internal", "files.acme.internal:8443"],
}

# Models as the contract describes them, one per scheme.
hf(org, repo) := model(sprintf("hf://%s/%s", [org, repo]), {"scheme": "hf", "path": sprintf("%s/%s", [org, repo]), "org": org})

s3(bucket) := model(sprintf("s3://%s/llama", [bucket]), {"scheme": "s3", "bucket": bucket, "path": "llama"})

gs(bucket) := model(sprintf("gs://%s/llama", [bucket]), {"scheme": "gs", "bucket": bucket, "path": "llama"})

https(host) := model(sprintf("https://%s/llama.safetensors", [host]), {"scheme": "https", "host": host, "path": "llama.safetensors"})

oci(registry) := model(sprintf("oci://%s/models/llama:v1", [registry]), {"scheme": "oci", "host": registry, "path": "models/llama", "tag": "v1"})

pvc := model("pvc://models/llama", {"scheme": "pvc", "claim": "models", "path": "llama"})

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

test_allows_listed_sources if {
	count(policy.deny) == 0 with input as review(hf("meta-llama", "Llama-3.1-8B"), params)
	count(policy.deny) == 0 with input as review(s3("acme-models"), params)
	count(policy.deny) == 0 with input as review(https("files.acme.internal:8443"), params)
	count(policy.deny) == 0 with input as review(oci("registry.acme.internal"), params)
	count(policy.deny) == 0 with input as review(pvc, params)
}

test_allows_a_workload_without_a_model if {
	count(policy.deny) == 0 with input as review(null, params)
}

test_allows_everything_without_parameters if {
	count(policy.deny) == 0 with input as review(gs("anything"), {})
	count(policy.deny) == 0 with input as review(hf("someone", "model"), {})
	count(policy.deny) == 0 with input as review(https("example.com"), {})
}

test_empty_lists_leave_a_dimension_unrestricted if {
	p := {"schemes": [], "buckets": [], "hfOrgs": [], "hosts": []}
	count(policy.deny) == 0 with input as review(gs("anything"), p)
	count(policy.deny) == 0 with input as review(oci("ghcr.io"), p)
}

test_denies_an_unlisted_scheme if {
	policy.deny == {`modelgate.io/model "gs://acme-models/llama" uses scheme "gs"; allowed schemes: "s3", "hf", "oci", "https", "pvc"`} with input as review(gs("acme-models"), params)
}

test_denies_an_unlisted_scheme_on_update if {
	policy.deny == {`modelgate.io/model "gs://acme-models/llama" uses scheme "gs"; allowed schemes: "s3", "hf", "oci", "https", "pvc"`} with input as update(review(gs("acme-models"), params))
}

test_denies_an_unlisted_bucket if {
	policy.deny == {`modelgate.io/model "s3://scratch/llama" is in bucket "scratch"; allowed buckets: "acme-models"`} with input as review(s3("scratch"), params)
}

test_buckets_apply_to_gs_too if {
	policy.deny == {`modelgate.io/model "gs://scratch/llama" is in bucket "scratch"; allowed buckets: "acme-models"`} with input as review(gs("scratch"), {"buckets": ["acme-models"]})
	count(policy.deny) == 0 with input as review(gs("acme-models"), {"buckets": ["acme-models"]})
}

test_reports_a_disallowed_scheme_alone if {
	p := {"schemes": ["s3", "hf"], "buckets": ["acme"], "hfOrgs": ["acme"], "hosts": ["registry.acme.internal"]}
	policy.deny == {`modelgate.io/model "gs://other-bucket/llama" uses scheme "gs"; allowed schemes: "s3", "hf"`} with input as review(gs("other-bucket"), p)
	policy.deny == {`modelgate.io/model "oci://ghcr.io/models/llama:v1" uses scheme "oci"; allowed schemes: "s3", "hf"`} with input as review(oci("ghcr.io"), p)
	policy.deny == {`modelgate.io/model "https://example.com/llama.safetensors" uses scheme "https"; allowed schemes: "s3", "hf"`} with input as review(https("example.com"), p)
}

test_other_lists_apply_when_the_scheme_is_allowed if {
	p := {"schemes": ["s3", "hf"], "buckets": ["acme"], "hfOrgs": ["acme"]}
	policy.deny == {`modelgate.io/model "s3://other-bucket/llama" is in bucket "other-bucket"; allowed buckets: "acme"`} with input as review(s3("other-bucket"), p)
	policy.deny == {`modelgate.io/model "hf://evil-corp/llama" is from Hugging Face organization "evil-corp"; allowed organizations: "acme"`} with input as review(hf("evil-corp", "llama"), p)
}

test_denies_an_unlisted_hf_org if {
	policy.deny == {`modelgate.io/model "hf://evil-corp/llama" is from Hugging Face organization "evil-corp"; allowed organizations: "meta-llama", "acme"`} with input as review(hf("evil-corp", "llama"), params)
}

test_compares_hf_orgs_exactly if {
	policy.deny == {`modelgate.io/model "hf://Meta-Llama/llama" is from Hugging Face organization "Meta-Llama"; allowed organizations: "meta-llama", "acme"`} with input as review(hf("Meta-Llama", "llama"), params)
}

test_denies_an_unlisted_https_host if {
	policy.deny == {`modelgate.io/model "https://example.com/llama.safetensors" comes from host "example.com"; allowed hosts: "registry.acme.internal", "files.acme.internal:8443"`} with input as review(https("example.com"), params)
}

test_hosts_include_the_port if {
	policy.deny == {`modelgate.io/model "https://files.acme.internal/llama.safetensors" comes from host "files.acme.internal"; allowed hosts: "registry.acme.internal", "files.acme.internal:8443"`} with input as review(https("files.acme.internal"), params)
}

test_hosts_ignore_case if {
	count(policy.deny) == 0 with input as review(https("Files.ACME.internal:8443"), params)
	count(policy.deny) == 0 with input as review(oci("registry.acme.internal"), {"hosts": ["Registry.Acme.Internal"]})
}

test_denies_an_unlisted_oci_registry if {
	policy.deny == {`modelgate.io/model "oci://ghcr.io/models/llama:v1" comes from registry "ghcr.io"; allowed hosts: "registry.acme.internal", "files.acme.internal:8443"`} with input as review(oci("ghcr.io"), params)
}

test_lists_do_not_apply_to_other_schemes if {
	p := {"buckets": ["acme-models"], "hfOrgs": ["acme"], "hosts": ["registry.acme.internal"]}
	count(policy.deny) == 0 with input as review(pvc, p)
	count(policy.deny) == 0 with input as review(hf("acme", "llama"), {"buckets": ["acme-models"], "hosts": ["registry.acme.internal"]})
	count(policy.deny) == 0 with input as review(s3("scratch"), {"hfOrgs": ["acme"], "hosts": ["registry.acme.internal"]})
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
		count(policy.deny) == 0 with input as claim_view(kind, {"schemes": ["s3"], "buckets": ["acme-ml-models"], "hfOrgs": ["meta-llama"], "hosts": ["models.example.com"]})
	}
}
