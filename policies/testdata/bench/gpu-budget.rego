package modelgate.budget

replicas := object.get(input.object, ["spec", "replicas"], 1)

deny contains sprintf("%d replicas x %d GPUs is over the team budget of %d GPUs", [replicas, n, input.parameters.maxTotal]) if {
	n := input.workload.gpu.count
	replicas * n > input.parameters.maxTotal
}
