package main

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/modelgate/modelgate/test/harnesses/cluster"
)

// printPlacements prints a line whenever a pod is placed, changes phase,
// cannot be scheduled (with the scheduler's reason) or goes, until ctx ends.
func printPlacements(ctx context.Context, cfg *rest.Config, nodes []corev1.Node, out io.Writer) error {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("creating a clientset: %w", err)
	}
	products := map[string]string{}
	for _, n := range nodes {
		products[n.Name] = n.Labels[cluster.LabelGPUProduct]
	}
	p := &placements{out: out, products: products, last: map[string]string{}}
	factory := informers.NewSharedInformerFactory(cs, 10*time.Minute)
	inf := factory.Core().V1().Pods().Informer()
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { p.seen(obj) },
		UpdateFunc: func(_, obj any) { p.seen(obj) },
		DeleteFunc: p.gone,
	}); err != nil {
		return fmt.Errorf("watching pods: %w", err)
	}
	factory.Start(ctx.Done())
	<-ctx.Done()
	factory.Shutdown()
	return ctx.Err()
}

type placements struct {
	mu       sync.Mutex
	out      io.Writer
	products map[string]string
	last     map[string]string // pod key -> the line printed last
}

func (p *placements) seen(obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	p.print(pod.Namespace+"/"+pod.Name, describe(pod, p.products))
}

func (p *placements) gone(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	if pod, ok := obj.(*corev1.Pod); ok {
		key := pod.Namespace + "/" + pod.Name
		p.print(key, "deleted")
		p.mu.Lock()
		delete(p.last, key)
		p.mu.Unlock()
	}
}

func (p *placements) print(key, line string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if line == "" || p.last[key] == line {
		return
	}
	p.last[key] = line
	_, _ = fmt.Fprintf(p.out, "pod %s: %s\n", key, line)
}

// describe says where a pod is: its node (with the node's GPU product)
// and phase, or the scheduler's reason it is still unplaced.
func describe(pod *corev1.Pod, products map[string]string) string {
	if pod.Spec.NodeName == "" {
		if c := cluster.NotScheduled(pod); c != nil {
			return fmt.Sprintf("Pending, not scheduled (%s): %s", c.Reason, c.Message)
		}
		return ""
	}
	where := pod.Spec.NodeName
	if prod := products[where]; prod != "" {
		where += " (" + prod + ")"
	}
	return fmt.Sprintf("on %s, %s", where, pod.Status.Phase)
}
