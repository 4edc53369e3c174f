package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/modelgate/modelgate/api/annotations"
	config "github.com/modelgate/modelgate/api/config/v1alpha1"
	policyv1 "github.com/modelgate/modelgate/api/policy/v1"
	"github.com/modelgate/modelgate/test/harnesses/builders"
	"github.com/modelgate/modelgate/test/harnesses/cluster"
)

// The replica storm (issue 32): with the policy library in force, --pods
// pods through Deployments of --replicas, then a rollout restart of every
// Deployment, with modelgate's decision cache off and then on, --rounds
// times, in the same cluster (modelgate restarted between the settings).
// Its table reports, per phase, the time until all pods were Running
// after the creates and after the restart, the API server's view of
// modelgate's validating webhook (p50, p99), modelgate's /validate handler
// time, its CPU per admission review, and the cache's hits and misses.

// stormPhase is one storm measurement.
type stormPhase struct {
	round int
	cache bool
}

func (p stormPhase) label() string {
	if p.cache {
		return fmt.Sprintf("r%d cache on", p.round)
	}
	return fmt.Sprintf("r%d cache off", p.round)
}

func (p stormPhase) namespace() string {
	if p.cache {
		return fmt.Sprintf("storm-r%d-cache-on", p.round)
	}
	return fmt.Sprintf("storm-r%d-cache-off", p.round)
}

// stormSchedule is cache off then on, in each round.
func stormSchedule(rounds int) []stormPhase {
	var out []stormPhase
	for r := 1; r <= rounds; r++ {
		out = append(out, stormPhase{round: r}, stormPhase{round: r, cache: true})
	}
	return out
}

// stormResult is what a storm phase measured.
type stormResult struct {
	stormPhase
	created, restarted time.Duration // until all pods Running
	delta              delta         // over the creates and the restart
	// elapsed is the time delta covers; idleCPU is modelgate's CPU
	// seconds per second over idleWindow just before, with no reviews.
	elapsed time.Duration
	idleCPU float64
}

// idleWindow is how long modelgate's CPU is measured before a storm phase,
// while nothing is reviewed: what it spends besides reviews (informers,
// leases, the runtime) is taken off the phase's CPU at that rate.
const idleWindow = 5 * time.Second

// cpuPerReview is modelgate's CPU per admission review over the phase,
// its idle CPU taken off.
func (r stormResult) cpuPerReview() float64 {
	n := r.delta.counters[stormValReviews] + r.delta.counters[stormMutReviews]
	if n == 0 {
		return 0
	}
	return max(0, r.delta.counters[stormCPU]-r.idleCPU*r.elapsed.Seconds()) / n
}

// The storm's metrics: histograms and counters, in stormHists and
// stormCounters order.
const (
	processCPU      = "process_cpu_seconds_total"
	cacheHits       = "modelgate_policy_decision_cache_hits_total"
	cacheMisses     = "modelgate_policy_decision_cache_misses_total"
	stormValidating = 0 // the API server's view of modelgate's validating webhooks
	stormMutating   = 1
	stormHandler    = 2 // modelgate's /validate handler
	stormCPU        = 0
	stormValReviews = 1
	stormMutReviews = 2
	stormHits       = 3
	stormMisses     = 4
)

func stormHists(webhooks []string) []spec {
	h := histSpecs(webhooks)
	return []spec{h[1], h[0], h[7]}
}

func stormCounters() []spec {
	all := func(map[string]string) bool { return true }
	return []spec{
		{"modelgate CPU seconds", fromModelgate, processCPU, all},
		{"modelgate validating reviews", fromModelgate, policyReviews, all},
		{"modelgate mutating reviews", fromModelgate, mutatingReviews, all},
		{"decision cache hits", fromModelgate, cacheHits, all},
		{"decision cache misses", fromModelgate, cacheMisses, all},
	}
}

