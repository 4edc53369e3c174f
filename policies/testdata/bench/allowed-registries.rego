package modelgate.registries

containers contains c if some c in input.workload.containers

containers contains c if some c in input.workload.initContainers

deny contains {"msg": msg, "details": {"container": c.name, "image": c.image}} if {
	some c in containers
	not allowed(c.image)
	msg := sprintf("container %s: image %s is not from an allowed registry", [c.name, c.image])
}

allowed(image) if {
	some prefix in input.parameters.registries
	startswith(image, prefix)
}
