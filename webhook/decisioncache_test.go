package webhook

import (
	"bytes"
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	config "github.com/modelgate/modelgate/api/config/v1alpha1"
	"github.com/modelgate/modelgate/policies"
	"github.com/modelgate/modelgate/test/harnesses/builders"
)

// cachePair is the validating handler under the library twice: with the
// decision cache off and on, on the same Configuration and namespaces.
type cachePair struct {
	plain, cached *Validating
	cache         *policies.DecisionCache
}

func newCachePair(tb testing.TB, cfg *config.Configuration, ns NamespaceLabeler) cachePair {
	tb.Helper()
	cache := policies.NewDecisionCache(config.DefaultDecisionCacheBytes)
	return cachePair{
		plain:  NewValidating(cfg, engineWith(tb, policies.Options{}, samplePolicies(tb)), ns, NewPolicyMetrics(nil)),
		cached: NewValidating(cfg, engineWith(tb, policies.Options{Cache: cache}, samplePolicies(tb)), ns, NewPolicyMetrics(nil)),
		cache:  cache,
	}
}

// answer is what the API server and the user see of a validating answer.
type answer struct {
	Allowed  bool
	Code     int32
	Message  string
	Warnings []string
}

func answerOf(resp admission.Response) answer {
	a := answer{Allowed: resp.Allowed, Warnings: resp.Warnings}
	if resp.Result != nil {
		a.Code, a.Message = resp.Result.Code, resp.Result.Message
	}
	return a
}

// same judges req with the cache off, then with it on twice (the second
// from the cache when the first was cached), and fails on any difference
// in the answer: allowed, code, message (every denial, in order) and
// warnings.
func (p cachePair) same(t *testing.T, what string, req admission.Request) answer {
	t.Helper()
	ctx := context.Background()
	want := answerOf(p.plain.Handle(ctx, req))
	for _, try := range []string{"first", "repeat"} {
		if diff := cmp.Diff(want, answerOf(p.cached.Handle(ctx, req))); diff != "" {
			t.Errorf("%s, %s review with the cache: the answer differs (-evaluated +cached):\n%s", what, try, diff)
		}
	}
	return want
}

// renamed is req with the object (and, for a workload, nothing else)
// renamed: the next Pod of a ReplicaSet, or another Deployment of the same
// spec.
func renamed(t testing.TB, req admission.Request, name string) admission.Request {
	t.Helper()
	out := req
	out.Name = name
	out.Object.Raw = editMetas(t.(*testing.T), req.Kind.Kind, req.Object.Raw, func(m *metav1.ObjectMeta) {
		if m.Name != "" {
			m.Name = name
		}
	})
	return out
}

// Every golden case, injected as the mutating webhook leaves it and as it
// came, created and updated, and renamed, is judged the same by the
// library with the decision cache as without it; the denials name the
// object they deny.
func TestValidateCacheGolden(t *testing.T) {
	cfg := loadGoldenConfig(t)
	mutating := NewMutating(cfg, goldenNamespaces, NewMetrics(nil))
	p := newCachePair(t, cfg, goldenNamespaces)
	ctx := context.Background()
	named := 0 // denials that name the object
	for name, in := range goldenInputs(t) {
		t.Run(name, func(t *testing.T) {
			obj := readGoldenInput(t, in)
			resp := mutating.Handle(ctx, obj.request(admissionv1.Create, obj.raw, nil))
			injected := applyPatch(t, obj.raw, resp)
			for what, req := range map[string]admission.Request{
				"injected create": obj.request(admissionv1.Create, injected, nil),
				"injected update": obj.request(admissionv1.Update, injected, injected),
				"as written":      obj.request(admissionv1.Create, obj.raw, nil),
			} {
				a := p.same(t, what, req)
				b := p.same(t, what+", renamed", renamed(t, req, obj.name+"-other"))
				quoted := `"` + obj.name + `"`
				if strings.Contains(a.Message, quoted) {
					named++
				}
				if strings.Contains(b.Message, quoted) {
					t.Errorf("%s: the renamed object's denial names the first one: %s", what, b.Message)
				}
			}
		})
	}
	if st := p.cache.Stats(); st.Hits == 0 || st.Misses == 0 || st.Recalled == 0 || st.Recalled == st.Hits {
		t.Errorf("stats %+v: want first reviews evaluated, repeats answered from the cache, allowed ones from their bytes and denied ones from their view", st)
	}
	if named == 0 {
		t.Error("no denial named its object: the renamed comparison proves nothing")
	}
}

