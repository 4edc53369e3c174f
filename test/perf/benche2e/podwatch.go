package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// Milestones a pod passes, in order.
const (
	created = iota
	scheduled
	running
	milestones
)

// milestoneNames name the milestones in messages.
var milestoneNames = [milestones]string{"created", "scheduled", "Running"}

// podTracker counts a namespace's pods as an informer sees them pass each
// milestone, and records when each count reached the target.
type podTracker struct {
	want int

	mu      sync.Mutex
	start   time.Time
	passed  map[types.UID]*[milestones]bool
	counts  [milestones]int
	reached [milestones]time.Duration
	done    chan struct{}
}

// newPodTracker tracks want pods.
func newPodTracker(want int) *podTracker {
	return &podTracker{want: want, passed: map[types.UID]*[milestones]bool{}, done: make(chan struct{})}
}

// begin sets the time the milestones are measured from.
func (t *podTracker) begin(now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.start = now
}

// observe records what a pod's latest state shows, at now.
func (t *podTracker) observe(p *corev1.Pod, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	seen, ok := t.passed[p.UID]
	if !ok {
		seen = &[milestones]bool{}
		t.passed[p.UID] = seen
	}
	state := [milestones]bool{
		created:   true,
		scheduled: p.Spec.NodeName != "",
		running:   p.Status.Phase == corev1.PodRunning,
	}
	for m := range milestones {
		if !state[m] || seen[m] {
			continue
		}
		seen[m] = true
		t.counts[m]++
		if t.counts[m] == t.want {
			t.reached[m] = now.Sub(t.start)
			if m == running {
				close(t.done)
			}
		}
	}
}

// progress returns how many pods passed each milestone.
func (t *podTracker) progress() [milestones]int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.counts
}

// times returns when each count reached the target, from begin.
func (t *podTracker) times() [milestones]time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.reached
}

// describe says how far the pods got.
func (t *podTracker) describe() string {
	c := t.progress()
	return fmt.Sprintf("%d/%d pods created, %d scheduled, %d Running", c[created], t.want, c[scheduled], c[running])
}

// uids returns the pods the tracker has seen.
func (t *podTracker) uids() map[types.UID]bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make(map[types.UID]bool, len(t.passed))
	for uid := range t.passed {
		out[uid] = true
	}
	return out
}

// watchPods starts an informer on the namespace's pods feeding t; it runs
// until ctx ends. It returns once the informer has synced.
func watchPods(ctx context.Context, cs kubernetes.Interface, namespace string, t *podTracker) error {
	return watchPodsFunc(ctx, cs, namespace, t.observe)
}

// watchPodsFunc is watchPods feeding observe.
func watchPodsFunc(ctx context.Context, cs kubernetes.Interface, namespace string, observe func(*corev1.Pod, time.Time)) error {
	f := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(namespace))
	inf := f.Core().V1().Pods().Informer()
	handle := func(obj any) {
		if p, ok := obj.(*corev1.Pod); ok {
			observe(p, time.Now())
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    handle,
		UpdateFunc: func(_, obj any) { handle(obj) },
	}); err != nil {
		return fmt.Errorf("watching pods in %s: %w", namespace, err)
	}
	f.Start(ctx.Done())
	go func() {
		<-ctx.Done()
		f.Shutdown()
	}()
	for typ, ok := range f.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return fmt.Errorf("watching pods in %s: the %v informer did not sync", namespace, typ)
		}
	}
	return nil
}
