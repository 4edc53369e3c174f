package integration_test

import (
	"context"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kjson "sigs.k8s.io/json"

	"github.com/modelgate/modelgate/api/annotations"
	config "github.com/modelgate/modelgate/api/config/v1alpha1"
	policyv1 "github.com/modelgate/modelgate/api/policy/v1"
	"github.com/modelgate/modelgate/offline"
	"github.com/modelgate/modelgate/policies"
	"github.com/modelgate/modelgate/test/harnesses/builders"
	"github.com/modelgate/modelgate/test/harnesses/env"
	"github.com/modelgate/modelgate/validators"
)

// corpusJudges are the offline judges, one for each policy path,
// exception path and Configuration (cfg when none is named).
type corpusJudges struct {
	cfg *config.Configuration
	by  map[[3]string]*corpusJudge
}

func (js *corpusJudges) get(ctx context.Context, policyPath, exceptionPath, configPath string) *corpusJudge {
	GinkgoHelper()
	key := [3]string{filepath.Clean(policyPath), exceptionPath, configPath}
	if j, ok := js.by[key]; ok {
		return j
	}
	if js.by == nil {
		js.by = map[[3]string]*corpusJudge{}
	}
	cfg := js.cfg
	if configPath != "" {
		var err error
		cfg, err = config.Load(configPath)
		Expect(err).NotTo(HaveOccurred())
		cfg.RecordKey = js.cfg.RecordKey
	}
	js.by[key] = newCorpusJudge(ctx, cfg, policyPath, exceptionPath)
	return js.by[key]
}

// sameCELScope reports whether a Configuration generates the CEL forms as
// the default one does: the same GPU keys and excluded namespaces.
func sameCELScope(a, b *config.Configuration) bool {
	return a.Injection.GPU.ResourceName == b.Injection.GPU.ResourceName && a.Injection.GPU.ProductLabel == b.Injection.GPU.ProductLabel &&
		slices.Equal(a.Injection.ExcludedNamespaces, b.Injection.ExcludedNamespaces) && a.Namespace == b.Namespace
}

// corpusJudge admits objects offline as `modelgate test` does (Runner),
// with the policies of one path and the exceptions of a case file.
type corpusJudge struct {
	cfg        *config.Configuration
	engine     *policies.Engine
	cel        *offline.CELForms
	exceptions []*policies.Exception
	// objects are the exceptions as written, for the generated policies.
	objects []policyv1.WorkloadPolicyException
}

func newCorpusJudge(ctx context.Context, cfg *config.Configuration, policyPath, exceptionPath string) *corpusJudge {
	GinkgoHelper()
	cs, cel, err := offline.LoadPoliciesWithCEL(ctx, policyPath, cfg)
	Expect(err).NotTo(HaveOccurred())
	j := &corpusJudge{cfg: cfg, engine: offline.NewEngine(cfg, cs), cel: cel}
	j.exceptions, err = offline.PolicyPathExceptions(policyPath, "", offline.PolicyNames(cs))
	Expect(err).NotTo(HaveOccurred())
	j.objects = exceptionObjects(policyPath)
	if exceptionPath != "" {
		es, err := offline.LoadExceptions(exceptionPath, "", offline.PolicyNames(cs))
		Expect(err).NotTo(HaveOccurred())
		j.exceptions = append(j.exceptions, es...)
		j.objects = append(j.objects, exceptionObjects(exceptionPath)...)
	}
	return j
}

// admit admits obj (an UPDATE from old when set) in the target, judged at
// now (the clock when nil).
func (j *corpusJudge) admit(ctx context.Context, t corpusTarget, obj, old []byte, now *metav1.Time) offline.Outcome {
	GinkgoHelper()
	var clock func() time.Time
	if now != nil {
		clock = func() time.Time { return now.Time }
	}
	es := make([]*policies.Exception, 0, len(j.exceptions))
	for _, e := range j.exceptions {
		if e.Namespace == "" {
			e2 := *e
			e2.Namespace = t.ns
			e = &e2
		}
		es = append(es, e)
	}
	offline.UseExceptions(j.engine, j.cfg, es, clock)
	a, err := offline.NewAdmitter(j.cfg, j.engine, offline.Namespaces{Default: t.labels})
	Expect(err).NotTo(HaveOccurred())
	a.SetCEL(j.cel)
	out, err := a.Admit(ctx, offline.Request{Object: obj, OldObject: old, Namespace: t.ns, User: offline.UserInfo(t.user, t.groups)})
	Expect(err).NotTo(HaveOccurred())
	return out
}

