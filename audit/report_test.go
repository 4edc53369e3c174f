package audit

import (
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
)

func outcome(ns, name string, passed []string, fs ...Finding) Outcome {
	ref := Ref{APIVersion: "apps/v1", Kind: "Deployment", Namespace: ns, Name: name, UID: types.UID("u-" + name)}
	for i := range fs {
		fs[i].Object = ref
	}
	return Outcome{Object: ref, Findings: fs, Passed: passed}
}

func TestReports(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	long := strings.Repeat("é", maxMessage) // two bytes each
	outs := []Outcome{
		outcome("a", "w1", []string{"p2"}, Finding{Policy: "p1", Rule: "warn", Result: Warn, Category: CategoryPolicy, Message: "w"}),
		outcome("a", "w2", nil,
			Finding{Policy: "p1", Rule: "deny", Result: Fail, Category: CategoryPolicy, Action: "deny", Message: long},
			Finding{Policy: InjectionPolicy, Rule: "missing", Result: Fail, Category: CategoryInjection, Message: "m"},
			Finding{Policy: "p3", Rule: "error", Result: Error, Category: CategoryPolicy, Message: "e"}),
		outcome("b", "w3", []string{"p1", "p2"}),
		{Object: Ref{Namespace: "c"}, Skipped: "not a workload"},
	}
	reports := Reports(PolicyReportGVK, outs, now, 3)
	if len(reports) != 2 || reports["a"] == nil || reports["b"] == nil {
		t.Fatalf("reports for %v, want a and b", keys(reports))
	}
	a := reports["a"]
	if diff := cmp.Diff(map[string]any{"pass": int64(1), "fail": int64(2), "warn": int64(1), "error": int64(1), "skip": int64(0)},
		a.Object["summary"]); diff != "" {
		t.Errorf("summary counts every result (-want +got):\n%s", diff)
	}
	results, _, _ := unstructured.NestedSlice(a.Object, "results")
	var got []string
	for _, r := range results {
		m := r.(map[string]any)
		got = append(got, fmt.Sprintf("%s %s %s %s", m["result"], m["policy"], m["rule"], m["severity"]))
		if msg := m["message"].(string); !utf8.ValidString(msg) || len(msg) > maxMessage {
			t.Errorf("message of %d bytes, valid UTF-8 %v: want at most %d, valid", len(msg), utf8.ValidString(msg), maxMessage)
		}
	}
	want := []string{"fail modelgate-injection missing high", "fail p1 deny medium", "error p3 error medium"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the 3 results kept: failures, then errors (-want +got):\n%s", diff)
	}
	if n := a.GetAnnotations()[TruncatedAnnotation]; n != "1" {
		t.Errorf("%s = %q, want 1 (the warning left out)", TruncatedAnnotation, n)
	}
	if a.GetName() != ReportName || a.GetLabels()[ManagedByLabel] != ManagedBy || a.GroupVersionKind() != PolicyReportGVK {
		t.Errorf("report %s %s labels %v", a.GroupVersionKind(), a.GetName(), a.GetLabels())
	}
	b := reports["b"]
	if res, _, _ := unstructured.NestedSlice(b.Object, "results"); len(res) != 0 || b.Object["summary"].(map[string]any)["pass"] != int64(2) {
		t.Errorf("namespace b: results %v, summary %v; want none and 2 passes", res, b.Object["summary"])
	}
}

// An OpenReports Report carries the same summary and results as the
// PolicyReport, with the source at the report's level too; an excepted
// denial is a skip naming the exception.
func TestReportsOpenReports(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	outs := []Outcome{outcome("a", "w1", []string{"p2"},
		Finding{Policy: "p1", Rule: "deny", Result: Fail, Category: CategoryPolicy, Action: "deny", Message: "f"},
		Finding{Policy: "p3", Rule: "deny", Result: Skip, Category: CategoryPolicy, Action: "deny", Message: "allowed by exception a/x",
			Exception: "a/x", Ticket: "OPS-1", ExpiresAt: "2026-12-04T18:00:00Z"})}
	wg := Reports(PolicyReportGVK, outs, now, 10)["a"]
	or := Reports(OpenReportGVK, outs, now, 10)["a"]
	if or.GroupVersionKind() != OpenReportGVK || or.Object["source"] != Source || or.GetName() != ReportName {
		t.Fatalf("OpenReports report %s %s source %v", or.GroupVersionKind(), or.GetName(), or.Object["source"])
	}
	for _, k := range []string{"summary", "results"} {
		if diff := cmp.Diff(wg.Object[k], or.Object[k]); diff != "" {
			t.Errorf("%s differs between the kinds (-wgpolicyk8s +openreports):\n%s", k, diff)
		}
	}
	if got := or.Object["summary"].(map[string]any)["skip"]; got != int64(1) {
		t.Errorf("summary.skip = %v, want 1", got)
	}
	results, _, _ := unstructured.NestedSlice(or.Object, "results")
	skip := results[1].(map[string]any)
	want := map[string]any{"enforcementAction": "deny", "exception": "a/x", "exceptionTicket": "OPS-1", "exceptionExpiresAt": "2026-12-04T18:00:00Z"}
	if skip["result"] != "skip" || !cmp.Equal(skip["properties"], want) {
		t.Errorf("the excepted result: %v, want skip with properties %v", skip, want)
	}
}

func TestPolicyCounts(t *testing.T) {
	outs := []Outcome{
		outcome("a", "w1", []string{"p2"},
			Finding{Policy: "p1", Result: Warn}, Finding{Policy: "p1", Result: Fail}), // counted once, as its worst
		outcome("a", "w2", []string{"p1"}, Finding{Policy: "p2", Result: Error}, Finding{Policy: "p3", Result: Skip}),
	}
	want := map[string]Summary{"p1": {Fail: 1, Pass: 1}, "p2": {Pass: 1, Error: 1}, "p3": {Skip: 1}}
	if diff := cmp.Diff(want, PolicyCounts(outs)); diff != "" {
		t.Errorf("PolicyCounts (-want +got):\n%s", diff)
	}
}

func keys(m map[string]*unstructured.Unstructured) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
