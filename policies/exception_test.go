package policies

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/labels"
)

var exceptionNow = time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)

// denied is a decision of three policies: max-gpus and no-latest deny,
// advisory (warn mode) warns.
func denied() Decision {
	return Decision{Results: []Result{
		{Policy: "advisory", Source: "test", Action: ActionWarn, Deny: []Violation{{Msg: "consider fewer GPUs"}}},
		{Policy: "broken", Source: "test", Action: ActionDeny, Err: errors.New("boom")},
		{Policy: "max-gpus", Source: "test", Action: ActionDeny, Deny: []Violation{{Msg: "gpu8 asks for 8 GPUs, more than 4"}}},
		{Policy: "no-latest", Source: "test", Action: ActionDeny, Deny: []Violation{{Msg: "no :latest images"}}},
	}}
}

func TestExceptionsExcept(t *testing.T) {
	pod := Subject{
		Namespace:  "team-a",
		Identities: []Identity{{Kind: "Pod", Name: "gpu8-7d9-x2"}, {Kind: "Deployment", Name: "gpu8"}},
		Labels:     []map[string]string{{"app": "bench"}},
	}
	base := Exception{
		Namespace: "team-a", Name: "bench", Source: "test", Policies: []string{"max-gpus", "broken", "advisory"},
		ExpiresAt: exceptionNow.Add(time.Hour), Reason: "benchmark", Ticket: "OPS-123",
	}
	with := func(f func(e *Exception)) *Exception {
		e := base
		f(&e)
		return &e
	}
	cases := map[string]struct {
		ex        *Exception
		skew      time.Duration
		subject   Subject
		wantLifts int
	}{
		"covers the named policy's denial": {ex: &base, subject: pod, wantLifts: 1},
		"another namespace":                {ex: with(func(e *Exception) { e.Namespace = "team-b" }), subject: pod},
		"the Deployment that made the Pod": {ex: with(func(e *Exception) { e.Kinds, e.Names = []string{"Deployment"}, []string{"gpu8"} }), subject: pod, wantLifts: 1},
		"kind and name of different identities": {
			ex: with(func(e *Exception) { e.Kinds, e.Names = []string{"Pod"}, []string{"gpu8"} }), subject: pod,
		},
		"another name": {ex: with(func(e *Exception) { e.Names = []string{"gpu4"} }), subject: pod},
		// Issue 42, item 6: a policy is its source and its name.
		"a policy of that name from another source": {ex: with(func(e *Exception) { e.Source = "directory" }), subject: pod},
		"selector matches":                          {ex: with(func(e *Exception) { e.Selector = labels.SelectorFromSet(labels.Set{"app": "bench"}) }), subject: pod, wantLifts: 1},
		"selector misses":                           {ex: with(func(e *Exception) { e.Selector = labels.SelectorFromSet(labels.Set{"app": "train"}) }), subject: pod},
		"expired":                                   {ex: with(func(e *Exception) { e.ExpiresAt = exceptionNow }), subject: pod},
		"expires in a nanosecond":                   {ex: with(func(e *Exception) { e.ExpiresAt = exceptionNow.Add(time.Nanosecond) }), subject: pod, wantLifts: 1},
		"within the clock skew of expiring": {
			ex: with(func(e *Exception) { e.ExpiresAt = exceptionNow.Add(59 * time.Second) }), skew: time.Minute, subject: pod,
		},
		"beyond the clock skew": {ex: with(func(e *Exception) { e.ExpiresAt = exceptionNow.Add(61 * time.Second) }), skew: time.Minute, subject: pod, wantLifts: 1},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			x := NewExceptions(tc.skew, tc.ex)
			d := denied()
			if got := x.Except(&d, &tc.subject, exceptionNow); got != tc.wantLifts {
				t.Fatalf("lifted %d denials, want %d", got, tc.wantLifts)
			}
			wantDenials := []string{"[broken] policy evaluation failed: boom", "[no-latest] no :latest images"}
			if tc.wantLifts == 0 {
				wantDenials = []string{"[broken] policy evaluation failed: boom", "[max-gpus] gpu8 asks for 8 GPUs, more than 4", "[no-latest] no :latest images"}
			}
			if diff := cmp.Diff(wantDenials, d.Denials()); diff != "" {
				t.Errorf("denials (-want +got):\n%s", diff)
			}
			if tc.wantLifts == 0 {
				return
			}
			want := []string{
				"[advisory] consider fewer GPUs",
				"[max-gpus] allowed by exception team-a/bench (ticket OPS-123) until " + tc.ex.ExpiresAt.Format(time.RFC3339) + ": gpu8 asks for 8 GPUs, more than 4",
			}
			if diff := cmp.Diff(want, d.Warnings()); diff != "" {
				t.Errorf("warnings (-want +got):\n%s", diff)
			}
			if got := d.ExceptedBy(); !slices.Equal(got, []string{"team-a/bench"}) {
				t.Errorf("ExceptedBy %v, want [team-a/bench]", got)
			}
			if got := d.Results[2].Decision(); got != "excepted" {
				t.Errorf("max-gpus decision %q, want excepted", got)
			}
			// Errors and warn-mode messages are never lifted.
			if d.Results[0].Decision() != "warn" || d.Results[1].Decision() != "error" {
				t.Errorf("advisory %q and broken %q: want warn and error", d.Results[0].Decision(), d.Results[1].Decision())
			}
		})
	}
}

