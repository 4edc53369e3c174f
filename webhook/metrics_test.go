package webhook

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	config "github.com/modelgate/modelgate/api/config/v1alpha1"
	"github.com/modelgate/modelgate/policies"
)

// Issue 15, item 1: the kind and operation of a review are whatever its
// sender wrote. Reviews with made-up kinds and operations, sent to the
// port by anyone, must not add a metric series each: before the labels
// were bounded, 60 reviews with 1 MB kinds kept 60 MB of label values.
func TestMetricLabelsAreBounded(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, pm := NewMetrics(reg), NewPolicyMetrics(reg)
	mutating := NewMutating(config.New(), testNamespaces, m)
	validating := NewValidating(config.New(), policies.NewEngine(policies.Options{}), testNamespaces, pm)
	ctx := context.Background()
	forged := func(i int) admission.Request {
		kind := fmt.Sprintf("Forged%d%s", i, strings.Repeat("x", 1<<10))
		return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
			UID:       "uid",
			Kind:      metav1.GroupVersionKind{Group: "evil.example.com", Version: "v1", Kind: kind},
			Namespace: nsPlain,
			Operation: admissionv1.Operation(fmt.Sprintf("OP%d", i)),
			Object:    runtime.RawExtension{Raw: []byte(`{}`)},
		}}
	}
	count := func() map[string]int {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		series := map[string]int{}
		for _, mf := range mfs {
			series[mf.GetName()] = len(mf.GetMetric())
		}
		return series
	}
	before := count() // the error series, made at 0 at the start
	for i := range 200 {
		mutating.Handle(ctx, forged(i))
		validating.Handle(ctx, forged(i))
	}
	series := count()
	for _, name := range []string{"modelgate_mutating_reviews_total", "modelgate_validating_reviews_total"} {
		if n := series[name] - before[name]; n == 0 || n > 2 {
			t.Errorf("%s gained %d series from 200 forged kinds and operations, want 1 or 2 (kind and operation %q)", name, n, labelOther)
		}
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, metric := range mf.GetMetric() {
			for _, l := range metric.GetLabel() {
				if strings.Contains(l.GetValue(), "Forged") || strings.HasPrefix(l.GetValue(), "OP") {
					t.Errorf("%s carries the sender's value %.40q in label %s", mf.GetName(), l.GetValue(), l.GetName())
				}
			}
		}
	}
}

func TestMetricLabels(t *testing.T) {
	for in, want := range map[string]string{"Pod": "Pod", "CronJob": "CronJob", "AIInference": "AIInference", "pod": labelOther, "": labelOther} {
		if got := kindLabel(in); got != want {
			t.Errorf("kindLabel(%q) = %q, want %q", in, got, want)
		}
	}
	for in, want := range map[string]string{"CREATE": "CREATE", "UPDATE": "UPDATE", "DELETE": "DELETE", "create": labelOther, "PATCH": labelOther} {
		if got := operationLabel(in); got != want {
			t.Errorf("operationLabel(%q) = %q, want %q", in, got, want)
		}
	}
}

// Issue 33, item 1: the series the alerts and the dashboard read exist at
// 0 before the first event, so that the first error, failed load or
// denial shows as an increase (a series born at its first value shows
// none, and increase() over it is 0).
func TestCountersStartAtZero(t *testing.T) {
	reg := prometheus.NewRegistry()
	NewMetrics(reg)
	pm := NewPolicyMetrics(reg)
	e := policies.NewEngine(policies.Options{Observer: pm})
	c, err := policies.Compile(context.Background(), policies.Policy{Name: "gpu-limit",
		Module: "package t\n\ndeny contains \"no\" if false\n"})
	if err != nil {
		t.Fatal(err)
	}
	e.Swap(policies.NewSet(c))
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			labels := []string{}
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			if v := m.GetCounter().GetValue(); v != 0 {
				t.Errorf("%s{%s} starts at %v, want 0", mf.GetName(), strings.Join(labels, ","), v)
			}
			got[mf.GetName()+"{"+strings.Join(labels, ",")+"}"] = true
		}
	}
	for _, want := range []string{
		"modelgate_mutating_reviews_total{kind=Pod,operation=CREATE,outcome=error}",
		"modelgate_mutating_reviews_total{kind=Deployment,operation=UPDATE,outcome=error}",
		"modelgate_validating_reviews_total{kind=AIInference,operation=CREATE,outcome=error}",
		"modelgate_validating_reviews_total{kind=CronJob,operation=UPDATE,outcome=error}",
		"modelgate_policy_load_errors_total{source=WorkloadPolicy}",
		"modelgate_policy_load_errors_total{source=directory}",
		"modelgate_policy_evaluations_total{decision=error,policy=gpu-limit}",
		"modelgate_policy_evaluations_total{decision=dryrun,policy=gpu-limit}",
	} {
		if !got[want] {
			t.Errorf("no series %s at the start", want)
		}
	}
}
