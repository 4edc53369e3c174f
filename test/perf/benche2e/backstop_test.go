package main

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestBackstopSchedule(t *testing.T) {
	var got []string
	for _, p := range backstopSchedule(2) {
		got = append(got, p.label()+" in "+p.namespace())
	}
	want := []string{
		"r1 unbound in backstop-r1-unbound", "r1 bound in backstop-r1-bound",
		"r2 unbound in backstop-r2-unbound", "r2 bound in backstop-r2-bound",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("backstopSchedule(2) (-want +got):\n%s", diff)
	}
	if got := backstopSchedule(0); len(got) != 0 {
		t.Errorf("backstopSchedule(0) = %v, want no phase", got)
	}
}

func TestBindingsInPlace(t *testing.T) {
	policies := []string{"modelgate-a", "modelgate-b"}
	for name, tc := range map[string]struct {
		vaps, bindings []string
		bound          bool
		want           string
	}{
		"bound, all bound":                             {policies, policies, true, ""},
		"bound, one binding missing":                   {policies, policies[:1], true, "not applied and bound: modelgate-b"},
		"bound, one policy not applied":                {policies[1:], policies, true, "not applied and bound: modelgate-a"},
		"bound, nothing yet":                           {nil, nil, true, "not applied and bound: modelgate-a, modelgate-b"},
		"unbound, bindings gone":                       {policies, nil, false, ""},
		"unbound, a binding left":                      {policies, policies[1:], false, "bindings left: modelgate-b"},
		"bound, an extra binding is not ours to judge": {policies, append([]string{"modelgate-z"}, policies...), true, ""},
	} {
		t.Run(name, func(t *testing.T) {
			if got := bindingsInPlace(policies, tc.vaps, tc.bindings, tc.bound); got != tc.want {
				t.Errorf("bindingsInPlace = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestProbeAgrees(t *testing.T) {
	policies := []string{"modelgate-max-gpus-per-pod", "modelgate-required-owner-team"}
	byVAP := func(vap string) error {
		return errors.New(`admission webhook denied: ValidatingAdmissionPolicy '` + vap + `' with binding '` + vap + `' denied request: [x] too many`)
	}
	byWebhook := errors.New(`admission webhook "workload.validate.modelgate.io" denied the request: [max-gpus-per-pod] pod asks for 16 GPUs`)
	for name, tc := range map[string]struct {
		err   error
		bound bool
		want  bool
	}{
		"bound, refused by the generated policy":     {byVAP("modelgate-max-gpus-per-pod"), true, true},
		"bound, refused by modelgate's webhook only": {byWebhook, true, false},
		"bound, refused by another generated policy": {byVAP("modelgate-required-owner-team"), true, false},
		"bound, admitted":                          {nil, true, false},
		"unbound, refused by modelgate's webhook":  {byWebhook, false, true},
		"unbound, still refused by the API server": {byVAP("modelgate-max-gpus-per-pod"), false, false},
		"unbound, by another generated policy":     {byVAP("modelgate-required-owner-team"), false, false},
		"unbound, admitted":                        {nil, false, true},
	} {
		t.Run(name, func(t *testing.T) {
			if got := probeAgrees(tc.err, tc.bound, policies); got != tc.want {
				t.Errorf("probeAgrees(%v, bound %t) = %t, want %t", tc.err, tc.bound, got, tc.want)
			}
		})
	}
}

// TestWriteBackstop checks the backstop's table: a column per phase, the
// unbound and bound phases pooled (samples together, histograms added,
// times averaged), bound ÷ unbound, and the reading.
func TestWriteBackstop(t *testing.T) {
	ms := func(add int) []time.Duration {
		var out []time.Duration
		for i := 1; i <= 10; i++ {
			out = append(out, time.Duration(i+add)*time.Millisecond)
		}
		return out
	}
	// In backstopHists order: step, plugin, checks, webhook, POST pods.
	serial := func(plugin float64) delta {
		return delta{hists: []histogram{
			hist(0.02, 0.005, 10, inf, 10), hist(plugin, 0.005, 10, inf, 10), {}, hist(0.03, 0.005, 10, inf, 10), {},
		}}
	}
	burst := delta{hists: []histogram{
		hist(1, 0.005, 100, 0.025, 200, inf, 200), hist(0.01, 0.005, 200, inf, 200), {}, hist(0.6, 0.005, 100, inf, 100), hist(0.5, 0.025, 100, inf, 100),
	}}
	var results []backstopResult
	for _, p := range backstopSchedule(2) {
		r := backstopResult{backstopPhase: p, pods: ms(0), deployments: ms(1), serial: serial(0.0001),
			creates: time.Second, running: 4 * time.Second, burst: burst}
		if p.bound {
			r.pods, r.deployments, r.serial = ms(1), ms(2), serial(0.0005)
			r.running = time.Duration(p.round) * 5 * time.Second // 5 s and 10 s: mean 7.5 s
		}
		results = append(results, r)
	}
	run := backstopRun{policies: make([]string, 8), celForms: 8, results: results}
	var b strings.Builder
	if err := writeBackstop(&b, runInfo{pods: 100, replicas: 25}, backstopHists(nil, nil), run); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	row := func(prefix string) string { return tableRow(t, out, prefix) }
	for prefix, want := range map[string]string{
		"metric ": "r1 unbound | r1 bound | r2 unbound | r2 bound | unbound (all) | bound (all) | bound ÷ unbound",
		// 1..10 ms and 2..11 ms; pooled, each twice: the 10th of 20.
		"serial dry-run Pod create, client: p50":                              "5.00 ms | 6.00 ms | 5.00 ms | 6.00 ms | 5.00 ms | 6.00 ms | 1.20×",
		"serial dry-run Pod create, client: p95":                              "10.0 ms | 11.0 ms | 10.0 ms | 11.0 ms | 10.0 ms | 11.0 ms | 1.10×",
		"serial dry-run Pod create, client: mean":                             "5.50 ms | 6.50 ms | 5.50 ms | 6.50 ms | 5.50 ms | 6.50 ms | 1.18×",
		"serial dry-run Deployment create, client: mean":                      "6.50 ms | 7.50 ms | 6.50 ms | 7.50 ms | 6.50 ms | 7.50 ms | 1.15×",
		"serial: admission step validate, CREATEs: observations":              "10 | 10 | 10 | 10 | 20 | 20 | 1.00×",
		"serial: admission step validate, CREATEs: mean":                      "2.00 ms | 2.00 ms | 2.00 ms | 2.00 ms | 2.00 ms | 2.00 ms | 1.00×",
		"serial: ValidatingAdmissionPolicy plugin, CREATEs: mean":             "10.0 µs | 50.0 µs | 10.0 µs | 50.0 µs | 10.0 µs | 50.0 µs | 5.00×",
		"serial: ValidatingAdmissionPolicy plugin, CREATEs: p99":              "4.95 ms (0, 5 ms] | 4.95 ms (0, 5 ms] | 4.95 ms (0, 5 ms] | 4.95 ms (0, 5 ms] | 4.95 ms (0, 5 ms] | 4.95 ms (0, 5 ms] | 1.00×",
		"serial: generated policies' checks that did not admit: observations": "0 | 0 | 0 | 0 | 0 | 0 | n/a",
		"serial: generated policies' checks that did not admit: mean":         "n/a | n/a | n/a | n/a | n/a | n/a | n/a",
		"burst: all pods Running":                                             "4.00 s | 5.00 s | 4.00 s | 10.0 s | 4.00 s | 7.50 s | 1.88×",
		"burst: admission step validate, CREATEs: observations":               "200 | 200 | 200 | 200 | 400 | 400 | 1.00×",
		"burst: POST pods: mean":                                              "5.00 ms | 5.00 ms | 5.00 ms | 5.00 ms | 5.00 ms | 5.00 ms | 1.00×",
	} {
		if got := row(prefix); got != want {
			t.Errorf("%s: %q, want %q", prefix, got, want)
		}
	}
	for _, want := range []string{
		"## Backstop: the generated policies bound against unbound",
		"the 8 ValidatingAdmissionPolicies", "2 round(s)", "100 pods through Deployments of 25 replicas",
		"Reading: bound, the 8 generated policies take a serial dry-run Pod create from 5.00 ms to 6.00 ms (1.20×) at the median",
		"plugin takes 50.0 µs per CREATE on average, bound, against 10.0 µs unbound (modelgate's validating webhook: 3.00 ms)",
		"Running from 4.00 s to 7.50 s (1.88×).",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the backstop's report lacks %q:\n%s", want, out)
		}
	}
	if results[0].serial.hists[bsStep].count != 10 {
		t.Errorf("pooling changed a phase's histogram: %g observations, want 10", results[0].serial.hists[bsStep].count)
	}

	b.Reset()
	if err := writeBackstop(&b, runInfo{}, nil, backstopRun{}); err != nil || b.Len() != 0 {
		t.Errorf("no backstop phases: wrote %q (%v), want nothing", b.String(), err)
	}
}
