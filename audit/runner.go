package audit

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/time/rate"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	config "github.com/modelgate/modelgate/api/config/v1alpha1"
	policyv1 "github.com/modelgate/modelgate/api/policy/v1"
	"github.com/modelgate/modelgate/policies"
	policyview "github.com/modelgate/modelgate/policies/workload"
	"github.com/modelgate/modelgate/webhook"
)

// The audit lists the workloads it judges (pods, deployments and
// policyreports are listed by other parts too), writes PolicyReports and
// WorkloadPolicy status.audit.
// +kubebuilder:rbac:groups="",resources=pods,verbs=list
// +kubebuilder:rbac:groups=apps,resources=deployments;statefulsets,verbs=list
// +kubebuilder:rbac:groups=batch,resources=jobs;cronjobs,verbs=list
// +kubebuilder:rbac:groups=wgpolicyk8s.io,resources=policyreports,verbs=list;create;patch
// +kubebuilder:rbac:groups=openreports.io,resources=reports,verbs=list;create;patch
// +kubebuilder:rbac:groups=policy.modelgate.io,resources=workloadpolicies/status,verbs=patch

// FieldManager owns what the audit writes: the PolicyReports and
// WorkloadPolicy status.audit.
const FieldManager = "modelgate-audit"

// Runner audits the cluster every Interval, on the replica that holds the
// leader Lease, and writes what it finds: a PolicyReport per namespace
// (when the wgpolicyk8s.io CRD is installed), metrics, and each
// WorkloadPolicy's status.audit.
type Runner struct {
	// Client writes the reports and statuses and reads WorkloadPolicies
	// (from the manager's cache); Reader lists the workloads, a page at a
	// time (the API server: caching every Pod of the cluster would cost
	// the leader memory all the time).
	Client client.Client
	Reader client.Reader
	// Engine is the webhook's: the policies in force.
	Engine *policies.Engine
	// Namespaces are the webhook's namespace labels (its cache).
	Namespaces webhook.NamespaceLabeler
	// Claims are the webhook's resource claim templates and claims (its
	// cache): the GPUs of Pods' claims are counted as at admission.
	Claims  policyview.ClaimResolver
	Config  *config.Configuration
	Metrics *Metrics
	// Now is the clock; time.Now when nil.
	Now func() time.Time
	// AfterChange is how long after the policies in force change a pass
	// runs (DefaultAfterChange when zero): a burst of edits makes one pass.
	AfterChange time.Duration

	// engine evaluates the Engine's policies for the audit alone, so the
	// webhook's per-policy metrics count admission reviews only.
	engine *policies.Engine
}

var _ manager.LeaderElectionRunnable = (*Runner)(nil)

// NeedLeaderElection implements manager.LeaderElectionRunnable: one
// replica audits.
func (r *Runner) NeedLeaderElection() bool { return true }

// Start runs a pass AfterChange after it is elected (once this replica has
// loaded the policies: a pass with none would clear the reports the last
// leader wrote), then one every Interval, until ctx ends; and one
// AfterChange after the policies in force change (a WorkloadPolicy
// created, edited or deleted; a WorkloadPolicyException created, edited,
// deleted or expired), but never two within AfterChange of each other. A failed pass is logged and counted; the next one runs on time.
func (r *Runner) Start(ctx context.Context) error {
	log := logr.FromContextOrDiscard(ctx).WithName("audit")
	ctx = logr.NewContext(ctx, log)
	interval := r.Config.Audit.Interval.Duration
	settle := r.AfterChange
	if settle <= 0 {
		settle = DefaultAfterChange
	}
	select {
	case <-ctx.Done():
		return nil
	case <-time.After(settle):
	}
	tick := time.NewTicker(settle / 4)
	defer tick.Stop()
	for {
		start := r.now()
		judged, excepted := r.Engine.Set(), r.Engine.Exceptions()
		inForce := exceptionsInForce(excepted, start)
		if err := r.Pass(ctx); err != nil && ctx.Err() == nil {
			log.Error(err, "audit pass failed")
		}
		next := start.Add(interval)
		changedAt := time.Time{}
	wait:
		for {
			select {
			case <-ctx.Done():
				return nil
			case <-tick.C:
				now := r.now()
				changed := r.Engine.Set() != judged || r.Engine.Exceptions() != excepted ||
					exceptionsInForce(excepted, now) != inForce
				if changed && changedAt.IsZero() {
					changedAt = now
				}
				if !now.Before(next) || (!changedAt.IsZero() && now.Sub(changedAt) >= settle && now.Sub(start) >= settle) {
					break wait
				}
			}
		}
	}
}

