# serving-readiness-probe: a workload that serves a model must have a
# readiness probe on its serving container, so that Services send it traffic
# only once the model is loaded (which can take many minutes).
#
# A workload serves when it names an engine (annotation modelgate.io/engine,
# input.workload.serving). The container checked is
# input.workload.servingContainer, or every container when that is empty:
# then the containers without one are reported together, in one violation.
# modelgate's serving-probes mutator adds the engine's readiness probe to
# opted-in workloads, so this mostly catches workloads that did not opt in.
# Jobs and CronJobs are skipped: training and batch jobs do not serve.
#
# Parameters: none.
#
# Not covered: whether the probe checks the right port and path, startup and
# liveness probes, and serving workloads that name no engine.
package modelgate.library.serving_readiness_probe

skipped_kinds := {"Job", "CronJob"}

deny contains msg if {
	input.workload.serving == true
	some c in input.workload.containers
	not c.readinessProbe # first: a container with a probe, the common case, stops here
	c.name == input.workload.servingContainer
	not input.workload.kind in skipped_kinds
	msg := sprintf("container %q serves a model (engine %q) but has no readinessProbe; add one so traffic waits until the model is loaded", [
		c.name,
		input.workload.engine,
	])
}

# No serving container is known (modelgate could not single one out of
# several): every container must have a probe, and those without one are
# one problem, with one fix: name the serving container.
deny contains msg if {
	input.workload.servingContainer == "" # a test against a constant: OPA skips the rule when a container is named
	input.workload.serving == true
	unprobed := [sprintf("%q", [c.name]) | some c in input.workload.containers; not c.readinessProbe]
	count(unprobed) > 0
	not input.workload.kind in skipped_kinds
	msg := sprintf("%s no readinessProbe, and no container is named as the one serving the model (engine %q); name it with modelgate.io/container and give it a readinessProbe so traffic waits until the model is loaded", [
		have(unprobed),
		input.workload.engine,
	])
}

have(names) := sprintf("container %s has", names) if {
	count(names) == 1
} else := sprintf("containers %s have", [concat(", ", names)])
