# max-gpus-per-pod: caps the number of GPUs one pod may ask for, with
# per-namespace limits.
#
# A pod's GPUs are input.workload.gpu.count: the sum over its containers, or
# its largest init container when that asks for more. A container's GPUs
# are its nvidia.com/gpu (and MIG) limits and the GPU devices of the
# resource claims it uses (DRA), so a DRA pod is held to the same limit. A
# GPU claim with allocationMode All, or one whose template cannot be found,
# is denied: its GPUs cannot be counted. For a Deployment,
# StatefulSet, Job or CronJob the limit applies to each pod of the template.
# It applies on CREATE and UPDATE alike.
#
# A ResourceClaim or ResourceClaimTemplate (judged when spec.match.kinds
# lists it) is held to the same limit at its own admission: the GPUs its
# requests ask for, and no GPU request with allocationMode All. A claim
# deleted and created again asking for more is then refused before any Pod
# that names it is scheduled.
#
# Parameters:
#   max         GPUs a pod may ask for in any namespace without its own
#               limit (default 8)
#   namespaces  namespace name -> limit; replaces max in that namespace
#               (higher or lower)
#
#   {"max": 8, "namespaces": {"research": 16, "sandbox": 1}}
#
# Not covered: GPUs summed over replicas or over a namespace (use a
# ResourceQuota on requests.nvidia.com/gpu), GPU slices exposed under other
# resource names (MIG profiles), and the parameters' types: a max that is not
# a number is not reported.
package modelgate.library.max_gpus_per_pod

deny contains msg if {
	# allowed is the limit in the workload's namespace: its own, else max. It
	# is computed here rather than in a rule of its own, which costs more.
	allowed := object.get(input.parameters, ["namespaces", input.workload.namespace], object.get(input.parameters, ["max"], 8))
	input.workload.gpu.count > allowed
	msg := sprintf("%s asks for %s (%s); %s per pod in namespace %q", [
		pods,
		gpus(input.workload.gpu.count),
		holding,
		at_most(allowed),
		input.workload.namespace,
	])
}

# A GPU request under DRA with allocationMode All takes every matching GPU of
# the node it lands on: no count to hold to the limit.
deny contains msg if {
	some d in input.workload.gpu.devices
	d.gpu
	d.allocationMode == "All"
	msg := sprintf("%s asks for every GPU of a node (%s: allocationMode All of device class %q); ask for an exact count, at most %v per pod", [
		pods, requested(d), d.deviceClass,
		object.get(input.parameters, ["namespaces", input.workload.namespace], object.get(input.parameters, ["max"], 8)),
	])
}

# A resource claim whose template or ResourceClaim modelgate cannot find
# may hold any number of GPUs: it is refused rather than let through
# uncounted. Create the template (or claim) before the pod.
deny contains msg if {
	some name in input.workload.gpu.unresolvedClaims
	msg := sprintf("%s uses resource claim %q, whose ResourceClaimTemplate or ResourceClaim was not found in namespace %q, so its GPUs cannot be counted; create it first, then retry", [
		pods, name, input.workload.namespace,
	])
}

# claim_kinds are judged by what they ask for: they have no containers.
claim_kinds := {"ResourceClaim", "ResourceClaimTemplate"}

# holders are the containers that ask for GPUs, in spec order; for a claim,
# its GPU requests.
holders := array.concat(
	array.concat(
		[{"who": sprintf("container %q", [c.name]), "gpus": c.gpus} |
			some c in input.workload.containers
			c.gpus > 0
		],
		[{"who": sprintf("init container %q", [c.name]), "gpus": c.gpus} |
			some c in input.workload.initContainers
			c.gpus > 0
		],
	),
	[{"who": sprintf("request %q", [d.request]), "gpus": d.count} |
		input.workload.kind in claim_kinds
		some d in input.workload.gpu.devices
		d.gpu
		d.count > 0
	],
)

# pods names the pods the workload runs, in its own words: "pod" for a Pod,
# each pod of Deployment "llama" for a workload with a pod template; a claim
# is named itself: ResourceClaim "big".
pods := "pod" if {
	input.workload.kind == "Pod"
} else := sprintf("%s %q", [input.workload.kind, input.workload.name]) if {
	input.workload.kind in claim_kinds
} else := sprintf("each pod of %s %q", [input.workload.kind, input.workload.name])

# requested names a device request: by its claim and name in a pod, by its
# name in a claim.
requested(d) := sprintf("request %q", [d.request]) if {
	input.workload.kind in claim_kinds
} else := sprintf("resource claim %q, request %q", [d.claim, d.request])

# holding names the containers that ask for the GPUs: the one that does, or
# each with its share.
holding := holders[0].who if {
	count(holders) == 1
} else := concat(", ", [sprintf("%s: %v", [h.who, h.gpus]) | some h in holders])

at_most(n) := "at most 1 is allowed" if {
	n == 1
} else := sprintf("at most %v are allowed", [n])

gpus(n) := "1 GPU" if {
	n == 1
} else := sprintf("%v GPUs", [n])