// DefaultAfterChange is how long after a change of the policies in force
// the audit runs again.
const DefaultAfterChange = 15 * time.Second

func (r *Runner) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// exceptionsInForce names the exceptions of x in force at now: when one
// expires, what the audit reports changes.
func exceptionsInForce(x *policies.Exceptions, now time.Time) string {
	var b strings.Builder
	for _, e := range x.All() {
		if x.InForce(e, now) {
			b.WriteString(e.Ref())
			b.WriteByte(0)
		}
	}
	return b.String()
}

// Pass audits every workload once and writes the results.
func (r *Runner) Pass(ctx context.Context) (err error) {
	start := r.now()
	defer func() {
		if err != nil {
			r.Metrics.failed()
		}
	}()
	if r.engine == nil {
		r.engine = policies.NewEngine(policies.Options{Timeout: r.Config.Policy.EvaluationTimeout.Duration})
	}
	r.engine.Swap(r.Engine.Set())
	r.engine.SetExceptions(r.Engine.Exceptions())
	r.engine.Set().Prepare(ctx)
	a := New(r.Config, r.engine, r.Namespaces)
	a.SetClaims(r.Claims)
	limit := rate.NewLimiter(rate.Limit(r.Config.Audit.ObjectsPerSecond), int(r.Config.Audit.ObjectsPerSecond))
	var outcomes []Outcome
	err = List(ctx, r.Reader, "", DefaultPageSize, func(raw []byte) error {
		if err := limit.Wait(ctx); err != nil {
			return err
		}
		o, err := a.Audit(ctx, raw)
		if err != nil {
			// One object the handlers cannot judge does not stop the pass.
			logr.FromContextOrDiscard(ctx).Info("workload not audited", "error", err.Error())
			return nil
		}
		if o.Skipped == "" {
			outcomes = append(outcomes, o)
		}
		return nil
	})
	if err != nil {
		return err
	}
	end := r.now()
	if err := r.writeReports(ctx, outcomes, end); err != nil {
		return err
	}
	if err := r.writeStatuses(ctx, outcomes, end); err != nil {
		return err
	}
	r.Metrics.passed(outcomes, end.Sub(start), end)
	logr.FromContextOrDiscard(ctx).V(1).Info("audit pass done", "workloads", len(outcomes), "took", end.Sub(start).String())
	return nil
}

// writeReports writes the reports of each kind of audit.reports (one
// report per namespace of each kind, with the same results).
func (r *Runner) writeReports(ctx context.Context, outcomes []Outcome, now time.Time) error {
	var errs []error
	for _, name := range r.Config.Audit.Reports {
		if gvk, ok := ReportKinds[name]; ok {
			errs = append(errs, r.writeReportsOf(ctx, gvk, outcomes, now))
		}
	}
	return errors.Join(errs...)
}

