package main

import (
	"context"
	"fmt"
	"slices"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/modelgate/modelgate/api/annotations"
	config "github.com/modelgate/modelgate/api/config/v1alpha1"
	"github.com/modelgate/modelgate/test/harnesses/cluster"
)

// The backstop measurement: after the storm, with the policy library in
// force and modelgate's webhooks registered, the admission latency the API
// server adds when it enforces the ValidatingAdmissionPolicies generated
// from the library's CEL forms (policy.backstop true: bound) against when
// they are only applied (false: unbound), --backstop-rounds times, unbound
// then bound in each round, modelgate restarted with the setting before
// each phase. A phase times serial server-side dry-run creates of the
// opted-in GPU Pod and Deployment, which every policy allows, then a burst
// of --pods pods through Deployments until all are Running, and takes the
// API server's admission histograms' deltas over each part.

// backstopPhase is one backstop measurement.
type backstopPhase struct {
	round int
	bound bool
}

func (p backstopPhase) label() string {
	if p.bound {
		return fmt.Sprintf("r%d bound", p.round)
	}
	return fmt.Sprintf("r%d unbound", p.round)
}

func (p backstopPhase) namespace() string {
	if p.bound {
		return fmt.Sprintf("backstop-r%d-bound", p.round)
	}
	return fmt.Sprintf("backstop-r%d-unbound", p.round)
}

// backstopSchedule is unbound then bound, in each round.
func backstopSchedule(rounds int) []backstopPhase {
	var out []backstopPhase
	for r := 1; r <= rounds; r++ {
		out = append(out, backstopPhase{round: r}, backstopPhase{round: r, bound: true})
	}
	return out
}

// backstopResult is what a backstop phase measured.
type backstopResult struct {
	backstopPhase
	// pods and deployments are the serial dry-run creates' latencies, as
	// the client saw them.
	pods, deployments []time.Duration
	// serial is the metrics' change over the serial creates.
	serial delta
	// creates is how long the burst's Deployment creates took, all of
	// them; running until all its pods were Running, from the first.
	creates, running time.Duration
	// burst is the metrics' change over the burst, until all Running.
	burst delta
}

// backstopRun is the backstop measurement: the generated policies it
// toggled and each phase's result.
type backstopRun struct {
	// policies are the generated ValidatingAdmissionPolicies' names;
	// celForms how many library WorkloadPolicies have a CEL form.
	policies []string
	celForms int
	results  []backstopResult
}

// The backstop's histograms, in backstopHists order.
const (
	bsStep      = 0 // the API server's validate step, every CREATE
	bsPlugin    = 1 // the ValidatingAdmissionPolicy plugin, every CREATE
	bsChecks    = 2 // the generated policies' checks that did not admit
	bsWebhook   = 3 // modelgate's validating webhooks, API server view
	bsPostPods  = 4 // Pod POSTs, not dry run: the burst's, by the ReplicaSet controller
	vapPlugin   = "ValidatingAdmissionPolicy"
	pluginTime  = "apiserver_admission_controller_admission_duration_seconds"
	checkTime   = "apiserver_validating_admission_policy_check_duration_seconds"
	warmupCount = 10
)

// backstopHists are the histograms a backstop phase reads: policies are
// the generated policies' names, webhooks modelgate's webhooks'.
func backstopHists(policies, webhooks []string) []spec {
	create := func(more map[string]string) func(map[string]string) bool {
		m := map[string]string{"operation": "CREATE", "type": "validate"}
		for k, v := range more {
			m[k] = v
		}
		return labelsEqual(m)
	}
	return []spec{
		{"admission step validate, CREATEs", fromAPIServer, stepDuration, create(nil)},
		{"ValidatingAdmissionPolicy plugin, CREATEs", fromAPIServer, pluginTime, create(map[string]string{"name": vapPlugin})},
		{"generated policies' checks that did not admit", fromAPIServer, checkTime, func(l map[string]string) bool { return slices.Contains(policies, l["policy"]) }},
		{"modelgate validating, API server view", fromAPIServer, webhookDuration, modelgateWebhooks(webhooks, "validating")},
		{"POST pods", fromAPIServer, requestDuration, labelsEqual(map[string]string{"verb": "POST", "group": "", "resource": "pods", "subresource": "", "dry_run": ""})},
	}
}

// backstop runs the backstop phases on the cluster, after the storm (which
// put the library in force and registered the webhooks).
func (b *bench) backstop(ctx context.Context, c *cluster.Cluster, root string, rounds int) (backstopRun, error) {
	var run backstopRun
	if rounds == 0 {
		return run, nil
	}
	wps, err := libraryWithCEL(root)
	if err != nil {
		return run, err
	}
	run.celForms = len(wps)
	pc, err := policyClient(c.Admin)
	if err != nil {
		return run, err
	}
	if run.policies, err = b.waitGenerated(ctx, pc, wps); err != nil {
		return run, err
	}
	hs := backstopHists(run.policies, b.hooks.names)
	for _, p := range backstopSchedule(rounds) {
		b.progressf("backstop %s: restarting modelgate with policy.backstop %t", p.label(), p.bound)
		if err := c.RestartModelgate(ctx, func(cfg *config.Configuration) { cfg.Policy.Backstop = ptr.To(p.bound) }); err != nil {
			return run, fmt.Errorf("backstop %s: restarting modelgate: %w", p.label(), err)
		}
		r, err := b.backstopPhase(ctx, p, hs, run.policies)
		if err != nil {
			return run, fmt.Errorf("backstop %s: %w", p.label(), err)
		}
		run.results = append(run.results, r)
	}
	return run, nil
}