// inForce are the exceptions in force in the target at now (the clock
// when nil), in the namespace of the target when they name none: those the
// celpolicy controller generates the policies with.
func (j *corpusJudge) inForce(t corpusTarget, now *metav1.Time) []policyv1.WorkloadPolicyException {
	GinkgoHelper()
	at := time.Now()
	if now != nil {
		at = now.Time
	}
	skew := config.DefaultExceptionClockSkew
	if d := j.cfg.Policy.Exceptions.ClockSkew; d != nil {
		skew = d.Duration
	}
	x := policies.NewExceptions(skew)
	var out []policyv1.WorkloadPolicyException
	for _, ex := range j.objects {
		if ex.Namespace == "" {
			ex.Namespace = t.ns
		}
		if e, err := validators.ExceptionOf(&ex); err == nil && x.InForce(e, at) {
			out = append(out, ex)
		}
	}
	return out
}

// exceptionObjects are the WorkloadPolicyExceptions of the YAML files at
// path (a file, or a directory's files), as offline.LoadExceptions finds
// them.
func exceptionObjects(path string) []policyv1.WorkloadPolicyException {
	GinkgoHelper()
	fi, err := os.Stat(path)
	Expect(err).NotTo(HaveOccurred())
	files := []string{path}
	if fi.IsDir() {
		files = nil
		entries, err := os.ReadDir(path)
		Expect(err).NotTo(HaveOccurred())
		for _, e := range entries {
			if n := e.Name(); !e.IsDir() && (strings.HasSuffix(n, ".yaml") || strings.HasSuffix(n, ".yml")) {
				files = append(files, filepath.Join(path, n))
			}
		}
	}
	var out []policyv1.WorkloadPolicyException
	for _, f := range files {
		data, err := os.ReadFile(f)
		Expect(err).NotTo(HaveOccurred())
		docs, err := offline.SplitDocuments(f, data)
		Expect(err).NotTo(HaveOccurred())
		for _, d := range docs {
			ti, err := offline.ReadTypeInfo(d.JSON)
			if err != nil || !offline.IsException(ti) {
				continue
			}
			var ex policyv1.WorkloadPolicyException
			Expect(kjson.UnmarshalCaseSensitivePreserveInts(d.JSON, &ex)).To(Succeed(), d.Where())
			out = append(out, ex)
		}
	}
	return out
}

// exceptionsKey identifies a set of exceptions.
func exceptionsKey(es []policyv1.WorkloadPolicyException) string {
	if len(es) == 0 {
		return ""
	}
	b, err := json.Marshal(es)
	Expect(err).NotTo(HaveOccurred())
	return string(b)
}

// corpusCases are the cases of every case file under dir, admitted offline
// by the judges, and the files that do not load. A file judging with other
// policies than the samples, or with a Configuration that generates other
// CEL forms, is not sent. Each decision is held to Runner's, which
// `modelgate test` reports.
func corpusCases(ctx context.Context, dir, samples string, judges *corpusJudges) ([]*corpusItem, []string) {
	GinkgoHelper()
	var files []string
	Expect(filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, offline.CaseFileSuffix) {
			files = append(files, p)
		}
		return err
	})).To(Succeed())
	Expect(files).NotTo(BeEmpty())
	var (
		out      []*corpusItem
		unloaded []string
		runner   offline.Runner
	)
	for _, path := range files {
		f, err := offline.LoadCaseFile(path)
		if err != nil {
			unloaded = append(unloaded, err.Error())
			continue
		}
		fdir := filepath.Dir(path)
		policyPath, exceptionPath, configPath := resolved(fdir, f.Policies), resolved(fdir, f.Exceptions), resolved(fdir, f.Config)
		ran, err := runner.Run(ctx, f)
		if err != nil {
			unloaded = append(unloaded, path+": "+err.Error())
			continue
		}
		why := ""
		var j *corpusJudge
		if filepath.Clean(policyPath) != filepath.Clean(samples) {
			why = "its case file judges with other policies than config/samples/policies"
		} else if j = judges.get(ctx, policyPath, exceptionPath, configPath); !sameCELScope(j.cfg, judges.cfg) {
			why = "its case file's Configuration generates other CEL forms than the default one"
		}
		for i := range f.Cases {
			c := &f.Cases[i]
			it := &corpusItem{name: filepath.Base(path) + ": " + c.Name, why: why, failsClosed: c.Expect.CELFailsClosed, otherConfig: configPath != ""}
			out = append(out, it)
			if why != "" {
				continue
			}
			obj, old := caseObject(fdir, c.Object, c.File), caseObject(fdir, c.OldObject, c.OldFile)
			ti, err := offline.ReadTypeInfo(obj)
			Expect(err).NotTo(HaveOccurred())
			var now *metav1.Time
			it.t, now = caseTarget(f.Target, c.Target, ti.Metadata.Namespace)
			it.kind = ti.Kind
			it.out, it.exceptions = j.admit(ctx, it.t, obj, old, now), j.inForce(it.t, now)
			if old != nil {
				it.old, it.oldOut = old, j.admit(ctx, it.t, old, nil, now)
			}
			Expect(ran[i].Err).NotTo(HaveOccurred(), it.name)
			r := ran[i].Outcome
			Expect([]any{it.out.Decision, it.out.Denials, it.out.Warnings, it.out.CEL}).To(Equal([]any{r.Decision, r.Denials, r.Warnings, r.CEL}),
				"%s: the corpus's offline admission decides otherwise than modelgate test", it.name)
		}
	}
	return out, unloaded
}