// storm runs the storm phases on the cluster and returns their results.
func (b *bench) storm(ctx context.Context, c *cluster.Cluster, root string, rounds int) ([]stormResult, error) {
	if rounds == 0 {
		return nil, nil
	}
	if err := b.applyLibrary(ctx, c.Admin, root); err != nil {
		return nil, err
	}
	if err := b.setWebhooks(ctx, true); err != nil {
		return nil, err
	}
	cacheOn := true // modelgate starts with the default Configuration
	var out []stormResult
	for _, p := range stormSchedule(rounds) {
		if p.cache != cacheOn {
			b.progressf("storm %s: restarting modelgate with the decision cache %s", p.label(), map[bool]string{false: "off", true: "on"}[p.cache])
			bytes := int64(0)
			if p.cache {
				bytes = config.DefaultDecisionCacheBytes
			}
			if err := c.RestartModelgate(ctx, func(cfg *config.Configuration) {
				cfg.Policy.DecisionCache.MaxBytes = resource.NewQuantity(bytes, resource.BinarySI)
			}); err != nil {
				return nil, fmt.Errorf("restarting modelgate: %w", err)
			}
			cacheOn = p.cache
			if err := waitWebhooks(ctx, b.dev, b.scraper, b.hooks.names, true); err != nil {
				return nil, err
			}
			if err := b.waitPolicies(ctx); err != nil {
				return nil, err
			}
		}
		r, err := b.stormPhase(ctx, p)
		if err != nil {
			return nil, fmt.Errorf("storm %s: %w", p.label(), err)
		}
		out = append(out, r)
	}
	return out, nil
}

// libraryPolicies is how many WorkloadPolicies config/samples/policies
// holds.
const libraryPolicies = 8

// applyLibrary creates the policy library's WorkloadPolicies
// (config/samples/policies) and waits until modelgate has them in force.
func (b *bench) applyLibrary(ctx context.Context, admin *rest.Config, root string) error {
	wps, err := builders.SamplePolicies(root + "/config/samples/policies")
	if err != nil {
		return err
	}
	s := runtime.NewScheme()
	if err := policyv1.AddToScheme(s); err != nil {
		return err
	}
	c, err := client.New(admin, client.Options{Scheme: s})
	if err != nil {
		return fmt.Errorf("creating a client for WorkloadPolicies: %w", err)
	}
	if len(wps) != libraryPolicies {
		return fmt.Errorf("config/samples/policies holds %d WorkloadPolicies, want the library's %d", len(wps), libraryPolicies)
	}
	// The webhooks' probe dry-runs a Deployment in "default": with the
	// library in force, its namespace needs a team.
	def := &corev1.Namespace{}
	if err := b.admin.Get(ctx, client.ObjectKey{Name: "default"}, def); err != nil {
		return fmt.Errorf("reading namespace default: %w", err)
	}
	metav1.SetMetaDataLabel(&def.ObjectMeta, annotations.NamespaceTeam, "bench")
	if err := b.admin.Update(ctx, def); err != nil {
		return fmt.Errorf("labelling namespace default with a team: %w", err)
	}
	for _, wp := range wps {
		if err := c.Create(ctx, wp); err != nil {
			return fmt.Errorf("creating WorkloadPolicy %s: %w", wp.Name, err)
		}
	}
	return b.waitPolicies(ctx)
}

