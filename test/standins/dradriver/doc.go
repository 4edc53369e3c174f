// Package dradriver is a stand-in for NVIDIA's DRA driver
// (k8s-dra-driver-gpu) on the simulated cluster. The fake GPU nodes kwok
// plays have no kubelet and no GPUs, so NVIDIA's driver (which enumerates
// devices through NVML on each node) cannot run there. This package
// publishes, for each of those nodes, the ResourceSlice that driver would:
// one device per GPU the node's nvidia.com/gpu capacity counts, with the
// attributes and capacity NVIDIA's driver sets (type, productName,
// architecture, cudaComputeCapability, uuid, index and memory), read from
// the node's GPU Feature Discovery labels; and the DeviceClasses
// gpu.nvidia.com and mig.nvidia.com NVIDIA's Helm chart installs. The real
// kube-scheduler allocates from them and the real resource claim
// controller makes the claims, so a Pod with a claim lands where its CEL
// selectors can be satisfied, or stays Pending with the scheduler's
// reason.
//
// What it does not do: no kubelet plugin runs for these nodes (kwok starts
// no containers, so nothing is prepared), the slices never change after
// they are published, and there are no MIG devices, partitions or
// counters. The nodes keep their device-plugin capacity beside the slices,
// so the simulated cluster can place device-plugin and DRA pods side by
// side; a real node would offer its GPUs one way or the other.
package dradriver
