package integration_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	jsonpatch "github.com/evanphx/json-patch/v5"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/modelgate/modelgate/offline"
	"github.com/modelgate/modelgate/test/harnesses/env"
)

// corpusSender is a client acting as one user, with the warnings of its
// last request. Requests are sent one at a time.
type corpusSender struct {
	c    client.Client
	warn *env.Warnings
}

var corpusSenders = map[string]*corpusSender{}

// senderFor is the sender of the target's user, in its groups as the API
// server sees an authenticated user's (those the offline admission gave).
func senderFor(t corpusTarget) *corpusSender {
	GinkgoHelper()
	groups := offline.UserInfo(t.user, t.groups).Groups
	key := t.user + "\x00" + strings.Join(groups, "\x00")
	if s, ok := corpusSenders[key]; ok {
		return s
	}
	cfg := rest.CopyConfig(adminCfg)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: t.user, Groups: groups}
	s := &corpusSender{warn: &env.Warnings{}}
	cfg.WarningHandlerWithContext = s.warn
	var err error
	s.c, err = client.New(cfg, client.Options{Scheme: scheme.Scheme})
	Expect(err).NotTo(HaveOccurred())
	corpusSenders[key] = s
	return s
}

// apiVerdict is the API server's answer to one object.
type apiVerdict struct {
	// refused is the API server's own refusal (the object is invalid),
	// which comes before any admission policy.
	refused string
	// denial is the binding that refused the request, and its message.
	denial *apiMessage
	// failed are the failed validations, by policy: of the witness of a
	// denying policy, of the binding of a warning one.
	failed map[string][]apiMessage
	// remutated: the suite's modelgate changed the object again, so the
	// API server judged another object than Rego did.
	remutated bool
	// webhook is a webhook's refusal, which is no policy's verdict.
	webhook string
}

// apiMessage is a failed validation as the API server reports it.
type apiMessage struct {
	vap, binding, text string
	// truncated: the API server cut the warning short (its warnings
	// exceed 4096 characters in all).
	truncated bool
}

// The API server's messages: the warning of a binding with the action
// Warn, and the refusal of one with Deny.
var (
	vapWarning = regexp.MustCompile(`(?s)^Validation failed for ValidatingAdmissionPolicy '([^']+)' with binding '([^']+)': (.*)$`)
	vapDenial  = regexp.MustCompile(`(?s)^ValidatingAdmissionPolicy '([^']+)' with binding '([^']+)' denied request: (.*)$`)
)

// truncatedWarning is the length the API server cuts each warning to once
// they exceed its total.
const truncatedWarning = 256

// send sends the item's object as mutated offline to the API server as a
// dry run, as its user: a CREATE, or an UPDATE of its stored old object
// making the change the case makes.
func send(ctx context.Context, it *corpusItem, olds map[string]*storedOld) apiVerdict {
	GinkgoHelper()
	s := senderFor(it.t)
	u := &unstructured.Unstructured{}
	Expect(u.UnmarshalJSON(it.out.Object)).To(Succeed())
	u.SetNamespace(it.t.ns)
	if it.old != nil {
		u = updated(ctx, it, u, olds)
	}
	s.warn.Take()
	var err error
	if it.old != nil {
		err = s.c.Update(ctx, u, client.DryRunAll)
	} else {
		err = s.c.Create(ctx, u, client.DryRunAll)
	}
	v := apiVerdict{failed: map[string][]apiMessage{}}
	for _, w := range s.warn.Take() {
		if m := vapWarning.FindStringSubmatch(w); m != nil {
			msg := apiMessage{vap: m[1], binding: m[2], text: m[3], truncated: utf8.RuneCountInString(w) == truncatedWarning}
			v.failed[m[1]] = append(v.failed[m[1]], msg)
		}
	}
	v.remutated = remutated()
	if err == nil {
		return v
	}
	var status apierrors.APIStatus
	Expect(errors.As(err, &status)).To(BeTrue(), "%s: %v", it.name, err)
	msg := status.Status().Message
	if d := status.Status().Details; d != nil {
		for _, c := range d.Causes {
			if m := vapDenial.FindStringSubmatch(c.Message); m != nil {
				v.denial = &apiMessage{vap: m[1], binding: m[2], text: m[3]}
				return v
			}
		}
	}
	if strings.Contains(msg, "admission webhook") {
		v.webhook = msg
		return v
	}
	// Short: a refused immutable field quotes the whole object.
	v.refused = shortened(msg, 300)
	return v
}

