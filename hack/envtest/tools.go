//go:build tools

// Package envtest records the control-plane commands this module builds:
// kube-apiserver and etcd (envtest, `make run`), kube-scheduler and
// kube-controller-manager (`make run`, the e2e suite), and kubectl.
package envtest

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
