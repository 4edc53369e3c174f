package audit

import (
	"cmp"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	config "github.com/modelgate/modelgate/api/config/v1alpha1"
)

// PolicyReportGVK is the Kubernetes Policy Working Group's PolicyReport,
// which Kyverno writes and Policy Reporter shows.
var PolicyReportGVK = schema.GroupVersionKind{Group: "wgpolicyk8s.io", Version: "v1alpha2", Kind: "PolicyReport"}

// OpenReportGVK is OpenReports' Report, PolicyReport's successor (the same
// results, and a report-level source).
var OpenReportGVK = schema.GroupVersionKind{Group: "openreports.io", Version: "v1alpha1", Kind: "Report"}

// ReportKinds are the report kinds of the Configuration's audit.reports,
// by name.
var ReportKinds = map[string]schema.GroupVersionKind{
	config.ReportsWGPolicy:    PolicyReportGVK,
	config.ReportsOpenReports: OpenReportGVK,
}

const (
	// ReportName is the name of modelgate's PolicyReport in each namespace.
	ReportName = "modelgate-audit"
	// Source is the results' source.
	Source = "modelgate"
	// ManagedByLabel is the label that, set to ManagedBy, marks
	// modelgate's reports, so that it finds (and empties) only its own.
	ManagedByLabel = "app.kubernetes.io/managed-by"
	// ManagedBy is ManagedByLabel's value on modelgate's reports.
	ManagedBy = "modelgate"
	// TruncatedAnnotation says how many results a report leaves out.
	TruncatedAnnotation = "modelgate.io/audit-results-left-out"
	// DefaultMaxResults bounds the results of one report: an object stays
	// far below etcd's 1.5 MiB even with long messages.
	DefaultMaxResults = 500
	// maxMessage bounds one result's message.
	maxMessage = 1024
)

// Summary counts results as a PolicyReport's summary does: pass is a
// workload that a policy applied to and had nothing to say about.
type Summary struct {
	Pass, Fail, Warn, Error, Skip int
}

// Add counts the outcome's findings and passes.
func (s *Summary) Add(o *Outcome) {
	s.Pass += len(o.Passed)
	for _, f := range o.Findings {
		switch f.Result {
		case Fail:
			s.Fail++
		case Warn:
			s.Warn++
		case Error:
			s.Error++
		case Skip:
			s.Skip++
		}
	}
}

// Reports are the reports of the outcomes, of kind gvk (PolicyReportGVK or
// OpenReportGVK), one per namespace that has an audited workload, named
// ReportName. Each holds at most
// maxResults results, failures and errors first, then by object and
// policy; the summary counts all of them, and TruncatedAnnotation says how
// many were left out.
func Reports(gvk schema.GroupVersionKind, outcomes []Outcome, now time.Time, maxResults int) map[string]*unstructured.Unstructured {
	if maxResults <= 0 {
		maxResults = DefaultMaxResults
	}
	byNS := map[string][]*Outcome{}
	for i := range outcomes {
		o := &outcomes[i]
		if o.Skipped == "" {
			byNS[o.Object.Namespace] = append(byNS[o.Object.Namespace], o)
		}
	}
	out := map[string]*unstructured.Unstructured{}
	for ns, os := range byNS {
		var sum Summary
		var findings []Finding
		for _, o := range os {
			sum.Add(o)
			findings = append(findings, o.Findings...)
		}
		slices.SortStableFunc(findings, func(a, b Finding) int {
			return cmp.Or(cmp.Compare(rank(a.Result), rank(b.Result)),
				cmp.Compare(a.Object.Kind, b.Object.Kind), cmp.Compare(a.Object.Name, b.Object.Name),
				cmp.Compare(a.Policy, b.Policy), cmp.Compare(a.Message, b.Message))
		})
		left := 0
		if len(findings) > maxResults {
			left = len(findings) - maxResults
			findings = findings[:maxResults]
		}
		results := make([]any, 0, len(findings))
		for _, f := range findings {
			results = append(results, result(f, now))
		}
		r := report(gvk, ns, sum, results)
		if left > 0 {
			r.SetAnnotations(map[string]string{TruncatedAnnotation: strconv.Itoa(left)})
		}
		out[ns] = r
	}
	return out
}

