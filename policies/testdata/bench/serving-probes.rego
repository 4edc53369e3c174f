package modelgate.probes

warn contains sprintf("serving container %s has no %s", [c.name, probe]) if {
	input.workload.serving
	some c in input.workload.containers
	c.name == input.workload.servingContainer
	some probe in ["readinessProbe", "startupProbe"]
	not c[probe]
}
