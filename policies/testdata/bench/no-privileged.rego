package modelgate.privileged

deny contains sprintf("container %s must not be privileged", [c.name]) if {
	some c in input.workload.containers
	c.privileged
}

deny contains sprintf("the pod must not use %s", [field]) if {
	some field in ["hostNetwork", "hostPID", "hostIPC"]
	input.workload[field]
}
