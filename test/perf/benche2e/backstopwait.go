package main

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/modelgate/modelgate/api/annotations"
	policyv1 "github.com/modelgate/modelgate/api/policy/v1"
	"github.com/modelgate/modelgate/controller/celpolicy"
	"github.com/modelgate/modelgate/policies/celform"
	"github.com/modelgate/modelgate/test/harnesses/builders"
)

// How a backstop phase knows the setting is acted on.
const (
	// probePolicy is the library policy the probe Pod breaks: 16 GPUs,
	// over its limit of 8.
	probePolicy = "max-gpus-per-pod"
	probeGPUs   = "16"
	// celController is the name of modelgate's controller that applies
	// the generated policies (controller/celpolicy).
	celController = "workloadpolicy-cel"
	// leaderTimeout bounds how long a restarted modelgate may take to
	// lead and reconcile: the old lease may have to expire first.
	leaderTimeout = 2 * switchTimeout
)

// libraryWithCEL returns the library's WorkloadPolicies that carry a CEL
// form.
func libraryWithCEL(root string) ([]*policyv1.WorkloadPolicy, error) {
	wps, err := builders.SamplePolicies(filepath.Join(root, "config", "samples", "policies"))
	if err != nil {
		return nil, err
	}
	wps = slices.DeleteFunc(wps, func(wp *policyv1.WorkloadPolicy) bool { return wp.Spec.CEL == nil })
	if !slices.ContainsFunc(wps, func(wp *policyv1.WorkloadPolicy) bool { return wp.Name == probePolicy }) {
		return nil, fmt.Errorf("the library's %s has no CEL form: the backstop's probe needs it", probePolicy)
	}
	return wps, nil
}

// generated lists the names of the ValidatingAdmissionPolicies and
// bindings modelgate manages.
func (b *bench) generated(ctx context.Context) (vaps, bindings []string, err error) {
	managed := client.MatchingLabels{celform.ManagedByLabel: celform.ManagedBy}
	var vl admissionregistrationv1.ValidatingAdmissionPolicyList
	if err := b.admin.List(ctx, &vl, managed); err != nil {
		return nil, nil, fmt.Errorf("listing ValidatingAdmissionPolicies: %w", err)
	}
	var bl admissionregistrationv1.ValidatingAdmissionPolicyBindingList
	if err := b.admin.List(ctx, &bl, managed); err != nil {
		return nil, nil, fmt.Errorf("listing ValidatingAdmissionPolicyBindings: %w", err)
	}
	for _, v := range vl.Items {
		vaps = append(vaps, v.Name)
	}
	for _, v := range bl.Items {
		bindings = append(bindings, v.Name)
	}
	slices.Sort(vaps)
	slices.Sort(bindings)
	return vaps, bindings, nil
}

// waitGenerated waits until modelgate has applied the policy of each CEL
// form and returns their names. One the API server refused (its
// WorkloadPolicy's CELReady says Rejected), or still missing after
// switchTimeout, is left out with a warning: the measurement is of what
// modelgate could put in force.
func (b *bench) waitGenerated(ctx context.Context, pc client.Client, wps []*policyv1.WorkloadPolicy) ([]string, error) {
	deadline := time.Now().Add(switchTimeout)
	for {
		vaps, _, err := b.generated(ctx)
		if err != nil {
			return nil, err
		}
		var applied, missing, why []string
		final := true // every missing one was refused
		for _, wp := range wps {
			name := celform.Name(wp.Name)
			if slices.Contains(vaps, name) {
				applied = append(applied, name)
				continue
			}
			refused, desc, err := celReady(ctx, pc, wp.Name)
			if err != nil {
				return nil, err
			}
			missing = append(missing, name)
			why = append(why, fmt.Sprintf("%s (%s)", name, desc))
			final = final && refused
		}
		if len(missing) == 0 {
			return applied, nil
		}
		if final || time.Now().After(deadline) {
			if slices.Contains(missing, celform.Name(probePolicy)) {
				return nil, fmt.Errorf("modelgate did not apply the generated policy the probe needs: %s", strings.Join(why, "; "))
			}
			b.progressf("WARNING: measuring without the generated policies modelgate did not apply: %s", strings.Join(why, "; "))
			return applied, nil
		}
		if err := sleep(ctx, 200*time.Millisecond); err != nil {
			return nil, err
		}
	}
}

// policyClient is a client for WorkloadPolicies, as the administrator.
func policyClient(admin *rest.Config) (client.Client, error) {
	s := runtime.NewScheme()
	if err := policyv1.AddToScheme(s); err != nil {
		return nil, err
	}
	c, err := client.New(admin, client.Options{Scheme: s})
	if err != nil {
		return nil, fmt.Errorf("creating a client for WorkloadPolicies: %w", err)
	}
	return c, nil
}

// celReady reads the WorkloadPolicy's CELReady condition: whether it says
// the API server refused the generated policy of its current generation,
// and what it says.
func celReady(ctx context.Context, pc client.Client, name string) (bool, string, error) {
	wp := &policyv1.WorkloadPolicy{}
	if err := pc.Get(ctx, client.ObjectKey{Name: name}, wp); err != nil {
		return false, "", fmt.Errorf("reading WorkloadPolicy %s: %w", name, err)
	}
	c := meta.FindStatusCondition(wp.Status.Conditions, celpolicy.ConditionCELReady)
	if c == nil {
		return false, "no " + celpolicy.ConditionCELReady + " condition yet", nil
	}
	refused := c.Status == metav1.ConditionFalse && c.Reason == celpolicy.ReasonRejected && c.ObservedGeneration == wp.Generation
	return refused, fmt.Sprintf("%s %s, %s: %s", celpolicy.ConditionCELReady, c.Status, c.Reason, c.Message), nil
}

