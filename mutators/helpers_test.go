package mutators

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/modelgate/modelgate/api/annotations"
	"github.com/modelgate/modelgate/test/harnesses/builders"
)

// Identities used across the mutator tests.
const (
	alice      = "alice@example.com"
	aliceLabel = "alice_example.com"
	bob        = "bob"
	controller = "system:serviceaccount:kube-system:replicaset-controller"
)

var (
	untrusted = Requester{Username: alice, Groups: []string{"system:authenticated"}}
	trusted   = Requester{Username: controller, Trusted: true}
	teamNS    = map[string]string{annotations.NamespaceTeam: "ml-platform"}
)

// targetKinds are the target shapes the mutator tests cover: a Pod (its own
// metadata only) and a CronJob (its metadata, the job template's and the pod
// template's).
var targetKinds = []string{"Pod", "CronJob"}

// newTarget builds the Target of a builders object of the kind, the way the
// webhook's decoders do.
func newTarget(kind string, o builders.Options) *Target {
	if o.Name == "" {
		o.Name = "server"
	}
	if o.Namespace == "" {
		o.Namespace = "team-a"
	}
	switch obj := builders.New(kind, o).(type) {
	case *corev1.Pod:
		return &Target{Kind: kind, Object: &obj.ObjectMeta, PodSpec: &obj.Spec}
	case *batchv1.CronJob:
		jt := &obj.Spec.JobTemplate
		return &Target{Kind: kind, Object: &obj.ObjectMeta,
			Templates: []*metav1.ObjectMeta{&jt.ObjectMeta, &jt.Spec.Template.ObjectMeta},
			PodSpec:   &jt.Spec.Template.Spec, SpecPath: field.NewPath("spec", "jobTemplate", "spec", "template", "spec")}
	default:
		panic("newTarget: unsupported kind " + kind)
	}
}

// setOnEvery puts the labels and annotations on every metadata of t.
func setOnEvery(t *Target, labels, annos map[string]string) {
	for _, m := range t.Metas() {
		for k, v := range labels {
			setLabel(m, k, v)
		}
		for k, v := range annos {
			setAnnotation(m, k, v)
		}
	}
}

// metas returns plain copies of every metadata of t, for cmp.
func metas(t *Target) []metav1.ObjectMeta {
	out := make([]metav1.ObjectMeta, 0, 1+len(t.Templates))
	for _, m := range t.Metas() {
		out = append(out, *m.DeepCopy())
	}
	return out
}

// specTarget builds a target of the kind with before applied to its pod
// spec, and the spec expected after mutation: a copy with want applied.
func specTarget(kind string, before, want func(*corev1.PodSpec)) (*Target, *corev1.PodSpec) {
	tg := newTarget(kind, builders.Options{})
	if before != nil {
		before(tg.PodSpec)
	}
	wantSpec := tg.PodSpec.DeepCopy()
	if want != nil {
		want(wantSpec)
	}
	return tg, wantSpec
}

// checkSpecChange checks a mutator's changed report against wantChanged
// and against whether the spec really changed from before, then the spec
// against want.
func checkSpecChange(t *testing.T, before, want, got *corev1.PodSpec, changed, wantChanged bool) {
	t.Helper()
	if changed != wantChanged {
		t.Errorf("changed = %v, want %v", changed, wantChanged)
	}
	if same := cmp.Equal(before, got); changed == same {
		t.Errorf("changed = %v, but spec equal before and after = %v", changed, same)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("pod spec (-want +got):\n%s", diff)
	}
}

// explicit marks every setting s holds as the object's own annotation, as
// the parser does for an object without a profile.
func explicit(s annotations.Settings) annotations.Settings {
	set := map[string]bool{
		annotations.Model:         s.Model != nil,
		annotations.GPU:           s.GPU.Count > 0,
		annotations.Engine:        s.Serving.Engine != "",
		annotations.Port:          s.Serving.Port != 0,
		annotations.HealthPath:    s.Serving.HealthPath != "",
		annotations.WarmupTimeout: s.Serving.WarmupTimeoutSeconds != 0,
		annotations.Container:     s.Container != "",
	}
	s.Origins = map[string]annotations.Origin{}
	for key, ok := range set {
		if ok {
			s.Origins[key] = annotations.Origin{Path: field.NewPath("metadata", "annotations").Key(key)}
		}
	}
	return s
}

// applyAgain applies the chain a second time and fails the test when that
// changes anything: every injection must be a fixed point.
func applyAgain(t *testing.T, chain Chain, tg *Target, in *Input) {
	t.Helper()
	before := tg.PodSpec.DeepCopy()
	res, err := chain.Apply(tg, in)
	if err != nil {
		t.Fatalf("second Apply: %v", err)
	}
	if len(res.Changed) != 0 {
		t.Errorf("second Apply changed %v", res.Changed)
	}
	if diff := cmp.Diff(before, tg.PodSpec); diff != "" {
		t.Errorf("pod spec after a second Apply (-first +second):\n%s", diff)
	}
}
