// Package deviceplugin is a stand-in for NVIDIA's k8s-device-plugin on the
// simulated cluster's real node: that machine runs a real kubelet and
// containerd but has no GPUs, so NVIDIA's plugin (which enumerates devices
// through NVML) cannot run there. This plugin advertises made-up GPUs to
// the kubelet's device manager instead, so that Pods asking for
// nvidia.com/gpu are scheduled, admitted and started as they would be on a
// GPU node. It runs in process (a goroutine gRPC server), not as a Pod.
//
// What it does, speaking the kubelet's device-plugin API v1beta1:
//
//   - serves the DevicePlugin service on a unix socket in the kubelet's
//     device-plugin directory (Options.PluginDir) and registers it through
//     the kubelet's Registration service at kubelet.sock in that directory,
//     retrying with a short backoff while the kubelet is not there yet;
//   - keeps registered: the kubelet wipes the sockets in that directory when
//     it (re)starts and forgets its registrations, so the plugin looks at
//     both sockets every Options.PollInterval and, when its own socket has
//     gone (or is not the one it made) or kubelet.sock is a new file, serves
//     on a new socket and registers again;
//   - advertises Options.Devices devices named GPU-<UUIDPrefix>-<i> (i from
//     0), in the style of NVIDIA's GPU UUIDs, all Healthy; ListAndWatch sends
//     the whole list again whenever a test changes a device's health with
//     SetHealthy;
//   - answers Allocate as NVIDIA's plugin does with its default "envvar"
//     device-list strategy: each container gets NVIDIA_VISIBLE_DEVICES set to
//     its device IDs, comma-joined in the order the kubelet asked for them.
//     Unknown device IDs are refused with an error naming them. Every answer
//     is recorded (see Plugin.Allocations).
//
// What it does not do: there are no device nodes, driver libraries, mounts,
// CDI devices or annotations in Allocate's answer, so a container sees no
// GPU, only the variable; no NVML health checks (a device is unhealthy only
// when a test says so); no MIG, time-slicing, MPS or topology (no NUMA
// affinity is advertised); no GetPreferredAllocation (it is not announced,
// and answers trivially if called anyway) and no PreStartContainer work; no
// registration through the kubelet's plugin watcher
// (/var/lib/kubelet/plugins_registry), only the classic kubelet.sock.
package deviceplugin
