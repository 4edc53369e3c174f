package audit

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/modelgate/modelgate/api/annotations"
	config "github.com/modelgate/modelgate/api/config/v1alpha1"
	"github.com/modelgate/modelgate/internal/seal"
	"github.com/modelgate/modelgate/offline"
	"github.com/modelgate/modelgate/policies"
	policyview "github.com/modelgate/modelgate/policies/workload"
	"github.com/modelgate/modelgate/webhook"
)

// User is the requester of the audit's reviews when the object names no
// owner: no user can match a policy's exception by accident.
const User = "system:modelgate:audit"

// kinds are the workloads the audit judges, with their resources.
var kinds = map[[2]string]metav1.GroupVersionResource{
	{"v1", "Pod"}:              {Version: "v1", Resource: "pods"},
	{"apps/v1", "Deployment"}:  {Group: "apps", Version: "v1", Resource: "deployments"},
	{"apps/v1", "StatefulSet"}: {Group: "apps", Version: "v1", Resource: "statefulsets"},
	{"batch/v1", "Job"}:        {Group: "batch", Version: "v1", Resource: "jobs"},
	{"batch/v1", "CronJob"}:    {Group: "batch", Version: "v1", Resource: "cronjobs"},
}

// Kinds are the apiVersion and kind of every workload the audit judges.
func Kinds() [][2]string {
	out := make([][2]string, 0, len(kinds))
	for k := range kinds {
		out = append(out, k)
	}
	slices.SortFunc(out, func(a, b [2]string) int { return strings.Compare(a[1], b[1]) })
	return out
}

// auditedElsewhere are the controllers whose template the audit judges
// instead of the objects they make: a Deployment's Pods (through its
// ReplicaSets), a CronJob's Jobs, a StatefulSet's Pods.
var auditedElsewhere = map[string]bool{
	"ReplicaSet": true, "Deployment": true, "StatefulSet": true, "Job": true, "CronJob": true, "DaemonSet": true,
}

// Auditor judges stored workloads with the webhook's handlers.
type Auditor struct {
	// key verifies injection records where the Configuration holds the
	// record key (in the cluster); nil trusts any record (offline).
	key         *seal.Key
	excluded    map[string]bool
	mutating    *webhook.Mutating
	validating  *webhook.Validating
	namespaces  webhook.NamespaceLabeler
	gpuResource string
}

// New builds the webhook's handlers from the configuration, the engine
// holding the policies in force and the namespace labels. Their metrics
// are registered nowhere: the audit's reviews are not admission reviews.
func New(cfg *config.Configuration, engine *policies.Engine, ns webhook.NamespaceLabeler) *Auditor {
	excluded := map[string]bool{cfg.Namespace: true}
	for _, n := range cfg.Injection.ExcludedNamespaces {
		excluded[n] = true
	}
	return &Auditor{
		key:         cfg.RecordKey,
		excluded:    excluded,
		mutating:    webhook.NewMutating(cfg, ns, webhook.NewMetrics(nil)),
		validating:  webhook.NewValidating(cfg, engine, ns, webhook.NewPolicyMetrics(nil)),
		namespaces:  ns,
		gpuResource: cfg.Injection.GPU.ResourceName,
	}
}

// SetClaims makes the audit find what Pods' resource claims ask for
// through r: the manager's cache, or what the CLI listed or read.
func (a *Auditor) SetClaims(r policyview.ClaimResolver) { a.validating.SetClaims(r) }

// stored is what the audit reads of an object's metadata.
type stored struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Metadata   metav1.ObjectMeta `json:"metadata"`
}

