// Package draplugin is a stand-in for the kubelet plugin of NVIDIA's DRA
// driver (k8s-dra-driver-gpu) on the simulated cluster's real node. That
// machine runs a real kubelet and containerd but has no GPUs, so NVIDIA's
// plugin (which enumerates devices and makes their CDI specs through NVML
// and the driver's libraries) cannot run there. This plugin stands in for
// it, so that a Pod whose GPUs come from a resource claim is scheduled,
// prepared and started there as it would be on a GPU node: the real
// kube-scheduler allocates the claim from the node's ResourceSlice, the
// real kubelet asks this plugin to prepare it, and the real containerd
// applies the CDI edits this plugin wrote. It runs in process (the
// kubelet plugin helper of k8s.io/dynamic-resource-allocation, gRPC
// servers on goroutines), not as a Pod.
//
// What it does, through kubeletplugin.Start:
//
//   - registers the driver gpu.nvidia.com with the kubelet's plugin
//     watcher: a registration socket in the kubelet's plugins_registry
//     folder and the DRA service's socket in plugins/gpu.nvidia.com, both
//     under the kubelet's root folder (Options.KubeletDir), which need not
//     be /var/lib/kubelet;
//   - publishes the node's ResourceSlice (PublishResources, as the node's
//     own user): the devices Options.Devices, which the simulated cluster
//     makes with dradriver.NodeDevices, so that they carry the same
//     attributes (type, productName, brand, uuid, index, driverVersion, and
//     architecture and cudaComputeCapability where the node's labels tell)
//     and memory capacity as the fake nodes' slices; the pool is the node's
//     name;
//   - prepares a claim by writing one CDI spec file for it into
//     Options.CDIDir (containerd's cdi_spec_dirs), kind
//     k8s.gpu.nvidia.com/gpu, with one CDI device per GPU allocated to the
//     claim from this node's pool, named <claim UID>-<device>, and answers
//     the kubelet with those CDI device IDs. Each device's container edits
//     are environment variables only: NVIDIA_VISIBLE_DEVICES, the UUIDs of
//     the claim's GPUs for the same request, comma-joined in allocation
//     order (one UUID for one GPU; every device of a request sets the same
//     value, so the order in which containerd applies them does not
//     matter), and MODELGATE_DRA_CLAIM, the claim's namespace/name. A GPU
//     that another prepared claim holds is refused, as are devices the
//     node's pool lacks. Every preparation is recorded (Plugin.Prepared);
//   - unprepares a claim by removing its spec file, and records it
//     (Plugin.Unprepared).
//
// What it does not do: there are no device nodes, driver libraries, mounts
// or hooks in the CDI specs (the machine has no /dev/nvidia*), so a
// container sees no GPU, only the variables; NVIDIA's real plugin sets
// NVIDIA_VISIBLE_DEVICES=void and exposes the GPUs through device nodes
// instead. There are no MIG devices, partitions, time-slicing, MPS,
// opaque device configuration or health reports (the health service is
// not advertised; kubelet 1.36 asks for it all the same and logs that it
// is unimplemented). What it prepared is kept in memory only: a restarted plugin
// has forgotten it (its spec files stay until the kubelet unprepares the
// claims, which removes them by name). A container referencing several
// claims of this driver sees the NVIDIA_VISIBLE_DEVICES of one of them.
package draplugin
