# gpu-limits-required: a container that requests GPUs must set a limit equal
# to its request.
#
# GPUs cannot be shared or overcommitted: the device plugin hands out whole
# devices by the limit. Kubernetes itself requires extended resources'
# requests and limits to be equal; this policy states the rule at admission in
# modelgate's answer form, naming the container and the value to set. The GPU
# resource is input.workload.gpu.resource (nvidia.com/gpu unless the
# Configuration names another), and quantities are compared as numbers, so
# "1" equals "1000m". App and init containers are both checked.
#
# Parameters: none.
#
# Not covered: a limit without a request (Kubernetes then sets the request to
# the limit), GPU resources under other names (MIG slices such as
# nvidia.com/mig-1g.10gb), and how many GPUs are asked for (see
# max-gpus-per-pod).
package modelgate.library.gpu_limits_required

resource := input.workload.gpu.resource

# containers pairs every container with how messages name it.
containers contains ["container", c] if some c in input.workload.containers

containers contains ["init container", c] if some c in input.workload.initContainers

deny contains msg if {
	some [what, c] in containers
	request := c.resources.requests[resource]
	not has_limit(c)
	msg := sprintf("%s %q requests %v %s but sets no limit; set resources.limits[%q] to %v, equal to the request", [
		what, c.name, request, resource, resource, request,
	])
}

deny contains msg if {
	some [what, c] in containers
	request := c.resources.requests[resource]
	limit := c.resources.limits[resource]
	quantity(limit) != quantity(request)
	msg := sprintf("%s %q requests %v %s but limits it to %v; resources.limits[%q] must equal the request (%v)", [
		what, c.name, request, resource, limit, resource, request,
	])
}

has_limit(c) if c.resources.limits[resource]

# quantity turns a Kubernetes quantity ("2", "2000m") into a number.
quantity(q) := units.parse(q) if is_string(q)

quantity(q) := q if is_number(q)