// backstopPhase waits until modelgate and the API server act on the
// setting, then measures the serial creates and the burst in a fresh
// namespace with a team (the library requires one).
func (b *bench) backstopPhase(ctx context.Context, p backstopPhase, hs []spec, policies []string) (backstopResult, error) {
	ns := p.namespace()
	if err := b.admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns,
		Labels: map[string]string{annotations.NamespaceTeam: "bench"}}}); err != nil {
		return backstopResult{}, fmt.Errorf("creating namespace %s: %w", ns, err)
	}
	if err := b.waitBackstop(ctx, ns, p.bound, policies); err != nil {
		return backstopResult{}, err
	}
	res := backstopResult{backstopPhase: p}
	pod := serialPod(ns, &annotatedDeployment(ns, templateName, 1).Spec.Template)
	for range warmupCount {
		if err := b.dev.Create(ctx, pod.DeepCopy(), client.DryRunAll); err != nil {
			return res, fmt.Errorf("warming up: dry-run creating a Pod in %s: %w", ns, err)
		}
	}
	b.progressf("backstop %s: %d serial dry-run creates of a Pod, then of a Deployment", p.label(), serialSamples)
	before, err := b.scraper.snapshot(ctx)
	if err != nil {
		return res, err
	}
	if res.pods, err = b.serialDryRuns(ctx, func() client.Object { return pod.DeepCopy() }); err != nil {
		return res, err
	}
	if res.deployments, err = b.serialDryRuns(ctx, func() client.Object { return annotatedDeployment(ns, "serial", 1) }); err != nil {
		return res, err
	}
	after, err := b.scraper.snapshot(ctx)
	if err != nil {
		return res, err
	}
	if res.serial, err = diff(before, after, hs, nil); err != nil {
		return res, err
	}
	if err := b.backstopBurst(ctx, p, ns, hs, &res); err != nil {
		return res, err
	}
	b.progressf("backstop %s: serial Pod p50 %s, Deployment p50 %s; %d pods Running in %s", p.label(),
		sampleQuantile(res.pods, 0.5).Round(10*time.Microsecond), sampleQuantile(res.deployments, 0.5).Round(10*time.Microsecond),
		b.pods, res.running.Round(time.Millisecond))
	return res, b.deleteNamespace(ctx, ns)
}

// serialDryRuns sends serialSamples server-side dry-run creates of the
// objects next returns, one after the other, and returns each one's
// latency as the client saw it. Each must come back injected: the
// webhooks are registered.
func (b *bench) serialDryRuns(ctx context.Context, next func() client.Object) ([]time.Duration, error) {
	out := make([]time.Duration, 0, serialSamples)
	for range serialSamples {
		obj := next()
		start := time.Now()
		if err := b.dev.Create(ctx, obj, client.DryRunAll); err != nil {
			return nil, fmt.Errorf("dry-run creating %T %s/%s: %w", obj, obj.GetNamespace(), obj.GetName(), err)
		}
		out = append(out, time.Since(start))
		if !injected(obj) {
			return nil, fmt.Errorf("the dry-run %T in %s was not injected although modelgate's webhooks are registered", obj, obj.GetNamespace())
		}
	}
	return out, nil
}

// injected reports whether modelgate injected a Pod or a Deployment's
// template.
func injected(obj client.Object) bool {
	if d, ok := obj.(*appsv1.Deployment); ok {
		return isInjected(&d.Spec.Template)
	}
	return isInjected(obj)
}

// backstopBurst creates --pods pods through Deployments at once and waits
// until every pod is Running, taking the metrics' deltas over it.
func (b *bench) backstopBurst(ctx context.Context, p backstopPhase, ns string, hs []spec, res *backstopResult) error {
	pctx, cancel := context.WithTimeoutCause(ctx, b.timeout, fmt.Errorf("timed out after %s", b.timeout))
	defer cancel()
	tracker := newPodTracker(b.pods)
	if err := watchPods(pctx, b.clientset, ns, tracker); err != nil {
		return err
	}
	before, err := b.scraper.snapshot(pctx)
	if err != nil {
		return err
	}
	sizes := deploymentSizes(b.pods, b.replicas)
	b.progressf("backstop %s: creating %d Deployments (%d pods) in %s", p.label(), len(sizes), b.pods, ns)
	start := time.Now()
	tracker.begin(start)
	if err := b.createDeployments(pctx, ns, sizes, true); err != nil {
		return err
	}
	res.creates = time.Since(start)
	if err := b.waitRunning(pctx, tracker); err != nil {
		return err
	}
	res.running = tracker.times()[running]
	after, err := b.scraper.snapshot(ctx)
	if err != nil {
		return err
	}
	res.burst, err = diff(before, after, hs, nil)
	return err
}