// waitPolicies waits until modelgate has the library in force.
func (b *bench) waitPolicies(ctx context.Context) error {
	deadline := time.Now().Add(switchTimeout)
	for {
		s, err := b.scraper.modelgate(ctx)
		if err != nil {
			return err
		}
		if g, ok := s["modelgate_policies_loaded"]; ok && len(g.GetMetric()) > 0 && g.GetMetric()[0].GetGauge().GetValue() >= libraryPolicies {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("modelgate did not load the policy library within %s", switchTimeout)
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// stormPhase creates the Deployments in a fresh namespace with a team (the
// library requires one), waits until every pod is Running, restarts every
// Deployment and waits until every new pod is Running.
func (b *bench) stormPhase(ctx context.Context, p stormPhase) (stormResult, error) {
	ns := p.namespace()
	if err := b.admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns,
		Labels: map[string]string{annotations.NamespaceTeam: "bench"}}}); err != nil {
		return stormResult{}, fmt.Errorf("creating namespace %s: %w", ns, err)
	}
	pctx, cancel := context.WithTimeoutCause(ctx, b.timeout, fmt.Errorf("timed out after %s", b.timeout))
	defer cancel()
	created, restarted := newPodTracker(b.pods), newPodTracker(b.pods)
	var (
		mu     sync.Mutex
		before map[types.UID]bool // the pods of the creates, once the restart began
	)
	feed := func(pod *corev1.Pod, now time.Time) {
		mu.Lock()
		old := before
		mu.Unlock()
		if old == nil {
			created.observe(pod, now)
		} else if !old[pod.UID] {
			restarted.observe(pod, now)
		}
	}
	if err := watchPodsFunc(pctx, b.clientset, ns, feed); err != nil {
		return stormResult{}, err
	}
	idle, err := b.scraper.snapshot(pctx)
	if err != nil {
		return stormResult{}, err
	}
	idleStart := time.Now()
	select {
	case <-pctx.Done():
		return stormResult{}, context.Cause(pctx)
	case <-time.After(idleWindow):
	}
	snap, err := b.scraper.snapshot(pctx)
	if err != nil {
		return stormResult{}, err
	}
	snapAt := time.Now()
	idleCPU, err := cpuBetween(idle, snap)
	if err != nil {
		return stormResult{}, err
	}
	idleCPU /= snapAt.Sub(idleStart).Seconds()
	sizes := deploymentSizes(b.pods, b.replicas)
	b.progressf("storm %s: creating %d Deployments (%d pods) in %s", p.label(), len(sizes), b.pods, ns)
	start := time.Now()
	created.begin(start)
	if err := b.createDeployments(pctx, ns, sizes, true); err != nil {
		return stormResult{}, err
	}
	if err := b.waitRunning(pctx, created); err != nil {
		return stormResult{}, err
	}
	res := stormResult{stormPhase: p, created: created.times()[running]}

	b.progressf("storm %s: restarting the %d Deployments", p.label(), len(sizes))
	mu.Lock()
	before = created.uids()
	mu.Unlock()
	start = time.Now()
	restarted.begin(start)
	if err := b.restartDeployments(pctx, ns, len(sizes), start); err != nil {
		return stormResult{}, err
	}
	if err := b.waitRunning(pctx, restarted); err != nil {
		return stormResult{}, err
	}
	res.restarted = restarted.times()[running]
	after, err := b.scraper.snapshot(ctx)
	if err != nil {
		return stormResult{}, err
	}
	res.elapsed, res.idleCPU = time.Since(snapAt), idleCPU
	if res.delta, err = diff(snap, after, stormHists(b.hooks.names), stormCounters()); err != nil {
		return stormResult{}, err
	}
	b.progressf("storm %s: Running in %s, again after the restart in %s", p.label(),
		res.created.Round(time.Millisecond), res.restarted.Round(time.Millisecond))
	return res, b.deleteNamespace(ctx, ns)
}

// cpuBetween is modelgate's CPU seconds between two snapshots.
func cpuBetween(before, after snapshot) (float64, error) {
	all := func(map[string]string) bool { return true }
	b, err := before[fromModelgate].counter(processCPU, all)
	if err != nil {
		return 0, err
	}
	a, err := after[fromModelgate].counter(processCPU, all)
	return a - b, err
}

// restartDeployments does what kubectl rollout restart does to each of the
// n Deployments: a new kubectl.kubernetes.io/restartedAt on the template.
func (b *bench) restartDeployments(ctx context.Context, ns string, n int, at time.Time) error {
	patch := fmt.Appendf(nil, `{"spec":{"template":{"metadata":{"annotations":{"kubectl.kubernetes.io/restartedAt":%q}}}}}`, at.Format(time.RFC3339))
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: deploymentName(i)}}
			errs[i] = b.dev.Patch(ctx, d, client.RawPatch(types.StrategicMergePatchType, patch))
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return fmt.Errorf("restarting a Deployment: %w", err)
		}
	}
	return nil
}

