# serving-readiness-probe: a workload that serves a model must have a
# readiness probe on its serving container, so that Services send it traffic
# only once the model is loaded (which can take many minutes).
#
# A workload serves when it names an engine (annotation modelgate.io/engine,
# input.workload.serving). The container checked is
# input.workload.servingContainer, or every container when that is empty.
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

	# c must have one if it is the serving container, or when none is named.
	input.workload.servingContainer in {"", c.name}
	not input.workload.kind in skipped_kinds
	msg := sprintf("container %q serves a model (engine %q) but has no readinessProbe; add one so traffic waits until the model is loaded", [
		c.name,
		input.workload.engine,
	])
}