// updated is the UPDATE the item makes: the change from its old object to
// its object, both as modelgate admitted them offline, made to the old
// object as the API server holds it (with the fields it set), as a client
// applying the change would send it.
func updated(ctx context.Context, it *corpusItem, u *unstructured.Unstructured, olds map[string]*storedOld) *unstructured.Unstructured {
	GinkgoHelper()
	old, ok := olds[oldKey(u)]
	Expect(ok).To(BeTrue(), "%s: its old object is not stored", it.name)
	cur := &unstructured.Unstructured{}
	cur.SetGroupVersionKind(u.GroupVersionKind())
	Expect(admin.Get(ctx, client.ObjectKeyFromObject(old.obj), cur)).To(Succeed())
	patch, err := jsonpatch.CreateMergePatch(it.oldOut.Object, it.out.Object)
	Expect(err).NotTo(HaveOccurred())
	curJSON, err := cur.MarshalJSON()
	Expect(err).NotTo(HaveOccurred())
	merged, err := jsonpatch.MergePatch(curJSON, patch)
	Expect(err).NotTo(HaveOccurred())
	out := &unstructured.Unstructured{}
	Expect(out.UnmarshalJSON(merged)).To(Succeed())
	out.SetNamespace(it.t.ns)
	return out
}

// remutated reports whether a mutating review of the suite's modelgate
// changed an object since it was last asked: requests are sent one at a
// time, so the one just sent.
func remutated() bool {
	total := 0.0
	for _, o := range []string{"injected", "reverted", "forged"} {
		total += metricSum("modelgate_mutating_reviews_total", map[string]string{"outcome": o})
	}
	changed := total > lastRemutations
	lastRemutations = total
	return changed
}

// lastRemutations is the count remutated last saw.
var lastRemutations float64

// compareVerdicts lists where the API server's answer is not the item's
// offline one: for each policy, denied (warned) by the API server exactly
// where Rego denies (warns) or the case expects the CEL form to fail
// closed; the refusal one of the failed validations; and the failed
// validations' messages the offline CEL evaluation's.
//
// A generated workload with resource claims expects nothing: where the
// API server denies for a policy and Rego does not, its CEL form fails
// closed on the claims (closed), as the library's cases of claims say.
func compareVerdicts(it *corpusItem, v apiVerdict, forms []*corpusForm) (problems, closed []string) {
	if v.remutated {
		problems = append(problems, "the suite's modelgate changed the object again: the API server judged another object than Rego")
	}
	if v.webhook != "" {
		problems = append(problems, "refused by a webhook: "+v.webhook)
	}
	anyDenies := false
	for _, f := range forms {
		verb, rego := "denies", it.out.Decision == offline.Denied && hasPolicyLine(it.out.Denials, f.policy)
		switch {
		case f.warns():
			verb, rego = "warns", hasPolicyLine(it.out.Warnings, f.policy)
		case f.witness == nil:
			continue // a dry run: recorded only, by either
		}
		failsClosed := slices.Contains(it.failsClosed, f.policy)
		api := len(v.failed[f.vap.Name]) > 0
		if api && !f.warns() {
			anyDenies = true
		}
		if want := rego || failsClosed; api != want {
			if api && !rego && !f.warns() && it.claims {
				// CEL cannot read a resource claim's template or claim:
				// where Rego can count its GPUs, the CEL form fails closed.
				closed = append(closed, f.policy)
				continue
			}
			problems = append(problems, fmt.Sprintf("policy %s: Rego %s, the API server %s",
				f.policy, regoVerdict(verb, rego, failsClosed), apiVerdictWord(verb, api)))
		}
	}
	switch d := v.denial; {
	case d == nil && anyDenies:
		problems = append(problems, "the API server admits it, though a denying policy's validation fails")
	case d != nil && !anyDenies:
		problems = append(problems, fmt.Sprintf("the API server refuses it (%s), though no denying policy's validation fails", d.text))
	case d != nil:
		f := formOf(forms, d.vap)
		switch {
		case f == nil || d.binding != f.binding.Name:
			problems = append(problems, fmt.Sprintf("refused by policy %s binding %s, not one the celpolicy controller makes", d.vap, d.binding))
		case !slices.ContainsFunc(v.failed[d.vap], func(m apiMessage) bool { return matches(m, d.text) }):
			problems = append(problems, fmt.Sprintf("policy %s refuses it with %q, which its witness does not report", f.policy, d.text))
		}
	}
	if it.out.CEL == nil {
		return append(problems, "no offline CEL evaluation"), closed
	}
	var denials, warnings []apiMessage
	for _, f := range forms {
		if f.warns() {
			warnings = append(warnings, v.failed[f.vap.Name]...)
		} else {
			denials = append(denials, v.failed[f.vap.Name]...)
		}
	}
	if want := ofForms(forms, it.out.CEL.Denials); !sameMessages(denials, want) {
		problems = append(problems, fmt.Sprintf("the API server's denials %s, the offline CEL evaluation's %q", texts(denials), want))
	}
	if want := ofForms(forms, it.out.CEL.Warnings); !sameMessages(warnings, want) {
		problems = append(problems, fmt.Sprintf("the API server's warnings %s, the offline CEL evaluation's %q", texts(warnings), want))
	}
	return problems, closed
}

