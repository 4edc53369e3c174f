//go:build tools

// Package node records the programs of the simulated cluster's real node
// that are not Kubernetes' own (the kubelet is built by hack/envtest, beside
// kube-apiserver): containerd and its runc shim, and the reference CNI
// plugins of the node's Pod network (loopback, bridge, host-local). runc itself comes from the Debian package.
package node

import (
	_ "github.com/containerd/containerd/v2/cmd/containerd"
	_ "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2"
	_ "github.com/containernetworking/plugins/plugins/ipam/host-local"
	_ "github.com/containernetworking/plugins/plugins/main/bridge"
	_ "github.com/containernetworking/plugins/plugins/main/loopback"
)
