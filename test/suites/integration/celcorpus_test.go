package integration_test

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	config "github.com/modelgate/modelgate/api/config/v1alpha1"
	policyv1 "github.com/modelgate/modelgate/api/policy/v1"
	"github.com/modelgate/modelgate/controller/celpolicy"
	"github.com/modelgate/modelgate/offline"
	"github.com/modelgate/modelgate/test/harnesses/env"
	"github.com/modelgate/modelgate/webhook"
)

// The generated workloads: how many, and the seed of their generator (fixed,
// so that the figure the spec reports is the same on every run).
const (
	corpusSeed      = 44
	corpusGenerated = 200
)

// One corpus, the library's case files and generated workloads of every
// kind, judged twice: by Rego through modelgate's offline admission (the
// mutating webhook, then the policies on the object it made), and by the
// same samples' CEL forms as the API server's own ValidatingAdmissionPolicies,
// generated and bound in force as the celpolicy controller applies them
// (with the exceptions in force where the case judges at). The API server
// judges the object the offline admitter made, created (a dry run) by the
// case's user in the case's namespace. For each policy with a CEL form it
// denies (or warns) exactly where Rego does, or where the case expects the
// CEL form to fail closed, and its messages are the offline CEL
// evaluation's.
var _ = Describe("the policy library's CEL forms in a real API server", Ordered, ContinueOnFailure, func() {
	var (
		forms []*corpusForm
		// rejected are the policies whose generated policy the API server
		// refuses, and why.
		rejected []string
		// typeChecking says whether the generated policies are
		// type-checked: kube-controller-manager runs.
		typeChecking bool
		items        []*corpusItem
		// unloaded are the case files that do not load, and why.
		unloaded []string
		// initial are the labels each namespace is created with.
		initial = map[string]map[string]string{}
		// olds are the stored old objects of the UPDATE items, by
		// kind/namespace/name.
		olds  = map[string]*storedOld{}
		probe = &inForceProbe{}
	)

	BeforeAll(func(ctx SpecContext) {
		// Registered first, so run last: once every generated policy and
		// binding is deleted, wait until the API server has dropped them,
		// or the specs after this container meet them in force.
		DeferCleanup(waitOutOfForce)
		root, err := env.RepoRoot()
		Expect(err).NotTo(HaveOccurred())
		samples := filepath.Join(root, "config", "samples", "policies")
		forms = corpusForms(samples)
		AddReportEntry("policies with a CEL form", strings.Join(formNames(forms), ", "))
		// The generated policies, not in force before their bindings:
		// kube-controller-manager's policy status controller type-checks
		// them while the corpus is judged offline. A policy the API server
		// refuses is reported, and the others are judged.
		typeChecking = startPolicyStatusController()
		all := forms
		forms = nil
		for _, f := range all {
			if why := createPolicy(ctx, f); why != "" {
				rejected = append(rejected, f.policy+": "+why)
				continue
			}
			forms = append(forms, f)
		}

		// The offline admitter seals what it injects with the key of the
		// suite's modelgate, which, called again by the API server on the
		// object it made, finds its own record and changes nothing: the
		// API server judges the very object Rego judged.
		key, err := webhook.LoadRecordKey(ctx, admin, env.Namespace)
		Expect(err).NotTo(HaveOccurred())
		cfg := config.New()
		cfg.RecordKey = key
		judges := &corpusJudges{cfg: cfg}
		items, unloaded = corpusCases(ctx, filepath.Join(root, "policies", "library", "tests"), samples, judges)
		items = append(items, corpusWorkloads(ctx, samples, judges)...)

		// The namespaces, with the labels of their first item, before any
		// binding; the users may create and update every kind.
		for _, it := range items {
			if _, seen := initial[it.t.ns]; !seen && it.t.labels != nil {
				initial[it.t.ns] = it.t.labels
			}
		}
		for _, ns := range slices.Sorted(maps.Keys(initial)) {
			Expect(admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: initial[ns]}})).To(Succeed(), ns)
			DeferCleanup(deleteObject, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
			relabel(ctx, ns, initial[ns])
		}
		grantWorkloads(ctx, items)

		// The old objects of the UPDATEs, stored before any policy is in
		// force: what a policy's ratcheting lets stay.
		for _, it := range items {
			if it.old != nil && it.skip() == "" {
				storeOld(ctx, it, initial, olds)
			}
		}

		// The policies in force, and the probe that says when they are.
		for _, f := range forms {
			bind(ctx, f)
		}
		probe.install(ctx)
	})

	It("has the API server accept the ValidatingAdmissionPolicy generated of each CEL form", func() {
		Expect(rejected).To(BeEmpty(), "the API server refuses generated policies that offline judging accepts")
	})

	It("has each generated ValidatingAdmissionPolicy type-checked by the API server, without a warning", func(ctx SpecContext) {
		if !typeChecking {
			Skip("no kube-controller-manager beside kube-apiserver (`make test-integration` builds it): nothing type-checks the policies")
		}
		for _, f := range forms {
			vap := &admissionregistrationv1.ValidatingAdmissionPolicy{}
			Eventually(func(g Gomega) {
				g.Expect(admin.Get(ctx, client.ObjectKeyFromObject(f.vap), vap)).To(Succeed())
				g.Expect(celpolicy.Condition(vap, 0).Reason).NotTo(Equal(celpolicy.ReasonChecking))
			}).WithTimeout(time.Minute).Should(Succeed(), "kube-controller-manager has not type-checked %s", f.vap.Name)
			cond := celpolicy.Condition(vap, 0)
			Expect(cond.Reason).To(Equal(celpolicy.ReasonAccepted), "%s: %s", f.vap.Name, cond.Message)
		}
	})

	It("denies, policy by policy, what Rego denies and warns what it warns, with the offline CEL evaluation's messages", func(ctx SpecContext) {
		started := time.Now()
		tally := newCorpusTally(forms, rejected)
		remutated() // the mutating reviews so far
		judge := func(it *corpusItem) {
			if why := it.skip(); why != "" {
				tally.skip(it, why)
				return
			}
			// The generated policies hold the exceptions in force where
			// the item is judged, as the celpolicy controller applies them.
			changed, refused := useExceptions(ctx, forms, it.exceptions)
			if changed {
				probe.bump(ctx)
			}
			if len(refused) > 0 {
				tally.refuse(it, refused)
				return
			}
			v := send(ctx, it, olds)
			if it.otherConfig && (v.remutated || v.webhook != "") {
				tally.skip(it, "its case file's Configuration makes modelgate admit it otherwise than the suite's modelgate")
				return
			}
			if v.refused != "" {
				tally.skip(it, "refused by the API server itself, before any admission policy: "+v.refused)
				return
			}
			problems, closed := compareVerdicts(it, v, forms)
			tally.judged(it, v, problems, closed)
		}
		// The UPDATEs first, while their old objects are stored; then the
		// rest, namespace by namespace, label set by label set.
		for _, it := range items {
			if it.old != nil {
				judge(it)
			}
		}
		for _, old := range olds {
			deleteObject(ctx, old.obj)
			Eventually(func() error { return admin.Get(ctx, client.ObjectKeyFromObject(old.obj), old.obj.DeepCopy()) }).
				Should(Satisfy(apierrors.IsNotFound), "the old object %s is still there", oldKey(old.obj))
		}
		labelled := maps.Clone(initial)
		for _, group := range corpusGroups(items) {
			if t := group[0].t; t.labels != nil && !maps.Equal(labelled[t.ns], t.labels) {
				relabel(ctx, t.ns, t.labels)
				labelled[t.ns] = t.labels
			}
			for _, it := range group {
				judge(it)
			}
		}

		report := tally.report(time.Since(started))
		fmt.Fprintln(GinkgoWriter, report)
		AddReportEntry("Rego and the API server's CEL on one corpus", report)
		Expect(unloaded).To(BeEmpty(), "case files that do not load")
		Expect(tally.disagreements).To(BeEmpty(), "Rego and the API server's ValidatingAdmissionPolicies disagree:\n%s",
			strings.Join(tally.disagreements, "\n"))
		Expect(tally.agreed).To(BeNumerically(">", len(items)/2), "most of the corpus must reach the API server's policies")
	})
})