// caseObject is a case's object, inline or in a file; nil when neither.
func caseObject(dir string, inline []byte, file string) []byte {
	GinkgoHelper()
	if len(inline) > 0 && string(inline) != "null" {
		return inline
	}
	if file == "" {
		return nil
	}
	path := resolved(dir, file)
	data, err := os.ReadFile(path)
	Expect(err).NotTo(HaveOccurred())
	docs, err := offline.SplitDocuments(path, data)
	Expect(err).NotTo(HaveOccurred())
	Expect(docs).To(HaveLen(1), path)
	return docs[0].JSON
}

// caseTarget is a case's target: its own settings over its file's, as
// Runner takes them (offline.Target.With), in the object's own namespace
// when it names one; and the time it is judged at.
func caseTarget(file, own offline.Target, objectNS string) (corpusTarget, *metav1.Time) {
	m := file.With(own)
	t := corpusTarget{ns: m.Namespace, labels: m.NamespaceLabels, user: m.User, groups: m.Groups}
	if objectNS != "" {
		t.ns = objectNS
	}
	if t.labels == nil {
		t.labels = map[string]string{}
	}
	return t, m.Now
}

// resolved is a case file's path relative to its folder.
func resolved(dir, p string) string {
	if p == "" || filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(dir, p)
}

// corpusTargets are where the generated workloads are created, and by
// whom: the library's namespaces, one opted in as a whole, one with every
// workload in the policies' scope, one modelgate ignores, one without a
// team, the namespaces excluded from the policies (left as they are); by
// users, a service account and a trusted controller.
var corpusTargets = []corpusTarget{
	{ns: "team-a", labels: map[string]string{annotations.NamespaceTeam: "nlp"}, user: "alice@example.com", groups: []string{"ml-engineers"}},
	{ns: "team-a", labels: map[string]string{annotations.NamespaceTeam: "nlp"}, user: "system:serviceaccount:kube-system:replicaset-controller",
		groups: []string{"system:serviceaccounts", "system:serviceaccounts:kube-system"}},
	{ns: "research", labels: map[string]string{annotations.NamespaceTeam: "research"}, user: "bob@example.com", groups: []string{"researchers"}},
	{ns: "sandbox", labels: map[string]string{annotations.NamespaceTeam: "sandbox"}, user: "alice@example.com", groups: []string{"ml-engineers"}},
	{ns: "gpu-operator", labels: map[string]string{annotations.NamespaceTeam: "platform"}, user: "system:serviceaccount:gpu-operator:operator",
		groups: []string{"system:serviceaccounts", "system:serviceaccounts:gpu-operator"}},
	{ns: "celcorpus-injection", labels: map[string]string{annotations.NamespaceInjection: "enabled", annotations.NamespaceTeam: "nlp"},
		user: "alice@example.com", groups: []string{"ml-engineers"}},
	{ns: "celcorpus-scope-all", labels: map[string]string{"modelgate.io/policy-scope": "all", annotations.NamespaceTeam: "nlp"},
		user: "bob@example.com", groups: []string{"researchers"}},
	{ns: "celcorpus-ignored", labels: map[string]string{annotations.NamespaceIgnore: "true"}, user: "alice@example.com", groups: []string{"ml-engineers"}},
	{ns: "celcorpus-no-team", labels: map[string]string{}, user: "bob@example.com", groups: []string{"researchers"}},
	{ns: "kube-system", user: "alice@example.com", groups: []string{"ml-engineers"}},
	{ns: env.Namespace, user: "alice@example.com", groups: []string{"ml-engineers"}},
}

// corpusWorkloads are the generated workloads, each in a target in turn,
// admitted offline with the samples.
func corpusWorkloads(ctx context.Context, samples string, judges *corpusJudges) []*corpusItem {
	GinkgoHelper()
	j := judges.get(ctx, samples, "", "")
	var out []*corpusItem
	for i, obj := range builders.GeneratedWorkloads(corpusSeed, corpusGenerated) {
		t := corpusTargets[i%len(corpusTargets)]
		it := &corpusItem{name: "generated " + obj.GetName() + " in " + t.ns, kind: obj.GetObjectKind().GroupVersionKind().Kind, t: t,
			claims: len(builders.PodSpecOf(obj).ResourceClaims) > 0}
		js, err := json.Marshal(obj)
		Expect(err).NotTo(HaveOccurred())
		judged := t
		if t.labels == nil {
			// A namespace left as it is: judged offline with its labels.
			ns := &corev1.Namespace{}
			Expect(admin.Get(ctx, client.ObjectKey{Name: t.ns}, ns)).To(Succeed())
			judged.labels = ns.Labels
		}
		it.out, it.exceptions = j.admit(ctx, judged, js, nil, nil), j.inForce(judged, nil)
		out = append(out, it)
	}
	return out
}
