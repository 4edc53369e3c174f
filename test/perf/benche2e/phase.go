package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/modelgate/modelgate/api/annotations"
)

// progressEvery is how often a running phase prints how far its pods got.
const progressEvery = 10 * time.Second

// phase is one measurement: --pods pods through Deployments, with or
// without modelgate's webhooks registered.
type phase struct {
	round    int
	webhooks bool
}

// label names the phase in the report's columns.
func (p phase) label() string {
	if p.webhooks {
		return fmt.Sprintf("r%d with", p.round)
	}
	return fmt.Sprintf("r%d without", p.round)
}

// namespace is the phase's fresh namespace.
func (p phase) namespace() string {
	if p.webhooks {
		return fmt.Sprintf("bench-r%d-with", p.round)
	}
	return fmt.Sprintf("bench-r%d-without", p.round)
}

// schedule interleaves the phases, without then with in each round, so
// that neither always runs on the colder or the more loaded cluster.
func schedule(rounds int) []phase {
	var out []phase
	for r := 1; r <= rounds; r++ {
		out = append(out, phase{round: r}, phase{round: r, webhooks: true})
	}
	return out
}

// result is what a phase measured.
type result struct {
	phase
	// creates is how long the Deployment creates took, all of them.
	creates time.Duration
	// times is when all pods were created, scheduled and Running, from the
	// first create.
	times [milestones]time.Duration
	// delta is the metrics' change over the phase.
	delta delta
	// serial are the serial probe's latencies, after the burst.
	serial []time.Duration
}

// podsPerSecond is the pods' rate to Running.
func (r result) podsPerSecond(pods int) float64 {
	return float64(pods) / r.times[running].Seconds()
}

// bench holds what every phase uses.
type bench struct {
	pods, replicas int
	timeout        time.Duration
	admin, dev     client.Client
	clientset      kubernetes.Interface
	scraper        *scraper
	hooks          *webhooks
	hists          []spec
	counters       []spec
	// template is the pod template modelgate injects into the annotated
	// Deployment.
	template *corev1.PodTemplateSpec
	log      io.Writer
}

// progressf prints a progress line.
func (b *bench) progressf(format string, args ...any) {
	progressf(b.log, format, args...)
}

// injectedTemplate reads the template modelgate injects into the annotated
// Deployment from a server-side dry run, with the webhooks registered.
func (b *bench) injectedTemplate(ctx context.Context) (*corev1.PodTemplateSpec, error) {
	d := annotatedDeployment("default", templateName, 1)
	if err := b.dev.Create(ctx, d, client.DryRunAll); err != nil {
		return nil, fmt.Errorf("dry-run creating Deployment %s: %w", templateName, err)
	}
	if !isInjected(&d.Spec.Template) {
		return nil, fmt.Errorf("modelgate did not inject the dry-run Deployment %s (its template has no %s annotation)", templateName, annotations.Injected)
	}
	return &d.Spec.Template, nil
}

// setWebhooks registers or unregisters modelgate's webhooks and waits
// until the API server calls them, or stops calling them.
func (b *bench) setWebhooks(ctx context.Context, on bool) error {
	var err error
	if on {
		err = b.hooks.register(ctx, b.admin)
	} else {
		err = b.hooks.unregister(ctx, b.admin)
	}
	if err != nil {
		return err
	}
	return waitWebhooks(ctx, b.dev, b.scraper, b.hooks.names, on)
}

// run runs one phase: set the webhooks, create the Deployments in a fresh
// namespace, wait until every pod is Running, take the metrics' deltas,
// and delete the namespace.
func (b *bench) run(ctx context.Context, p phase) (result, error) {
	what := "without modelgate's webhooks"
	if p.webhooks {
		what = "with modelgate's webhooks"
	}
	b.progressf("round %d, %s: %s", p.round, what, "switching the webhooks")
	if err := b.setWebhooks(ctx, p.webhooks); err != nil {
		return result{}, err
	}
	ns := p.namespace()
	if err := b.admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		return result{}, fmt.Errorf("creating namespace %s: %w", ns, err)
	}

	pctx, cancel := context.WithTimeoutCause(ctx, b.timeout, fmt.Errorf("timed out after %s", b.timeout))
	defer cancel()
	tracker := newPodTracker(b.pods)
	if err := watchPods(pctx, b.clientset, ns, tracker); err != nil {
		return result{}, err
	}
	before, err := b.scraper.snapshot(pctx)
	if err != nil {
		return result{}, err
	}
	sizes := deploymentSizes(b.pods, b.replicas)
	b.progressf("round %d, %s: creating %d Deployments (%d pods) in %s", p.round, what, len(sizes), b.pods, ns)
	start := time.Now()
	tracker.begin(start)
	if err := b.createDeployments(pctx, ns, sizes, p.webhooks); err != nil {
		return result{}, err
	}
	res := result{phase: p, creates: time.Since(start)}
	if err := b.waitRunning(pctx, tracker); err != nil {
		return result{}, err
	}
	res.times = tracker.times()
	after, err := b.scraper.snapshot(ctx)
	if err != nil {
		return result{}, err
	}
	if res.delta, err = diff(before, after, b.hists, b.counters); err != nil {
		return result{}, err
	}
	if p.webhooks {
		b.checkSamePods(ctx, ns, sizes)
	}
	if res.serial, err = b.serialCreates(ctx, ns, p.webhooks); err != nil {
		return result{}, err
	}
	b.progressf("round %d, %s: %d pods Running in %s (%.1f pods/s)", p.round, what, b.pods,
		res.times[running].Round(time.Millisecond), res.podsPerSecond(b.pods))
	return res, b.deleteNamespace(ctx, ns)
}

