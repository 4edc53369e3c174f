// Command pause is the real node's sandbox ("pause") image program: the
// first process of every Pod sandbox containerd starts, holding the Pod's
// namespaces. It does what Kubernetes' own pause does: it sleeps until
// SIGINT or SIGTERM and reaps any child that is handed to it (with a shared
// process namespace it is PID 1). There is no registry here to pull
// registry.k8s.io/pause from, so the simulated cluster builds this one.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "-v" {
		fmt.Println("pause (modelgate's simulated cluster)")
		return
	}
	sig := make(chan os.Signal, 8)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for s := range sig {
		if s != syscall.SIGCHLD {
			os.Exit(0)
		}
		reap()
	}
}

// reap collects every child that has exited.
func reap() {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
	}
}