// Every denial of an excepted policy is lifted by one exception, the first
// by name; without a ticket the warning says none.
func TestExceptionsFirstByName(t *testing.T) {
	later := &Exception{Namespace: "ns", Name: "z-wide", Policies: []string{"max-gpus"}, ExpiresAt: exceptionNow.Add(time.Hour)}
	first := &Exception{Namespace: "ns", Name: "a-narrow", Policies: []string{"max-gpus"}, ExpiresAt: exceptionNow.Add(2 * time.Hour)}
	x := NewExceptions(0, later, first)
	d := Decision{Results: []Result{{Policy: "max-gpus", Action: ActionDeny, Deny: []Violation{{Msg: "a"}, {Msg: "b"}}}}}
	s := Subject{Namespace: "ns", Identities: []Identity{{Kind: "Pod", Name: "p"}}}
	if n := x.Except(&d, &s, exceptionNow); n != 2 {
		t.Fatalf("lifted %d, want 2", n)
	}
	want := []string{
		"[max-gpus] allowed by exception ns/a-narrow until 2026-11-28T14:00:00Z: a",
		"[max-gpus] allowed by exception ns/a-narrow until 2026-11-28T14:00:00Z: b",
	}
	if diff := cmp.Diff(want, d.Warnings()); diff != "" {
		t.Errorf("warnings (-want +got):\n%s", diff)
	}
	if !d.Allowed() {
		t.Error("want the decision allowed")
	}
	if got := []string{x.All()[0].Name, x.All()[1].Name}; !slices.Equal(got, []string{"a-narrow", "z-wide"}) {
		t.Errorf("All: %v, want by name", got)
	}
}

// A nil snapshot lifts nothing and has no exceptions.
func TestExceptionsNil(t *testing.T) {
	var x *Exceptions
	d := denied()
	if x.Except(&d, &Subject{Namespace: "team-a"}, exceptionNow) != 0 || x.Len() != 0 || len(d.Denials()) != 3 {
		t.Errorf("a nil snapshot changed the decision: %q", d.Denials())
	}
}

// BenchmarkExceptionsExcept is what exceptions add to a denied review: none
// (the baseline), one in the namespace, and 1000 in the namespace of which
// the last by name covers it.
func BenchmarkExceptionsExcept(b *testing.B) {
	s := Subject{Namespace: "team-a", Identities: []Identity{{Kind: "Pod", Name: "gpu8-7d9-x2"}, {Kind: "Deployment", Name: "gpu8"}},
		Labels: []map[string]string{{"app": "bench"}}}
	covering := &Exception{Namespace: "team-a", Name: "zz-bench", Policies: []string{"max-gpus"}, Names: []string{"gpu8"},
		Selector: labels.SelectorFromSet(labels.Set{"app": "bench"}), ExpiresAt: exceptionNow.Add(time.Hour)}
	many := []*Exception{covering}
	for i := range 999 {
		many = append(many, &Exception{Namespace: "team-a", Name: "other-" + string(rune('a'+i%26)) + string(rune('a'+i/26)),
			Policies: []string{"max-gpus"}, Names: []string{"train"}, ExpiresAt: exceptionNow.Add(time.Hour)})
	}
	for name, x := range map[string]*Exceptions{
		"none":    nil,
		"one":     NewExceptions(time.Minute, covering),
		"1000-ns": NewExceptions(time.Minute, many...),
	} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				d := Decision{Results: []Result{{Policy: "max-gpus", Action: ActionDeny, Deny: []Violation{{Msg: "8 GPUs"}}}}}
				x.Except(&d, &s, exceptionNow)
			}
		})
	}
}
