# model-source-allowlist: models (annotation modelgate.io/model) may only come
# from the schemes, buckets, Hugging Face organizations and hosts a platform
# team lists.
#
# Each list restricts one dimension; an empty or absent list leaves that
# dimension unrestricted. A model can break several lists at once, and each
# is one violation. Buckets apply to s3 and gs models, organizations to hf
# models, hosts to https models (host[:port]) and oci models (the
# registry[:port]). Hosts are compared without regard to case, everything
# else exactly.
#
# Parameters:
#   schemes  allowed schemes: s3, gs, hf, pvc, https, oci
#   buckets  allowed s3 and gs bucket names (without the scheme)
#   hfOrgs   allowed Hugging Face organizations (the first path segment)
#   hosts    allowed https hosts and oci registries, with the port if the
#            URI has one
#
#   {"schemes": ["s3", "hf", "oci", "pvc"],
#    "buckets": ["acme-models"],
#    "hfOrgs": ["meta-llama", "mistralai", "acme"],
#    "hosts": ["registry.acme.internal"]}
#
# Not covered: workloads without a model or with a model annotation modelgate
# could not parse (input.workload.model is null; modelgate's own validation
# reports bad values), which PersistentVolumeClaims pvc models use, and models
# a container downloads by itself (its image, arguments or environment).
package modelgate.library.model_source_allowlist

model := input.workload.model

listed(name) := object.get(input.parameters, [name], [])

deny contains msg if {
	allowed := listed("schemes")
	count(allowed) > 0
	not model.scheme in allowed
	msg := sprintf("modelgate.io/model %q uses scheme %q; allowed schemes: %s", [model.uri, model.scheme, quoted(allowed)])
}

deny contains msg if {
	model.scheme in {"s3", "gs"}
	allowed := listed("buckets")
	count(allowed) > 0
	not model.bucket in allowed
	msg := sprintf("modelgate.io/model %q is in bucket %q; allowed buckets: %s", [model.uri, model.bucket, quoted(allowed)])
}

deny contains msg if {
	model.scheme == "hf"
	allowed := listed("hfOrgs")
	count(allowed) > 0
	not model.org in allowed
	msg := sprintf("modelgate.io/model %q is from Hugging Face organization %q; allowed organizations: %s", [
		model.uri,
		model.org,
		quoted(allowed),
	])
}

deny contains msg if {
	what := host_kinds[model.scheme]
	allowed := listed("hosts")
	count(allowed) > 0
	not lower(model.host) in {lower(h) | some h in allowed}
	msg := sprintf("modelgate.io/model %q comes from %s %q; allowed hosts: %s", [
		model.uri,
		what,
		model.host,
		quoted(allowed),
	])
}

# host_kinds are the schemes the hosts list applies to, and what their host is.
host_kinds := {"https": "host", "oci": "registry"}

quoted(names) := concat(", ", [sprintf("%q", [n]) | some n in names])
