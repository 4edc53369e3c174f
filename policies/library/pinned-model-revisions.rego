# pinned-model-revisions: models must name an immutable version, so that
# every replica, and every restart, serves the same weights.
#
# An hf model must name a commit (hf://org/repo@<40 hex digits>), not a
# branch or tag; an oci model must name a digest
# (oci://registry/repo@sha256:<64 hex digits>), not only a tag. The rule reads
# input.workload.model.pinned. It applies on UPDATE too, so an existing
# workload with a moving model cannot be changed until it is pinned: start with
# enforcementAction warn.
#
# Parameters:
#   schemes  the schemes whose models must be pinned (default ["hf", "oci"]);
#            only hf and oci can be pinned this way, so other schemes listed
#            here are ignored
#
#   {"schemes": ["hf"]}
#
# Not covered: s3, gs, https and pvc models, whose URIs have no version (use
# bucket versioning or immutable object paths), and workloads without a model
# or whose model annotation modelgate could not parse.
package modelgate.library.pinned_model_revisions

schemes := object.get(input.parameters, ["schemes"], ["hf", "oci"])

# Each rule tests the model first, reading input.workload.model directly, and
# the schemes parameter last. Tests of input fields against constants
# (pinned == false) let OPA skip a rule without evaluating it, so a pinned
# model, the common case, costs almost nothing.

deny contains msg if {
	input.workload.model.revision == ""
	input.workload.model.scheme == "hf"
	input.workload.model.pinned == false
	"hf" in schemes
	msg := sprintf("modelgate.io/model %q names no revision; pin a commit: hf://%s@<40-hex commit>", [
		input.workload.model.uri,
		input.workload.model.path,
	])
}

deny contains msg if {
	input.workload.model.scheme == "hf"
	input.workload.model.pinned == false
	input.workload.model.revision != ""
	"hf" in schemes
	msg := sprintf("modelgate.io/model %q names revision %q, a branch or tag that can move; pin a commit: hf://%s@<40-hex commit>", [
		input.workload.model.uri,
		input.workload.model.revision,
		input.workload.model.path,
	])
}

deny contains msg if {
	input.workload.model.scheme == "oci"
	input.workload.model.pinned == false
	"oci" in schemes
	msg := sprintf("modelgate.io/model %q names tag %q, which can move; pin a digest: oci://%s/%s@sha256:<64-hex digest>", [
		input.workload.model.uri,
		input.workload.model.tag,
		input.workload.model.host,
		input.workload.model.path,
	])
}
