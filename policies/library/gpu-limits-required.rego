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

# One rule per container list, iterating it directly: cheaper than collecting
# the containers first. A limit equal to the request, the common case, stops
# the rule at one comparison; problem tells a missing limit from a different
# quantity only after that. The rules read input.workload.gpu.resource
# directly: cheaper than the resource rule, which the messages use.

deny contains msg if {
	some c in input.workload.containers
	request := c.resources.requests[input.workload.gpu.resource]
	not c.resources.limits[input.workload.gpu.resource] == request
	msg := problem("container", c.name, request, c.resources)
}

deny contains msg if {
	some c in input.workload.initContainers
	request := c.resources.requests[input.workload.gpu.resource]
	not c.resources.limits[input.workload.gpu.resource] == request
	msg := problem("init container", c.name, request, c.resources)
}

# problem is what is wrong with a container's GPU limit, given its request:
# there is none, or it is a different quantity.
problem(what, name, request, resources) := sprintf("%s %q requests %v %s but sets no limit; set resources.limits[%q] to %v, equal to the request", [
	what, name, request, resource, resource, request,
]) if {
	not resources.limits[resource]
} else := sprintf("%s %q requests %v %s but limits it to %v; resources.limits[%q] must equal the request (%v)", [
	what, name, request, resource, limit, resource, request,
]) if {
	limit := resources.limits[resource]
	quantity(limit) != quantity(request)
}

# quantity turns a Kubernetes quantity ("2", "2000m") into a number.
quantity(q) := units.parse(q) if is_string(q)

quantity(q) := q if is_number(q)