// ofForms are the lines of the policies in forms (those the API server
// holds).
func ofForms(forms []*corpusForm, lines []string) []string {
	var out []string
	for _, l := range lines {
		if slices.ContainsFunc(forms, func(f *corpusForm) bool { return strings.HasPrefix(l, "["+f.policy+"] ") }) {
			out = append(out, l)
		}
	}
	return out
}

func formOf(forms []*corpusForm, vap string) *corpusForm {
	for _, f := range forms {
		if f.vap.Name == vap {
			return f
		}
	}
	return nil
}

func hasPolicyLine(lines []string, policy string) bool {
	return slices.ContainsFunc(lines, func(l string) bool { return strings.HasPrefix(l, "["+policy+"] ") })
}

// negated is "deny" of "denies", "warn" of "warns".
var negated = map[string]string{"denies": "does not deny", "warns": "does not warn"}

func regoVerdict(verb string, rego, failsClosed bool) string {
	s := negated[verb]
	if rego {
		s = verb
	}
	if failsClosed {
		s += " (the case expects CEL to fail closed)"
	}
	return s
}

func apiVerdictWord(verb string, api bool) string {
	if api {
		return verb
	}
	return negated[verb]
}

// matches reports whether the API server's message is want, or its start
// where the API server cut the warning short.
func matches(m apiMessage, want string) bool {
	return m.text == want || m.truncated && strings.HasPrefix(want, m.text)
}

// sameMessages reports whether the API server's messages are want's lines
// (the API server drops a warning it already sent).
func sameMessages(got []apiMessage, want []string) bool {
	want = slices.Compact(slices.Sorted(slices.Values(want)))
	if len(got) != len(want) {
		return false
	}
	used := make([]bool, len(want))
	for _, m := range got {
		i := slices.IndexFunc(want, func(w string) bool { return matches(m, w) })
		for i >= 0 && used[i] {
			j := slices.IndexFunc(want[i+1:], func(w string) bool { return matches(m, w) })
			if j < 0 {
				i = -1
				break
			}
			i += 1 + j
		}
		if i < 0 {
			return false
		}
		used[i] = true
	}
	return true
}

func texts(ms []apiMessage) string {
	out := make([]string, 0, len(ms))
	for _, m := range ms {
		out = append(out, m.text)
	}
	return fmt.Sprintf("%q", out)
}