// writeReportsOf applies a report of kind gvk per namespace with audited
// workloads, and an empty one over modelgate's reports in the other
// namespaces (modelgate may not delete: a deleted namespace takes its
// report with it). It does nothing when the kind's CRD is not installed.
func (r *Runner) writeReportsOf(ctx context.Context, gvk schema.GroupVersionKind, outcomes []Outcome, now time.Time) error {
	existing := &unstructured.UnstructuredList{}
	existing.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	if err := r.Client.List(ctx, existing, client.MatchingLabels{ManagedByLabel: ManagedBy}); err != nil {
		if meta.IsNoMatchError(err) || apierrors.IsNotFound(err) {
			logr.FromContextOrDiscard(ctx).V(1).Info("the report CRD is not installed: no reports written", "kind", gvk.String())
			return nil
		}
		return fmt.Errorf("listing %s: %w", gvk.Kind, err)
	}
	reports := Reports(gvk, outcomes, now, int(r.Config.Audit.MaxResultsPerReport))
	for i := range existing.Items {
		old := &existing.Items[i]
		if _, current := reports[old.GetNamespace()]; current || old.GetName() != ReportName {
			continue
		}
		reports[old.GetNamespace()] = emptyReport(gvk, old.GetNamespace())
	}
	for _, rep := range reports {
		//nolint:staticcheck // client.Apply on unstructured objects is the plain way to apply them.
		if err := r.Client.Patch(ctx, rep, client.Apply, client.FieldOwner(FieldManager), client.ForceOwnership); err != nil {
			return fmt.Errorf("writing %s %s/%s: %w", gvk.Kind, rep.GetNamespace(), rep.GetName(), err)
		}
	}
	return nil
}

// writeStatuses sets status.audit of every WorkloadPolicy in the cluster:
// its counts, zero for a policy that applied to nothing.
func (r *Runner) writeStatuses(ctx context.Context, outcomes []Outcome, now time.Time) error {
	var wps policyv1.WorkloadPolicyList
	if err := r.Client.List(ctx, &wps); err != nil {
		return fmt.Errorf("listing WorkloadPolicies: %w", err)
	}
	counts := PolicyCounts(outcomes)
	var errs []error
	for i := range wps.Items {
		wp := &wps.Items[i]
		s := counts[wp.Name]
		want := &policyv1.AuditStatus{LastAuditTime: metav1.NewTime(now.Truncate(time.Second)),
			Fail: clamp32(s.Fail), Warn: clamp32(s.Warn), Error: clamp32(s.Error), Pass: clamp32(s.Pass), Skip: clamp32(s.Skip)}
		// A merge patch of status.audit alone: the policy controller's
		// conditions are not touched, and no resourceVersion is needed.
		patch := fmt.Appendf(nil, `{"status":{"audit":{"lastAuditTime":%q,"fail":%d,"warn":%d,"error":%d,"pass":%d,"skip":%d}}}`,
			want.LastAuditTime.UTC().Format(time.RFC3339), want.Fail, want.Warn, want.Error, want.Pass, want.Skip)
		if err := r.Client.Status().Patch(ctx, wp, client.RawPatch(types.MergePatchType, patch), client.FieldOwner(FieldManager)); client.IgnoreNotFound(err) != nil {
			errs = append(errs, fmt.Errorf("writing the audit status of WorkloadPolicy %s: %w", wp.Name, err))
		}
	}
	return errors.Join(errs...)
}

// clamp32 is n as an int32, at most MaxInt32.
func clamp32(n int) int32 { return int32(min(n, math.MaxInt32)) } //nolint:gosec // clamped above.

var (
	metricsOnce sync.Once
	metrics     *Metrics
)

// Register adds the periodic audit to mgr when the Configuration enables
// it: a webhook.Extension. Its metrics are registered with
// controller-runtime's registry once per process.
func Register(mgr manager.Manager, cfg *config.Configuration, parts webhook.Parts) error {
	if !cfg.AuditEnabled() {
		return nil
	}
	metricsOnce.Do(func() { metrics = NewMetrics(ctrlmetrics.Registry) })
	return mgr.Add(&Runner{
		Client:     mgr.GetClient(),
		Reader:     mgr.GetAPIReader(),
		Engine:     parts.Engine,
		Namespaces: parts.Namespaces,
		Claims:     parts.Claims,
		Config:     cfg,
		Metrics:    metrics,
	})
}

var _ webhook.Extension = Register