// corpusTarget is where and by whom an object is created.
type corpusTarget struct {
	ns string
	// labels are the namespace's; nil leaves an existing namespace's as
	// they are (kube-system, modelgate's own).
	labels map[string]string
	user   string
	groups []string
}

// corpusItem is one object of the corpus and its offline admission.
type corpusItem struct {
	name        string
	kind        string
	t           corpusTarget
	failsClosed []string
	// exceptions are the WorkloadPolicyExceptions in force where the item
	// is judged.
	exceptions []policyv1.WorkloadPolicyException
	// out is the offline admission: Rego's decision, the object as
	// mutated (what the API server is sent), the offline CEL decision.
	out offline.Outcome
	// old is the object an UPDATE replaces, as written; oldOut its
	// offline CREATE, the object as modelgate stored it.
	old    []byte
	oldOut offline.Outcome
	// why is set when the item cannot be sent.
	why string
	// claims: a generated workload whose pods have resource claims.
	claims bool
	// otherConfig: its case file names a Configuration, with which
	// modelgate may admit it otherwise than the suite's does.
	otherConfig bool
}

// skip says why the item cannot be sent to the API server as it is.
func (it *corpusItem) skip() string {
	switch {
	case it.why != "":
		return it.why
	case it.kind == "AIInference":
		return "an AIInference: its generated policy judges the Deployment the controller makes of it"
	case it.out.Decision == offline.Denied && it.out.CEL == nil:
		return "denied by the mutating webhook"
	}
	return ""
}

