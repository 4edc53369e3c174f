# model-source-allowlist: models (annotation modelgate.io/model) may only come
# from the schemes, buckets, Hugging Face organizations and hosts a platform
# team lists.
#
# Each list restricts one dimension; an empty or absent list leaves that
# dimension unrestricted. Buckets apply to s3 and gs models, organizations to
# hf models, hosts to https models (host[:port]) and oci models (the
# registry[:port]). A model whose scheme is not allowed is one violation,
# for its scheme only: the other lists apply to models whose scheme is
# allowed. Hosts are compared without regard to case, everything else
# exactly.
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

# Each rule reads input.workload.model and input.parameters directly, which is
# cheaper than going through helper rules, and tests the model before building
# anything. A test of an input field against constants (the scheme in
# {"s3", "gs"}) lets OPA skip a rule without evaluating it. A list is read in
# the rule that needs it, and checked for emptiness only once the model is not
# in it. The bucket, organization and host rules test scheme_allowed last: a
# model with a scheme not allowed breaks only the schemes list, since another
# scheme would mean another bucket, organization or host anyway.

deny contains msg if {
	allowed := object.get(input.parameters, "schemes", [])
	not input.workload.model.scheme in allowed
	count(allowed) > 0
	msg := sprintf("modelgate.io/model %q uses scheme %q; allowed schemes: %s", [
		input.workload.model.uri,
		input.workload.model.scheme,
		quoted(allowed),
	])
}

deny contains msg if {
	input.workload.model.scheme in {"s3", "gs"}
	allowed := object.get(input.parameters, "buckets", [])
	not input.workload.model.bucket in allowed
	count(allowed) > 0
	scheme_allowed
	msg := sprintf("modelgate.io/model %q is in bucket %q; allowed buckets: %s", [
		input.workload.model.uri,
		input.workload.model.bucket,
		quoted(allowed),
	])
}

deny contains msg if {
	input.workload.model.scheme == "hf"
	allowed := object.get(input.parameters, "hfOrgs", [])
	not input.workload.model.org in allowed
	count(allowed) > 0
	scheme_allowed
	msg := sprintf("modelgate.io/model %q is from Hugging Face organization %q; allowed organizations: %s", [
		input.workload.model.uri,
		input.workload.model.org,
		quoted(allowed),
	])
}

deny contains msg if {
	input.workload.model.scheme in {"https", "oci"}
	what := {"https": "host", "oci": "registry"}[input.workload.model.scheme]
	allowed := object.get(input.parameters, "hosts", [])
	not lower(input.workload.model.host) in {lower(h) | some h in allowed}
	count(allowed) > 0
	scheme_allowed
	msg := sprintf("modelgate.io/model %q comes from %s %q; allowed hosts: %s", [
		input.workload.model.uri,
		what,
		input.workload.model.host,
		quoted(allowed),
	])
}

# scheme_allowed: the model's scheme is in the schemes list, or the list is
# empty or absent.
scheme_allowed if input.workload.model.scheme in object.get(input.parameters, "schemes", [])

scheme_allowed if count(object.get(input.parameters, "schemes", [])) == 0

quoted(names) := concat(", ", [sprintf("%q", [n]) | some n in names])