// FuzzValidateCache judges random workloads of every kind, from random and
// real modelgate.io annotations and labels, injected by the mutating
// webhook, with and without the decision cache, and renamed: the answers
// are the same, to the message and the warnings.
func FuzzValidateCache(f *testing.F) {
	for i, s := range reviewSeeds {
		for k := range builders.Kinds {
			f.Add(uint8(k), uint8(i%len(reviewSpecs)), s.objAnn, s.tplAnn, s.labels, "other")
		}
	}
	cfg := config.New()
	mutating := NewMutating(cfg, testNamespaces, NewMetrics(nil))
	p := newCachePair(f, cfg, testNamespaces)
	f.Fuzz(func(t *testing.T, kindIdx, specIdx uint8, objAnn, tplAnn, labels, other string) {
		kind := builders.Kinds[int(kindIdx)%len(builders.Kinds)]
		obj := reviewObject(kind, reviewSpecs[int(specIdx)%len(reviewSpecs)](), keyValues(objAnn), keyValues(tplAnn), keyValues(labels))
		req := create(t, obj, alice)
		if resp := mutating.Handle(context.Background(), req); resp.Allowed && len(resp.Patches) > 0 {
			req.Object.Raw = applyPatch(t, req.Object.Raw, resp)
		}
		p.same(t, "created", req)
		if name := "x" + strings.ToLower(strings.Map(func(r rune) rune {
			if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
				return r
			}
			return -1
		}, other)); len(name) < 60 {
			p.same(t, "renamed", renamed(t, req, name))
		}
	})
}

// Under a stream of distinct reviews the cache fills to its bound and
// then evicts: the live heap stays flat (the figures for the default
// 32Mi bound are in docs/performance.md).
func TestDecisionCacheBoundHoldsUnderDistinctReviews(t *testing.T) {
	if testing.Short() {
		t.Skip("thousands of reviews")
	}
	const bound = 2 << 20 // about 1,100 of the library's decisions
	base := injectedReview(t)
	image := []byte(`"image":"registry.example.com/llm/server`)
	if !bytes.Contains(base.Object.Raw, image) {
		t.Fatal("the injected review has no server image to vary")
	}
	cache := policies.NewDecisionCache(bound)
	h := NewValidating(config.New(), engineWith(t, policies.Options{Cache: cache}, samplePolicies(t)), testNamespaces, NewPolicyMetrics(nil))
	ctx := benchContext()
	var heaps []uint64
	for i := 1; i <= 6000; i++ {
		req := base
		req.Object.Raw = bytes.Replace(base.Object.Raw, image, fmt.Appendf(nil, `"image":"registry.example.com/llm/server-%d`, i), 1)
		if resp := h.Handle(ctx, req); !resp.Allowed {
			t.Fatalf("review %d denied: %v", i, resp.Result)
		}
		if st := cache.Stats(); st.Bytes > bound {
			t.Fatalf("after %d reviews the cache holds %d bytes, over its bound %d", i, st.Bytes, bound)
		}
		if i%2000 == 0 {
			runtime.GC()
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			heaps = append(heaps, m.HeapAlloc)
		}
	}
	if st := cache.Stats(); st.Evictions < 4000 || st.Hits != 0 {
		t.Errorf("stats %+v: want every review a first one, and the cache evicting", st)
	}
	// Full after the first 2,000: what the next 4,000 add is garbage, not
	// live heap.
	if grew := int64(heaps[2]) - int64(heaps[0]); grew > 1<<20 {
		t.Errorf("the live heap grew by %d bytes from 2,000 to 6,000 distinct reviews (%v), with the cache full at %d bytes", grew, heaps, bound)
	}
}

// The library reads a Pod's name only to write its messages: the Pods of
// a Deployment, each named apart, are one evaluation, then hits.
func TestLibraryCachesReplicas(t *testing.T) {
	p := newCachePair(t, config.New(), testNamespaces)
	for i, req := range replicaReviews(t, 5) {
		if a := p.same(t, fmt.Sprintf("pod %d", i), req); !a.Allowed {
			t.Fatalf("pod %d denied: %s", i, a.Message)
		}
	}
	// Each pod is judged twice with the cache (p.same): 1 miss, 9 hits.
	if st := p.cache.Stats(); st.Misses != 1 || st.Hits != 9 {
		t.Errorf("stats %+v: want the first pod evaluated and every other answered from the cache", st)
	}
}