// corpusGroups are the CREATE items, by namespace, then label set, then
// exceptions in force, in the order they first come.
func corpusGroups(items []*corpusItem) [][]*corpusItem {
	var (
		nss    []string
		nsKeys = map[string][]string{}
		groups = map[string][]*corpusItem{}
	)
	for _, it := range items {
		if it.old != nil {
			continue
		}
		key := it.t.ns + "\x00" + labelsKey(it.t.labels) + "\x00" + exceptionsKey(it.exceptions)
		if _, ok := groups[key]; !ok {
			if _, ok := nsKeys[it.t.ns]; !ok {
				nss = append(nss, it.t.ns)
			}
			nsKeys[it.t.ns] = append(nsKeys[it.t.ns], key)
		}
		groups[key] = append(groups[key], it)
	}
	var out [][]*corpusItem
	for _, ns := range nss {
		for _, k := range nsKeys[ns] {
			out = append(out, groups[k])
		}
	}
	return out
}

func labelsKey(l map[string]string) string {
	if l == nil {
		return "as it is"
	}
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(l)) {
		fmt.Fprintf(&b, "%s=%s,", k, l[k])
	}
	return b.String()
}

// relabel gives the namespace exactly these labels (and its name label)
// and waits until the API server and modelgate read them.
func relabel(ctx context.Context, ns string, labels map[string]string) {
	GinkgoHelper()
	labelNamespace(ctx, ns, func(l map[string]string) {
		clear(l)
		maps.Copy(l, labels)
		l[corev1.LabelMetadataName] = ns
	})
}

// grantWorkloads lets every user of the corpus create and update the kinds
// the policies judge, in every namespace, and waits until RBAC says so.
func grantWorkloads(ctx context.Context, items []*corpusItem) {
	GinkgoHelper()
	resources := map[string][]string{
		"": {"pods"}, "apps": {"deployments", "statefulsets"}, "batch": {"jobs", "cronjobs"},
		"resource.k8s.io": {"resourceclaims", "resourceclaimtemplates"},
	}
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "celcorpus-workloads"}}
	for _, g := range slices.Sorted(maps.Keys(resources)) {
		role.Rules = append(role.Rules, rbacv1.PolicyRule{APIGroups: []string{g}, Resources: resources[g], Verbs: []string{"get", "create", "update"}})
	}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "celcorpus-workloads"},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name}}
	users := map[string][]string{}
	for _, it := range items {
		if it.t.user != "" {
			users[it.t.user] = offline.UserInfo(it.t.user, it.t.groups).Groups
		}
	}
	for _, u := range slices.Sorted(maps.Keys(users)) {
		binding.Subjects = append(binding.Subjects, rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: u})
	}
	for _, obj := range []client.Object{role, binding} {
		Expect(admin.Create(ctx, obj)).To(Succeed())
		DeferCleanup(deleteObject, obj)
	}
	for u, groups := range users {
		for g, rs := range resources {
			for _, r := range rs {
				waitAllowed(ctx, u, groups, authorizationv1.ResourceAttributes{Verb: "create", Group: g, Resource: r},
					authorizationv1.ResourceAttributes{Verb: "update", Group: g, Resource: r})
			}
		}
	}
}

// storedOld is the old object of UPDATE items as the API server holds it,
// and as the cases wrote it.
type storedOld struct {
	obj    *unstructured.Unstructured
	source []byte
}

// storeOld creates the old object of an UPDATE item for real, as its user,
// through the suite's modelgate: as modelgate admitted it. Items with the
// same old object share one; where that cannot be, the item says why.
func storeOld(ctx context.Context, it *corpusItem, initial map[string]map[string]string, olds map[string]*storedOld) {
	GinkgoHelper()
	if !maps.Equal(it.t.labels, initial[it.t.ns]) {
		it.why = "an UPDATE whose namespace labels are not its namespace's first: its old object cannot be stored"
		return
	}
	if it.oldOut.Decision == offline.Denied && it.oldOut.CEL == nil {
		it.why = "an UPDATE whose old object the mutating webhook denies"
		return
	}
	u := &unstructured.Unstructured{}
	Expect(u.UnmarshalJSON(it.old)).To(Succeed())
	u.SetNamespace(it.t.ns)
	key := oldKey(u)
	if prev, ok := olds[key]; ok {
		if !bytes.Equal(prev.source, it.old) {
			it.why = "an UPDATE whose old object's name another case's old object holds"
		}
		return
	}
	Expect(senderFor(it.t).c.Create(ctx, u)).To(Succeed(), "storing the old object of %s", it.name)
	olds[key] = &storedOld{obj: u, source: it.old}
}

func oldKey(u *unstructured.Unstructured) string {
	return u.GetKind() + "/" + u.GetNamespace() + "/" + u.GetName()
}

// deleteObject deletes obj at once (what it owns in the background: no
// garbage collector runs to remove an orphaning finalizer), gone already
// being fine.
func deleteObject(ctx context.Context, obj client.Object) {
	GinkgoHelper()
	Expect(client.IgnoreNotFound(admin.Delete(ctx, obj, client.PropagationPolicy(metav1.DeletePropagationBackground)))).To(Succeed())
}