// writeStorm writes the storm's table: a column per phase, then the cache
// off and on phases pooled, and on ÷ off.
func writeStorm(w io.Writer, info runInfo, webhooks []string, results []stormResult) error {
	if len(results) == 0 {
		return nil
	}
	var off, on []stormResult
	for _, r := range results {
		if r.cache {
			on = append(on, r)
		} else {
			off = append(off, r)
		}
	}
	pooled := func(rs []stormResult) (stormResult, error) {
		var ds []delta
		var s stormResult
		for _, r := range rs {
			ds = append(ds, r.delta)
			s.created += r.created / time.Duration(len(rs))
			s.restarted += r.restarted / time.Duration(len(rs))
			s.elapsed += r.elapsed
			s.idleCPU += r.idleCPU * r.elapsed.Seconds()
		}
		if s.elapsed > 0 {
			s.idleCPU /= s.elapsed.Seconds() // weighted by each phase's length
		}
		var err error
		s.delta, err = pool(ds)
		return s, err
	}
	offAll, err := pooled(off)
	if err != nil {
		return err
	}
	onAll, err := pooled(on)
	if err != nil {
		return err
	}
	cols := append(append([]stormResult{}, results...), offAll, onAll)
	t := &table{header: []string{"metric"}}
	for _, r := range results {
		t.header = append(t.header, r.label())
	}
	t.header = append(t.header, "cache off (all)", "cache on (all)", "on ÷ off")
	ratio := func(a, b float64) string {
		if a <= 0 {
			return notAvailable
		}
		return fmt.Sprintf("%.2f×", b/a)
	}
	row := func(title string, v func(stormResult) float64, format func(float64) string) {
		cells := []string{title}
		for _, r := range cols {
			cells = append(cells, format(v(r)))
		}
		t.add(append(cells, ratio(v(offAll), v(onAll)))...)
	}
	row("all pods Running after the creates", func(r stormResult) float64 { return r.created.Seconds() }, formatSeconds)
	row("all pods Running after the restart", func(r stormResult) float64 { return r.restarted.Seconds() }, formatSeconds)
	hs := stormHists(webhooks)
	for i, s := range hs {
		for _, q := range []float64{0.5, 0.99} {
			cells := []string{fmt.Sprintf("%s: p%g", s.title, q*100)}
			for _, r := range cols {
				cells = append(cells, formatEstimate(r.delta.hists[i].quantile(q)))
			}
			a, b := offAll.delta.hists[i].quantile(q), onAll.delta.hists[i].quantile(q)
			change := notAvailable
			if a.ok && b.ok {
				change = ratio(a.value, b.value)
			}
			t.add(append(cells, change)...)
		}
	}
	row("modelgate /validate handler: mean", func(r stormResult) float64 {
		h := r.delta.hists[stormHandler]
		if h.count == 0 {
			return 0
		}
		return h.sum / h.count
	}, formatSeconds)
	row("modelgate CPU per admission review, idle CPU taken off", stormResult.cpuPerReview, formatSeconds)
	row("modelgate idle CPU, per second", func(r stormResult) float64 { return r.idleCPU }, formatSeconds)
	for i, s := range stormCounters() {
		if i == stormCPU {
			row(s.title, func(r stormResult) float64 { return r.delta.counters[i] }, formatSeconds)
			continue
		}
		row(s.title, func(r stormResult) float64 { return r.delta.counters[i] }, formatCount)
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "\n## Replica storm: the policy library in force, the decision cache off and on\n\n")
	fmt.Fprintf(&sb, "- %d pods through Deployments of %d replicas, all Running, then a rollout restart of every Deployment; %d round(s), cache off then on in each, modelgate restarted between\n",
		info.pods, info.replicas, len(results)/2)
	fmt.Fprintf(&sb, "- CPU per admission review is modelgate's process CPU over the phase, less its idle CPU (measured for %s just before) over the same time, divided by its reviews (mutating and validating); the /validate handler's mean is its time from request to answer\n\n", idleWindow)
	if err := t.write(&sb); err != nil {
		return err
	}
	_, err = io.WriteString(w, sb.String())
	return err
}