// Audit judges one object as stored (JSON). Objects of other kinds, and
// objects a controller made from a template the audit judges on the
// controller, are skipped. The error is for an object the handlers cannot
// judge at all (it does not decode, or modelgate failed).
func (a *Auditor) Audit(ctx context.Context, raw []byte) (Outcome, error) {
	var m stored
	if err := json.Unmarshal(raw, &m); err != nil {
		return Outcome{}, fmt.Errorf("reading the object: %w", err)
	}
	ref := Ref{APIVersion: m.APIVersion, Kind: m.Kind, Namespace: m.Metadata.Namespace, Name: m.Metadata.Name, UID: m.Metadata.UID}
	out := Outcome{Object: ref}
	gvr, ok := kinds[[2]string{m.APIVersion, m.Kind}]
	switch {
	case !ok:
		out.Skipped = "not a workload modelgate injects"
		return out, nil
	case ref.Namespace == "":
		return Outcome{}, fmt.Errorf("%s: metadata.namespace is not set", ref)
	}
	if c := metav1.GetControllerOf(&m.Metadata); c != nil && auditedElsewhere[c.Kind] {
		out.Skipped = fmt.Sprintf("made by %s %s from its template, which is audited", c.Kind, c.Name)
		return out, nil
	}
	nsLabels, err := a.namespaces.NamespaceLabels(ctx, ref.Namespace)
	if err != nil {
		return Outcome{}, fmt.Errorf("namespace %q: %w", ref.Namespace, err)
	}
	if _, ignored := nsLabels[annotations.NamespaceIgnore]; ignored || a.excluded[ref.Namespace] {
		out.Skipped = "namespace " + ref.Namespace + " is excluded from modelgate"
		return out, nil
	}

	user := authenticationv1.UserInfo{Username: owner(&m.Metadata), Groups: []string{"system:authenticated"}}
	req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		UID:       "00000000-0000-0000-0000-00000000a0d1",
		Kind:      metav1.GroupVersionKind{Group: gvr.Group, Version: gvr.Version, Kind: m.Kind},
		Resource:  gvr,
		Name:      ref.Name,
		Namespace: ref.Namespace,
		UserInfo:  user,
		Object:    runtime.RawExtension{Raw: raw},
	}}

	// The injection: the object as stored, sent again unchanged. The
	// webhook patches nothing on an object whose injection is today's.
	update := req
	update.Operation = admissionv1.Update
	update.OldObject = runtime.RawExtension{Raw: raw}
	f, err := a.injection(ctx, update, ref, &m)
	if err != nil {
		return Outcome{}, err
	}
	out.Findings = append(out.Findings, f...)

	// Decoded once for the opt-in checks and the selection of the
	// validating webhook's match conditions, as SentToPolicies decodes.
	var obj map[string]any
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	if err := d.Decode(&obj); err != nil {
		return Outcome{}, fmt.Errorf("reading the object: %w", err)
	}
	if nsLabels[annotations.NamespaceInjection] == annotations.InjectionEnabled &&
		offline.RequestsGPUs(obj, a.gpuResource) && offline.OptedOut(obj) {
		out.Findings = append(out.Findings, Finding{
			Object: ref, Policy: GPUOptInPolicy, Rule: "opted-out", Result: Warn, Category: CategoryInjection,
			Message: fmt.Sprintf("asks for GPUs but opts out with %s: \"false\" in namespace %s, which opts every workload in "+
				"(%s=%s): it runs without modelgate's loader, GPU placement and probes", annotations.Inject, ref.Namespace,
				annotations.NamespaceInjection, annotations.InjectionEnabled),
		})
	}

	// The policies: would the object be admitted if it were created now?
	if sent, _ := offline.SentToPoliciesDecoded(obj, nsLabels, a.gpuResource); sent {
		create := req
		create.Operation = admissionv1.Create
		d, judged, resp := a.validating.Judge(ctx, create)
		if !judged && resp.Result != nil && resp.Result.Code >= http.StatusBadRequest {
			return Outcome{}, fmt.Errorf("%s: the validating webhook answered %d: %s", ref, resp.Result.Code, resp.Result.Message)
		}
		for i := range d.Results {
			r := &d.Results[i]
			fs := policyFindings(ref, r)
			if len(fs) == 0 {
				out.Passed = append(out.Passed, r.Policy)
			}
			out.Findings = append(out.Findings, fs...)
		}
	}
	return out, nil
}

// owner is the object's recorded owner, the requester of its reviews:
// policies about who may do what judge it as its owner would be judged.
func owner(m *metav1.ObjectMeta) string {
	if full := m.Annotations[annotations.OwnerFull]; full != "" {
		return full
	}
	if o := m.Labels[annotations.OwnerLabel]; o != "" {
		return o
	}
	return User
}

// policyFindings are one policy's results as findings.
func policyFindings(ref Ref, r *policies.Result) []Finding {
	base := Finding{Object: ref, Policy: r.Policy, Category: CategoryPolicy, Action: string(r.Action)}
	if r.Err != nil {
		f := base
		f.Rule, f.Result, f.Message = "error", Error, "policy evaluation failed: "+r.Err.Error()
		return []Finding{f}
	}
	var out []Finding
	for _, v := range r.Deny {
		f := base
		f.Rule, f.Result, f.Message = "deny", Fail, v.Msg
		if r.Action != policies.ActionDeny {
			f.Result = Warn
		}
		out = append(out, f)
	}
	for _, v := range r.Warn {
		f := base
		f.Rule, f.Result, f.Message = "warn", Warn, v.Msg
		out = append(out, f)
	}
	for _, e := range r.Excepted {
		f := base
		f.Rule, f.Result, f.Message = "deny", Skip, policies.ExceptedLine(e.Exception, e.Msg)
		f.Exception, f.Ticket = e.Exception.Ref(), e.Exception.Ticket
		f.ExpiresAt = e.Exception.ExpiresAt.UTC().Format(time.RFC3339)
		out = append(out, f)
	}
	return out
}

