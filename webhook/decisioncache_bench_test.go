package webhook

import (
	"bytes"
	"encoding/json"
	"fmt"
	"runtime"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	config "github.com/modelgate/modelgate/api/config/v1alpha1"
	"github.com/modelgate/modelgate/policies"
)

// replicaReviews are the validating reviews of n Pods the ReplicaSet of the
// typical injected Deployment creates: the template as the mutating
// webhook left it, each Pod with its own generated name and uid.
func replicaReviews(tb testing.TB, n int) []admission.Request {
	tb.Helper()
	dep := injectedReview(tb)
	var d appsv1.Deployment
	if err := json.Unmarshal(dep.Object.Raw, &d); err != nil {
		tb.Fatal(err)
	}
	out := make([]admission.Request, n)
	for i := range out {
		meta := *d.Spec.Template.ObjectMeta.DeepCopy()
		meta.Name = fmt.Sprintf("llm-server-7d9f8b6c5-%05d", i)
		meta.Namespace = d.Namespace
		meta.UID = "" // set by the API server after admission
		meta.Labels["pod-template-hash"] = "7d9f8b6c5"
		meta.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet",
			Name: "llm-server-7d9f8b6c5", UID: "c0ffee00-0000-4000-8000-000000000001", Controller: ptr.To(true)}}
		pod := &corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}, ObjectMeta: meta, Spec: *d.Spec.Template.Spec.DeepCopy()}
		out[i] = request("Pod", admissionv1.Create, d.Namespace, toJSON(tb, pod), nil,
			"system:serviceaccount:kube-system:replicaset-controller")
	}
	return out
}

// BenchmarkValidateCache is what the decision cache saves a validating
// review under the library, in one run: the Pods of a Deployment judged
// with the cache off (every Pod a first review, the baseline), and with it
// on (the first Pod evaluated, the others answered from the cache though
// each has its own name); and one review repeated, as a GitOps re-apply.
func BenchmarkValidateCache(b *testing.B) {
	pods := replicaReviews(b, 64)
	for _, bc := range []struct {
		name  string
		cache bool
		reqs  []admission.Request
	}{
		{"pods/cache=off", false, pods},
		{"pods/cache=on", true, pods},
		{"repeat/cache=off", false, pods[:1]},
		{"repeat/cache=on", true, pods[:1]},
	} {
		b.Run(bc.name, func(b *testing.B) {
			o := policies.Options{}
			if bc.cache {
				o.Cache = policies.NewDecisionCache(config.DefaultDecisionCacheBytes)
			}
			h := NewValidating(config.New(), engineWith(b, o, samplePolicies(b)), testNamespaces, NewPolicyMetrics(nil))
			ctx := benchContext()
			for _, req := range bc.reqs {
				if resp := h.Handle(ctx, req); !resp.Allowed {
					b.Fatalf("denied: %s", resp.Result.Message)
				}
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				h.Handle(ctx, bc.reqs[i%len(bc.reqs)])
				i++
			}
			if c := o.Cache; c != nil {
				if st := c.Stats(); st.Hits < uint64(b.N) {
					b.Fatalf("stats %+v: not every review was answered from the cache", st)
				}
			}
		})
	}
}

// BenchmarkDecisionCacheMemory fills the cache with the decisions of n
// distinct reviews under the library (each Deployment with an image of
// its own) and reports the live heap each entry takes against the
// cache's estimate of it, which policy.decisionCache.maxBytes bounds.
func BenchmarkDecisionCacheMemory(b *testing.B) {
	const n = 2000
	base := injectedReview(b)
	image := []byte(`"image":"registry.example.com/llm/server`)
	if !bytes.Contains(base.Object.Raw, image) {
		b.Fatal("the injected review has no server image to vary")
	}
	reqs := make([]admission.Request, n)
	for i := range reqs {
		reqs[i] = base
		reqs[i].Object.Raw = bytes.Replace(base.Object.Raw, image, fmt.Appendf(nil, `"image":"registry.example.com/llm/server-%d`, i), 1)
	}
	ctx := benchContext()
	for b.Loop() {
		cache := policies.NewDecisionCache(1 << 30)
		h := NewValidating(config.New(), engineWith(b, policies.Options{Cache: cache}, samplePolicies(b)), testNamespaces, NewPolicyMetrics(nil))
		h.Handle(ctx, reqs[0])
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for _, req := range reqs {
			h.Handle(ctx, req)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		st := cache.Stats()
		if st.Entries < n {
			b.Fatalf("%d entries, want %d", st.Entries, n)
		}
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/float64(st.Entries), "heap-B/entry")
		b.ReportMetric(float64(st.Bytes)/float64(st.Entries), "estimated-B/entry")
		runtime.KeepAlive(h)
	}
}