// report is the report of a namespace.
func report(gvk schema.GroupVersionKind, ns string, sum Summary, results []any) *unstructured.Unstructured {
	r := &unstructured.Unstructured{Object: map[string]any{
		"summary": map[string]any{
			"pass": int64(sum.Pass), "fail": int64(sum.Fail), "warn": int64(sum.Warn),
			"error": int64(sum.Error), "skip": int64(sum.Skip),
		},
		"results": results,
	}}
	if gvk == OpenReportGVK {
		r.Object["source"] = Source
	}
	r.SetGroupVersionKind(gvk)
	r.SetNamespace(ns)
	r.SetName(ReportName)
	r.SetLabels(map[string]string{ManagedByLabel: ManagedBy})
	return r
}

// emptyReport is the report of a namespace with no audited workloads.
func emptyReport(gvk schema.GroupVersionKind, ns string) *unstructured.Unstructured {
	return report(gvk, ns, Summary{}, []any{})
}

// rank orders results by seriousness.
func rank(r Result) int {
	switch r {
	case Fail:
		return 0
	case Error:
		return 1
	case Warn:
		return 2
	default:
		return 3
	}
}

// severity is the PolicyReport severity of a finding.
func severity(f Finding) string {
	switch {
	case f.Policy == InjectionPolicy && f.Rule == "missing":
		return "high"
	case f.Result == Fail || f.Result == Error:
		return "medium"
	default:
		return "low"
	}
}

// result is one PolicyReport result.
func result(f Finding, now time.Time) map[string]any {
	msg := f.Message
	if len(msg) > maxMessage {
		msg = strings.ToValidUTF8(msg[:maxMessage-len("…")], "") + "…"
	}
	r := map[string]any{
		"source":   Source,
		"policy":   f.Policy,
		"rule":     f.Rule,
		"category": f.Category,
		"severity": severity(f),
		"result":   string(f.Result),
		"message":  msg,
		"scored":   true,
		"timestamp": map[string]any{
			"seconds": now.Unix(),
			"nanos":   int64(0),
		},
		"resources": []any{map[string]any{
			"apiVersion": f.Object.APIVersion,
			"kind":       f.Object.Kind,
			"namespace":  f.Object.Namespace,
			"name":       f.Object.Name,
			"uid":        string(f.Object.UID),
		}},
	}
	props := map[string]any{}
	if f.Action != "" {
		props["enforcementAction"] = f.Action
	}
	if f.Exception != "" {
		props["exception"], props["exceptionExpiresAt"] = f.Exception, f.ExpiresAt
		if f.Ticket != "" {
			props["exceptionTicket"] = f.Ticket
		}
	}
	if len(props) > 0 {
		r["properties"] = props
	}
	return r
}

// PolicyCounts are, per policy (WorkloadPolicies and modelgate's own
// checks), how many audited workloads it fails, warns about, errs on or
// passes: each workload once, by its worst result.
func PolicyCounts(outcomes []Outcome) map[string]Summary {
	out := map[string]Summary{}
	for i := range outcomes {
		o := &outcomes[i]
		for _, p := range o.Passed {
			s := out[p]
			s.Pass++
			out[p] = s
		}
		seen := map[string]Result{}
		for _, f := range o.Findings {
			if prev, ok := seen[f.Policy]; !ok || rank(f.Result) < rank(prev) {
				seen[f.Policy] = f.Result
			}
		}
		for p, r := range seen {
			s := out[p]
			switch r {
			case Fail:
				s.Fail++
			case Error:
				s.Error++
			case Skip:
				s.Skip++
			default:
				s.Warn++
			}
			out[p] = s
		}
	}
	return out
}