// injection is what the mutating webhook says of the object sent again
// unchanged.
func (a *Auditor) injection(ctx context.Context, req admission.Request, ref Ref, m *stored) ([]Finding, error) {
	resp := a.mutating.Handle(ctx, req)
	base := Finding{Object: ref, Policy: InjectionPolicy, Category: CategoryInjection}
	if !resp.Allowed {
		code, msg := int32(http.StatusForbidden), ""
		if resp.Result != nil {
			code, msg = resp.Result.Code, resp.Result.Message
		}
		if code != http.StatusForbidden && code != http.StatusUnprocessableEntity {
			return nil, fmt.Errorf("%s: the mutating webhook answered %d: %s", ref, code, msg)
		}
		base.Rule, base.Result = "refused", Fail
		base.Message = "the mutating webhook would refuse it now: " + msg
		return []Finding{base}, nil
	}
	var out []Finding
	for _, w := range resp.Warnings {
		f := base
		f.Rule, f.Result, f.Message = "warning", Warn, strings.TrimPrefix(w, "[modelgate] ")
		out = append(out, f)
	}
	paths := patchedPaths(resp)
	if len(paths) == 0 {
		return out, nil
	}
	how := rollout(ref)
	if a.recorded(m) {
		base.Rule, base.Result = "stale", Warn
		base.Message = fmt.Sprintf("its injection is older than the Configuration and annotations in force: modelgate would now change %s; %s",
			strings.Join(paths, ", "), how)
	} else {
		base.Rule, base.Result = "missing", Fail
		base.Message = fmt.Sprintf("opted in but carries no injection (admitted while modelgate was unreachable, or before it or its namespace opted in): "+
			"modelgate would change %s; %s", strings.Join(paths, ", "), how)
	}
	return append(out, base), nil
}

// recorded reports whether the object carries modelgate's injection
// record (on its own metadata, beside its pod template's), sealed by
// modelgate where the auditor holds the record key: a record written by
// hand on a workload admitted while modelgate was down does not turn its
// missing injection into a stale one.
func (a *Auditor) recorded(m *stored) bool {
	if _, ok := m.Metadata.Annotations[annotations.Injected]; !ok {
		return false
	}
	return a.key == nil || a.key.Verify(m.Metadata.Namespace, &m.Metadata)
}

// rollout says how to apply today's injection to the object.
func rollout(ref Ref) string {
	switch ref.Kind {
	case "Deployment", "StatefulSet":
		return fmt.Sprintf("kubectl -n %s rollout restart %s/%s applies it", ref.Namespace, strings.ToLower(ref.Kind), ref.Name)
	case "CronJob":
		return "its next Job gets it once the CronJob is updated (kubectl apply it again)"
	default:
		return fmt.Sprintf("a %s's pod spec cannot change: re-create it to apply it", ref.Kind)
	}
}

// cmpBool orders false before true.
func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	default:
		return -1
	}
}

// maxPaths bounds the paths a finding names.
const maxPaths = 5

// patchedPaths are the paths of the mutating webhook's patch, the first
// maxPaths and a count of the rest.
func patchedPaths(resp admission.Response) []string {
	var ops []struct {
		Path string `json:"path"`
	}
	if len(resp.Patch) > 0 {
		_ = json.Unmarshal(resp.Patch, &ops)
	}
	for _, p := range resp.Patches {
		ops = append(ops, struct {
			Path string `json:"path"`
		}{p.Path})
	}
	var out []string
	for _, op := range ops {
		// JSON pointers escape / in keys as ~1: shown as the keys read.
		p := strings.NewReplacer("~1", "/", "~0", "~").Replace(op.Path)
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	// What the injection does to the pod spec tells more than its records
	// in metadata.
	slices.SortStableFunc(out, func(a, b string) int {
		return cmpBool(strings.Contains(a, "/metadata/"), strings.Contains(b, "/metadata/"))
	})
	if len(out) > maxPaths {
		out = append(out[:maxPaths], fmt.Sprintf("and %d more", len(out)-maxPaths))
	}
	return out
}