// waitBackstop waits until the restarted modelgate serves its webhooks,
// has the library loaded, leads and has reconciled every WorkloadPolicy,
// and the API server enforces the generated policies (bound) or not
// (unbound): the bindings exist or are gone, and a dry run of a Pod over
// max-gpus-per-pod in ns is refused by the API server's policy, or not.
func (b *bench) waitBackstop(ctx context.Context, ns string, bound bool, policies []string) error {
	if err := waitWebhooks(ctx, b.dev, b.scraper, b.hooks.names, true); err != nil {
		return err
	}
	if err := b.waitPolicies(ctx); err != nil {
		return err
	}
	if err := b.waitLeader(ctx); err != nil {
		return err
	}
	probe := serialPod(ns, &annotatedDeployment(ns, templateName, 1).Spec.Template)
	probe.Annotations[annotations.GPU] = probeGPUs
	deadline := time.Now().Add(switchTimeout)
	for {
		vaps, bindings, err := b.generated(ctx)
		if err != nil {
			return err
		}
		why := bindingsInPlace(policies, vaps, bindings, bound)
		if why == "" {
			err := b.dev.Create(ctx, probe.DeepCopy(), client.DryRunAll)
			if probeAgrees(err, bound, policies) {
				return nil
			}
			why = fmt.Sprintf("the dry run of a Pod asking for %s GPUs answered %v", probeGPUs, err)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the API server does not act on policy.backstop %t within %s: %s", bound, switchTimeout, why)
		}
		if err := sleep(ctx, 200*time.Millisecond); err != nil {
			return err
		}
	}
}

// bindingsInPlace says what is amiss with the generated policies' bindings
// (vaps and bindings as listed) for the setting, or "" when nothing is:
// bound, every one of policies is applied and bound; unbound, none of
// modelgate's bindings is left.
func bindingsInPlace(policies, vaps, bindings []string, bound bool) string {
	if !bound {
		if len(bindings) > 0 {
			return "bindings left: " + strings.Join(bindings, ", ")
		}
		return ""
	}
	var missing []string
	for _, p := range policies {
		if !slices.Contains(vaps, p) || !slices.Contains(bindings, p) {
			missing = append(missing, p)
		}
	}
	if len(missing) > 0 {
		return "not applied and bound: " + strings.Join(missing, ", ")
	}
	return ""
}

// probeAgrees reports whether the dry run of the Pod over max-gpus-per-pod
// answered as the setting has it: bound, the API server's own policy
// refused it; unbound, none of the generated policies did (modelgate's
// webhook refuses it instead). The API server's message is the only place
// that names the refusing ValidatingAdmissionPolicy.
func probeAgrees(err error, bound bool, policies []string) bool {
	named := func(vap string) bool {
		return err != nil && strings.Contains(err.Error(), "ValidatingAdmissionPolicy '"+vap+"'")
	}
	if bound {
		return named(celform.Name(probePolicy))
	}
	return !slices.ContainsFunc(policies, named)
}

// waitLeader waits until the restarted modelgate leads and its controller
// of the generated policies has reconciled every WorkloadPolicy and has
// nothing queued, so that neither phase measures its start-up pass.
func (b *bench) waitLeader(ctx context.Context) error {
	ours := func(l map[string]string) bool { return l["controller"] == celController || l["name"] == celController }
	all := func(map[string]string) bool { return true }
	deadline := time.Now().Add(leaderTimeout)
	for {
		f, err := b.scraper.modelgate(ctx)
		if err != nil {
			return err
		}
		leader, _, err := f.gauge("leader_election_master_status", all)
		if err != nil {
			return err
		}
		reconciled, err := f.counter("controller_runtime_reconcile_total", ours)
		if err != nil {
			return err
		}
		depth, seen, err := f.gauge("workqueue_depth", ours)
		if err != nil {
			return err
		}
		if leader >= 1 && reconciled >= libraryPolicies && seen && depth == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("modelgate did not lead and reconcile the library within %s (leader %g, %s reconciles %g, queued %g)",
				leaderTimeout, leader, celController, reconciled, depth)
		}
		if err := sleep(ctx, 200*time.Millisecond); err != nil {
			return err
		}
	}
}

// gauge returns the sum of the named gauge's series that match, and
// whether any did.
func (f families) gauge(name string, match func(map[string]string) bool) (float64, bool, error) {
	fam, ok := f[name]
	if !ok {
		return 0, false, nil
	}
	if fam.GetType() != dto.MetricType_GAUGE {
		return 0, false, fmt.Errorf("%s is a %s, not a gauge", name, fam.GetType())
	}
	var total float64
	seen := false
	for _, m := range fam.GetMetric() {
		if match(labelsOf(m)) {
			total += m.GetGauge().GetValue()
			seen = true
		}
	}
	return total, seen, nil
}

// sleep waits d, or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-time.After(d):
		return nil
	}
}