// corpusTally counts the corpus's verdicts.
type corpusTally struct {
	agreed, failClosed int
	// claimsClosed counts the generated workloads whose resource claims
	// some CEL form fails closed on.
	claimsClosed  int
	disagreements []string
	judgedCount   int
	skipped       map[string]int
	// flagged counts, by policy, the objects the API server's CEL
	// refused or warned about.
	flagged map[string]int
	forms   []*corpusForm
	// rejected are the policies not in force: the API server refuses
	// their generated policy.
	rejected []string
}

func newCorpusTally(forms []*corpusForm, rejected []string) *corpusTally {
	t := &corpusTally{skipped: map[string]int{}, flagged: map[string]int{}, forms: forms}
	for _, r := range rejected {
		policy, _, _ := strings.Cut(r, ":")
		t.rejected = append(t.rejected, policy)
	}
	return t
}

func (t *corpusTally) skip(it *corpusItem, why string) {
	reason, detail, _ := strings.Cut(why, ": ")
	if strings.HasPrefix(why, "refused by the API server itself") {
		fmt.Fprintf(GinkgoWriter, "not judged by the API server's policies: %s: %s\n", it.name, detail)
		why = reason
	}
	t.skipped[why]++
}

// refuse counts an item the API server cannot judge because it refuses a
// policy generated with the exceptions in force there: a disagreement,
// told once.
func (t *corpusTally) refuse(it *corpusItem, why []string) {
	t.skipped["the API server refuses a policy generated with the exceptions in force there"]++
	for _, w := range why {
		if !slices.Contains(t.disagreements, w) {
			t.disagreements = append(t.disagreements, w)
		}
	}
	fmt.Fprintf(GinkgoWriter, "not judged by the API server's policies: %s: it refuses a policy generated with its exceptions\n", it.name)
}

func (t *corpusTally) judged(it *corpusItem, v apiVerdict, problems, closed []string) {
	t.judgedCount++
	for _, f := range t.forms {
		if len(v.failed[f.vap.Name]) > 0 {
			t.flagged[f.policy]++
		}
	}
	if len(problems) > 0 {
		for _, p := range problems {
			t.disagreements = append(t.disagreements, it.name+": "+p)
		}
		return
	}
	t.agreed++
	if slices.ContainsFunc(t.forms, func(f *corpusForm) bool { return slices.Contains(it.failsClosed, f.policy) }) {
		t.failClosed++
	}
	if len(closed) > 0 {
		t.claimsClosed++
		fmt.Fprintf(GinkgoWriter, "fails closed in CEL on its resource claims: %s: %s\n", it.name, strings.Join(closed, ", "))
	}
}

// report is the figure, then what the API server's policies refused or
// warned about, and what was not sent and why.
func (t *corpusTally) report(took time.Duration) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d of %d cases and generated workloads: both engines agree; %d fail closed in CEL as their cases say\n",
		t.agreed, t.judgedCount, t.failClosed)
	if t.claimsClosed > 0 {
		fmt.Fprintf(&b, "(of them, %d generated workloads with resource claims, where a CEL form fails closed: CEL cannot read a claim's template)\n", t.claimsClosed)
	}
	for _, f := range t.forms {
		verb := "refused"
		if f.warns() {
			verb = "warned about"
		}
		fmt.Fprintf(&b, "  %s %s %d of them\n", f.policy, verb, t.flagged[f.policy])
	}
	if len(t.rejected) > 0 {
		fmt.Fprintf(&b, "  (not in force, the API server refusing their generated policy: %s)\n", strings.Join(t.rejected, ", "))
	}
	skipped := 0
	for _, n := range t.skipped {
		skipped += n
	}
	fmt.Fprintf(&b, "%d more not judged by the API server's policies:\n", skipped)
	for _, why := range slices.Sorted(maps.Keys(t.skipped)) {
		fmt.Fprintf(&b, "  %d %s\n", t.skipped[why], why)
	}
	fmt.Fprintf(&b, "(%d generated workloads, seed %d; %s)", corpusGenerated, corpusSeed, took.Round(time.Millisecond))
	return b.String()
}
