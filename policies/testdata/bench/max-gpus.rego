package modelgate.maxgpus

deny contains {"msg": msg, "details": {"gpus": n, "max": input.parameters.max}} if {
	n := input.workload.gpu.count
	n > input.parameters.max
	msg := sprintf("%d GPUs per pod is over the limit of %d", [n, input.parameters.max])
}
