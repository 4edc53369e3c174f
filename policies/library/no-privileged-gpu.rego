# no-privileged-gpu: containers with GPUs must not be privileged, and pods with
# GPU containers must not share the host's network, process or IPC namespace.
#
# A privileged container sees every device on the node, so it could use or
# snoop on GPUs assigned to other pods; host namespaces let a pod watch or
# disturb other workloads on an expensive shared node. A GPU container is one
# whose gpus (the limit of the GPU resource, else its request, plus NVIDIA MIG
# instances) is above zero, or that uses a resource claim (dynamic resource
# allocation: modelgate cannot see a claim's device class, so a claim counts
# as a GPU); app and init containers are both checked. A privileged ephemeral
# container (kubectl debug --profile=sysadmin) added to a pod with GPUs is
# denied too: it sees the pod's GPUs and every other device on the node.
#
# Parameters: none.
#
# Not covered: privileged containers without GPUs (they can still see the
# node's GPUs; use the Pod Security Admission "baseline" level for the whole
# pod), added capabilities such as SYS_ADMIN, allowPrivilegeEscalation and
# hostPath volumes.
package modelgate.library.no_privileged_gpu

# In each rule the rare condition (privileged, a host namespace) comes first,
# so the common, allowed workload is let through at the first test. A host
# namespace has a rule of its own: a test of an input field against a constant
# lets OPA skip the whole rule without evaluating it.

deny contains msg if {
	some c in input.workload.containers
	c.privileged == true
	has_gpus(c)
	msg := sprintf("container %q has %s and sets securityContext.privileged: true; containers with GPUs must not be privileged", [c.name, holds(c)])
}

deny contains msg if {
	some c in input.workload.initContainers
	c.privileged == true
	has_gpus(c)
	msg := sprintf("init container %q has %s and sets securityContext.privileged: true; containers with GPUs must not be privileged", [c.name, holds(c)])
}

deny contains msg if {
	some c in input.workload.ephemeralContainers
	c.privileged == true
	count(gpu_containers) > 0
	msg := sprintf("ephemeral container %q sets securityContext.privileged: true in %s, which has GPUs (%s); debug containers in pods with GPUs must not be privileged", [
		c.name, pods, concat(", ", gpu_containers),
	])
}

# has_gpus holds for a container with GPUs: a count, or a resource claim.
has_gpus(c) if c.gpus > 0

has_gpus(c) if count(c.claims) > 0

# holds says what GPUs a container has, in its own words.
holds(c) := gpus(c.gpus) if {
	c.gpus > 0
} else := sprintf("resource claims %s", [concat(", ", [sprintf("%q", [n]) | some n in c.claims])])

deny contains host_namespace("hostNetwork", "network namespace") if {
	input.workload.hostNetwork == true
	count(gpu_containers) > 0
}

deny contains host_namespace("hostPID", "process ID namespace") if {
	input.workload.hostPID == true
	count(gpu_containers) > 0
}

deny contains host_namespace("hostIPC", "IPC namespace") if {
	input.workload.hostIPC == true
	count(gpu_containers) > 0
}

host_namespace(field, namespace) := sprintf("%s sets %s: true and has GPUs (%s); pods with GPUs must not share the host's %s", [
	pods,
	field,
	concat(", ", gpu_containers),
	namespace,
])

# pods names the pods the workload runs, in its own words: "pod" for a Pod,
# each pod of Deployment "llama" for a workload with a pod template.
pods := "pod" if {
	input.workload.kind == "Pod"
} else := sprintf("each pod of %s %q", [input.workload.kind, input.workload.name])

# gpu_containers are the containers with GPUs, as messages name them.
gpu_containers := array.concat(
	[sprintf("container %q", [c.name]) | some c in input.workload.containers; has_gpus(c)],
	[sprintf("init container %q", [c.name]) | some c in input.workload.initContainers; has_gpus(c)],
)

gpus(n) := "1 GPU" if {
	n == 1
} else := sprintf("%v GPUs", [n])