// createDeployments creates the phase's Deployments concurrently, as the
// developer: annotated with the webhooks, already injected without.
func (b *bench) createDeployments(ctx context.Context, ns string, sizes []int32, webhooks bool) error {
	errs := make([]error, len(sizes))
	var wg sync.WaitGroup
	for i, n := range sizes {
		wg.Go(func() {
			name := deploymentName(i)
			d := injectedDeployment(ns, name, n, b.template)
			if webhooks {
				d = annotatedDeployment(ns, name, n)
			}
			if err := b.dev.Create(ctx, d); err != nil {
				errs[i] = fmt.Errorf("creating Deployment %s/%s: %w", ns, name, err)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// checkSamePods warns when the template modelgate injected into the
// "with" phase's first Deployment is not the one the "without" phases
// created: the phases would then not schedule the same pods.
func (b *bench) checkSamePods(ctx context.Context, ns string, sizes []int32) {
	got := &appsv1.Deployment{}
	name := deploymentName(0)
	if err := b.admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, got); err != nil {
		b.progressf("WARNING: cannot compare the phases' pod templates: reading Deployment %s/%s: %v", ns, name, err)
		return
	}
	want := injectedDeployment(ns, name, sizes[0], b.template).Spec.Template
	// The seal names the namespace (the dry run's is "default"): the
	// phases' seals differ by design, and nothing else may.
	delete(want.Annotations, annotations.Seal)
	gotTemplate := got.Spec.Template.DeepCopy()
	delete(gotTemplate.Annotations, annotations.Seal)
	if !equality.Semantic.DeepEqual(want, *gotTemplate) {
		b.progressf("WARNING: the phases did not create the same pods: Deployment %s/%s's template differs from the dry run's (-without +with):\n%s",
			ns, name, cmp.Diff(want, *gotTemplate))
	}
}

// waitRunning waits until every pod is Running, printing how far they got
// every progressEvery.
func (b *bench) waitRunning(ctx context.Context, t *podTracker) error {
	tick := time.NewTicker(progressEvery)
	defer tick.Stop()
	for {
		select {
		case <-t.done:
			return nil
		case <-ctx.Done():
			return fmt.Errorf("%w: %s", context.Cause(ctx), t.describe())
		case <-tick.C:
			b.progressf("  %s", t.describe())
		}
	}
}

// deleteNamespace deletes the namespace and waits until it is gone, and
// with it every pod in it.
func (b *bench) deleteNamespace(ctx context.Context, ns string) error {
	started := time.Now()
	b.progressf("deleting namespace %s", ns)
	obj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}
	if err := b.admin.Delete(ctx, obj); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting namespace %s: %w", ns, err)
	}
	deadline := time.Now().Add(b.timeout)
	for {
		err := b.admin.Get(ctx, client.ObjectKey{Name: ns}, obj)
		if apierrors.IsNotFound(err) {
			b.progressf("namespace %s gone in %s", ns, time.Since(started).Round(100*time.Millisecond))
			return nil
		}
		if err != nil {
			return fmt.Errorf("waiting for namespace %s to go: %w", ns, err)
		}
		if time.Now().After(deadline) {
			pods := &corev1.PodList{}
			_ = b.admin.List(ctx, pods, client.InNamespace(ns))
			return fmt.Errorf("namespace %s still there %s after its deletion (%d pods left; phase %s)", ns, b.timeout, len(pods.Items), obj.Status.Phase)
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(500 * time.Millisecond):
		}
	}
}
