package modelgate.products

deny contains sprintf("GPU product %s is not allowed in namespace %s", [p, input.workload.namespace]) if {
	input.workload.gpu.count > 0
	some p in input.workload.gpu.products
	not p in input.parameters.products
}

warn contains "the workload requests GPUs without choosing a product" if {
	input.workload.gpu.count > 0
	count(input.workload.gpu.products) == 0
}
