# allowed-gpu-products: GPU workloads may only ask for the GPU products a
# namespace is allowed to use, and optionally must name one.
#
# The products a workload asks for are input.workload.gpu.products: the
# modelgate.io/gpu-product annotation, else the In values of the GPU product
# label in the pod's required node affinity. Each product not allowed is one
# violation. Products are node label values and are compared exactly.
#
# Parameters:
#   products        products allowed in every namespace without its own list;
#                   empty or absent: any product
#   namespaces      namespace name -> list of products; replaces products in
#                   that namespace (an empty list there allows any product)
#   requireProduct  when true, a workload asking for GPUs must name at least
#                   one product (default false)
#
#   {"products": ["NVIDIA-A100-SXM4-80GB", "NVIDIA-H100-80GB-HBM3"],
#    "namespaces": {"sandbox": ["NVIDIA-L4"]},
#    "requireProduct": true}
#
# Not covered: the number of GPUs (see max-gpus-per-pod), GPU memory
# (modelgate.io/gpu-memory), preferred (soft) node affinity, nodeSelector
# and nodeName, which can also land a pod on a given product. A
# ResourceClaim or ResourceClaimTemplate names no product modelgate reads
# (its device selectors are CEL): it is never denied, requireProduct or not.
package modelgate.library.allowed_gpu_products

deny contains msg if {
	some product in input.workload.gpu.products
	# allowed as defined below, computed here: a rule costs more on the
	# common, allowed path. Whether it is empty only matters once the product
	# is not in it.
	allowed := object.get(input.parameters, ["namespaces", input.workload.namespace], object.get(input.parameters, ["products"], []))
	not product in allowed
	count(allowed) > 0
	msg := sprintf("requested GPU product %q is not allowed in namespace %q; allowed products: %s", [
		product,
		input.workload.namespace,
		quoted(allowed),
	])
}

deny contains msg if {
	input.workload.gpu.products == [] # a test against a constant: OPA skips the rule when a product is named
	input.workload.gpu.count > 0
	object.get(input.parameters, ["requireProduct"], false) == true
	not input.workload.kind in {"ResourceClaim", "ResourceClaimTemplate"}
	msg := sprintf("%s asks for %s but names no GPU product; set modelgate.io/gpu-product%s", [
		pods,
		gpus(input.workload.gpu.count),
		choices,
	])
}

# allowed is the product list for the workload's namespace; empty means any.
# The first deny rule computes the same in its body: keep the two alike.
allowed := object.get(input.parameters, ["namespaces", input.workload.namespace], object.get(input.parameters, ["products"], []))

# choices lists the products to pick from, when the list is restricted.
choices := sprintf(" to one of %s (allowed in namespace %q)", [quoted(allowed), input.workload.namespace]) if {
	count(allowed) > 0
} else := ""

# pods names the pods the workload runs, in its own words: "pod" for a Pod,
# each pod of Deployment "llama" for a workload with a pod template.
pods := "pod" if {
	input.workload.kind == "Pod"
} else := sprintf("each pod of %s %q", [input.workload.kind, input.workload.name])

quoted(names) := concat(", ", [sprintf("%q", [n]) | some n in names])

gpus(n) := "1 GPU" if {
	n == 1
} else := sprintf("%v GPUs", [n])
