package policies

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"
)

// sameDecision compares decisions as a caller sees them: results, their
// order, messages and details, errors by text; not how long each took.
var sameDecision = []cmp.Option{
	cmpopts.IgnoreFields(Result{}, "Duration"),
	cmp.Comparer(func(a, b error) bool { return fmt.Sprint(a) == fmt.Sprint(b) }),
}

// variant is gpuWorkload changed by the seed: its name, namespace, labels,
// GPUs, products, engine, model pin and containers vary, so that some
// reviews repeat others in what the policies read and some do not.
func variant(seed uint64) (map[string]any, string) {
	r := rand.New(rand.NewPCG(seed, 7))
	wl := gpuWorkload()
	ns := []string{"team-a", "team-b", "research"}[r.IntN(3)]
	wl["namespace"] = ns
	wl["name"] = fmt.Sprintf("llama-%d", r.IntN(4))
	gpu := wl["gpu"].(map[string]any)
	gpu["count"] = r.IntN(10)
	gpu["products"] = [][]any{{"NVIDIA-A100-SXM4-80GB"}, {"NVIDIA-H100-80GB-HBM3"}, {}}[r.IntN(3)]
	if r.IntN(3) == 0 {
		wl["owner"], wl["team"] = "", ""
	}
	if r.IntN(3) == 0 {
		m := wl["model"].(map[string]any)
		m["pinned"], m["revision"] = false, "main"
	}
	if r.IntN(4) == 0 {
		wl["engine"], wl["serving"] = "", false
	}
	cs := wl["containers"].([]any)
	c := cs[0].(map[string]any)
	c["privileged"] = r.IntN(4) == 0
	c["image"] = []string{"vllm/vllm-openai:v0.6.0", "docker.io/evil/miner:1", "registry.example.com/vllm:1"}[r.IntN(3)]
	return wl, ns
}

// The cache answers exactly as evaluating does, for every review, in
// order and in detail; repeats are answered from it, and a review some
// applicable policy may judge by the raw object is never cached.
func TestDecisionCacheEquivalence(t *testing.T) {
	ctx := context.Background()
	cs, errs := LoadDir(ctx, benchDir)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	for name, policies := range map[string][]*Compiled{"without object readers": withoutObjects(cs), "all": cs} {
		t.Run(name, func(t *testing.T) {
			set := NewSet(policies...)
			plain := NewEngine(Options{})
			plain.Swap(set)
			cache := NewDecisionCache(1 << 20)
			cached := NewEngine(Options{Cache: cache})
			cached.Swap(set)
			for i := range uint64(300) {
				wl, ns := variant(i % 97) // some seeds come back: repeats
				r := Review{Kind: "Deployment", Namespace: ns, Workload: toValue(t, wl), Object: []byte(deploymentJSON)}
				want := plain.Evaluate(ctx, r)
				got := cached.Evaluate(ctx, r)
				if diff := cmp.Diff(want, got, sameDecision...); diff != "" {
					t.Fatalf("review %d (seed %d): cached decision differs (-evaluated +cached):\n%s", i, i%97, diff)
				}
			}
			st := cache.Stats()
			if name == "all" {
				if st.Hits+st.Misses != 0 {
					t.Errorf("a set with a policy reading input.object used the cache: %+v", st)
				}
				return
			}
			if st.Hits == 0 || st.Misses == 0 {
				t.Errorf("stats %+v: want repeats answered from the cache and first reviews evaluated", st)
			}
		})
	}
}

func withoutObjects(cs []*Compiled) []*Compiled {
	var out []*Compiled
	for _, c := range cs {
		if !c.NeedsObjects() {
			out = append(out, c)
		}
	}
	return out
}

// A policy that reads the name makes every differently named review miss;
// one that reads the namespace's labels sees a change of them at once; a
// new Set is never answered with the old one's decisions.
func TestDecisionCacheSeesWhatPoliciesRead(t *testing.T) {
	ctx := context.Background()
	byName := mustCompile(t, Policy{Name: "by-name", Module: module(
		"package t.byname",
		`deny contains sprintf("name %s", [input.workload.name]) if input.workload.name != ""`)})
	byLabel := mustCompile(t, Policy{Name: "by-label", Module: module(
		"package t.bylabel",
		`deny contains "frozen namespace" if input.workload.namespaceLabels.frozen == "true"`)})
	cache := NewDecisionCache(1 << 20)
	e := NewEngine(Options{Cache: cache})
	e.Swap(NewSet(byName))
	review := func(name string, labels map[string]string) Review {
		wl := gpuWorkload()
		wl["name"] = name
		nl := map[string]any{}
		for k, v := range labels {
			nl[k] = v
		}
		wl["namespaceLabels"] = nl
		return Review{Kind: "Pod", Namespace: "team-a", NamespaceLabels: labels, Workload: toValue(t, wl)}
	}
	msgs := Decision.Denials
	for _, n := range []string{"a", "b", "a"} {
		if got := msgs(e.Evaluate(ctx, review(n, nil))); !cmp.Equal(got, []string{"[by-name] name " + n}) {
			t.Errorf("name %s: %v", n, got)
		}
	}
	if st := cache.Stats(); st.Hits != 1 || st.Misses != 2 {
		t.Errorf("stats %+v: want the second \"a\" alone answered from the cache", st)
	}

	e.Swap(NewSet(byLabel))
	if got := msgs(e.Evaluate(ctx, review("a", nil))); len(got) != 0 {
		t.Errorf("after a policy change, the old set's decision: %v", got)
	}
	if got := msgs(e.Evaluate(ctx, review("a", map[string]string{"frozen": "true"}))); !cmp.Equal(got, []string{"[by-label] frozen namespace"}) {
		t.Errorf("after a namespace label change: %v", got)
	}
}

// What the caller does to a decision (ratcheting, exceptions) never
// reaches the cached one.
func TestDecisionCacheCopies(t *testing.T) {
	ctx := context.Background()
	deny := mustCompile(t, Policy{Name: "deny", Module: module("package t.deny", `deny contains "no" if true`)})
	e := NewEngine(Options{Cache: NewDecisionCache(1 << 20)})
	e.Swap(NewSet(deny))
	r := Review{Kind: "Pod", Namespace: "team-a", Workload: toValue(t, gpuWorkload())}
	first := e.Evaluate(ctx, r)
	first.Results[0].Deny[0].Msg = "changed"
	first.Results[0].Deny = nil
	again := e.Evaluate(ctx, r)
	if len(again.Results) != 1 || len(again.Results[0].Deny) != 1 || again.Results[0].Deny[0].Msg != "no" {
		t.Errorf("the cached decision was changed through a copy: %+v", again)
	}
}

// The cache holds at most its bound, least recently used out first.
func TestDecisionCacheBound(t *testing.T) {
	ctx := context.Background()
	byName := mustCompile(t, Policy{Name: "by-name", Module: module(
		"package t.byname", `deny contains sprintf("name %s", [input.workload.name]) if true`)})
	const bound = 4 << 10
	cache := NewDecisionCache(bound)
	e := NewEngine(Options{Cache: cache})
	e.Swap(NewSet(byName))
	for i := range 200 {
		wl := gpuWorkload()
		wl["name"] = fmt.Sprintf("pod-%d", i)
		e.Evaluate(ctx, Review{Kind: "Pod", Namespace: "team-a", Workload: toValue(t, wl)})
		if st := cache.Stats(); st.Bytes > bound {
			t.Fatalf("after %d reviews the cache holds %d bytes, over its bound %d", i+1, st.Bytes, bound)
		}
	}
	st := cache.Stats()
	if st.Evictions == 0 || st.Entries == 0 {
		t.Errorf("stats %+v: want entries evicted and some kept", st)
	}
	// The most recent is kept, the first long gone.
	for name, wantHit := range map[string]bool{"pod-199": true, "pod-0": false} {
		before := cache.Stats().Hits
		wl := gpuWorkload()
		wl["name"] = name
		e.Evaluate(ctx, Review{Kind: "Pod", Namespace: "team-a", Workload: toValue(t, wl)})
		if hit := cache.Stats().Hits > before; hit != wantHit {
			t.Errorf("%s: hit %v, want %v", name, hit, wantHit)
		}
	}
}

// FuzzDecisionCache judges random variants of a GPU Deployment with and
// without the cache and requires the same decision.
func FuzzDecisionCache(f *testing.F) {
	for _, s := range []uint64{0, 1, 42, 96} {
		f.Add(s, s)
	}
	ctx := context.Background()
	cs, errs := LoadDir(ctx, benchDir)
	if len(errs) > 0 {
		f.Fatal(errs)
	}
	set := NewSet(withoutObjects(cs)...)
	plain := NewEngine(Options{})
	plain.Swap(set)
	cached := NewEngine(Options{Cache: NewDecisionCache(64 << 10)})
	cached.Swap(set)
	f.Fuzz(func(t *testing.T, a, b uint64) {
		for _, s := range []uint64{a, b, a} {
			wl, ns := variant(s)
			r := Review{Kind: "Deployment", Namespace: ns, Workload: toValue(t, wl)}
			if diff := cmp.Diff(plain.Evaluate(ctx, r), cached.Evaluate(ctx, r), sameDecision...); diff != "" {
				t.Fatalf("seed %d: cached decision differs (-evaluated +cached):\n%s", s, diff)
			}
		}
	})
}

// BenchmarkDecisionCache compares, in one run, evaluating the 7 bench
// policies that do not read the raw object (first reviews, the cache off)
// with answering a repeat from the cache; both convert the view per
// review, as the webhook does.
func BenchmarkDecisionCache(b *testing.B) {
	ctx := context.Background()
	wl := gpuWorkload()
	for _, bc := range []struct {
		name  string
		cache *DecisionCache
	}{{"evaluated", nil}, {"repeat-from-cache", NewDecisionCache(1 << 20)}} {
		b.Run(bc.name, func(b *testing.B) {
			e := NewEngine(Options{Cache: bc.cache})
			e.Swap(NewSet(loadBench(b, false)...))
			e.Set().Prepare(ctx)
			e.Evaluate(ctx, benchReview(b, wl))
			b.ReportAllocs()
			for b.Loop() {
				if d := e.Evaluate(ctx, benchReview(b, wl)); len(d.Results) != e.Set().Len() {
					b.Fatalf("%d results", len(d.Results))
				}
			}
			if bc.cache != nil && bc.cache.Stats().Hits == 0 {
				b.Fatal("no review was answered from the cache")
			}
		})
	}
}

// A name read only to write a denial's message costs nothing to the
// reviews that are not denied: the Pods of a Deployment, named apart, are
// one evaluation and then hits; denied ones are cached per name, with
// their own name in the message. A policy that decides by the name is
// never answered for another name.
func TestDecisionCacheGuardedReads(t *testing.T) {
	ctx := context.Background()
	ownerless := mustCompile(t, Policy{Name: "ownerless", Module: module(
		"package t.ownerless",
		`deny contains sprintf("pod %s has no owner", [input.workload.name]) if input.workload.owner == ""`)})
	evil := mustCompile(t, Policy{Name: "evil", Module: module(
		"package t.evil",
		`deny contains "evil name" if input.workload.name == "evil"`)})
	review := func(name, owner string) Review {
		wl := gpuWorkload()
		wl["name"], wl["owner"] = name, owner
		return Review{Kind: "Pod", Namespace: "team-a", Workload: toValue(t, wl)}
	}
	msgs := Decision.Denials

	t.Run("message only", func(t *testing.T) {
		cache := NewDecisionCache(1 << 20)
		e := NewEngine(Options{Cache: cache})
		e.Swap(NewSet(ownerless))
		for i := range 10 {
			if got := msgs(e.Evaluate(ctx, review(fmt.Sprintf("llama-%d", i), "alice"))); len(got) != 0 {
				t.Fatalf("owned pod denied: %v", got)
			}
		}
		if st := cache.Stats(); st.Misses != 1 || st.Hits != 9 {
			t.Errorf("stats %+v: want the first pod evaluated and the 9 others answered from the cache", st)
		}
		for _, n := range []string{"a", "b", "a"} {
			want := []string{"[ownerless] pod " + n + " has no owner"}
			if got := msgs(e.Evaluate(ctx, review(n, ""))); !cmp.Equal(got, want) {
				t.Errorf("ownerless %s: %v, want %v", n, got, want)
			}
		}
		if st := cache.Stats(); st.Misses != 3 || st.Hits != 10 {
			t.Errorf("stats %+v: want denials cached per name", st)
		}
	})

	t.Run("decided by the name", func(t *testing.T) {
		cache := NewDecisionCache(1 << 20)
		e := NewEngine(Options{Cache: cache})
		e.Swap(NewSet(evil, ownerless))
		for _, c := range []struct {
			name string
			want []string
		}{{"good", nil}, {"evil", []string{"[evil] evil name"}}, {"fine", nil}, {"evil", []string{"[evil] evil name"}}} {
			if got := msgs(e.Evaluate(ctx, review(c.name, "alice"))); !cmp.Equal(got, c.want) {
				t.Errorf("%s: %v, want %v", c.name, got, c.want)
			}
		}
		if st := cache.Stats(); st.Hits != 1 {
			t.Errorf("stats %+v: want only the second evil answered from the cache", st)
		}
	})
}

// Which modules read the name only through refs that can be guarded; a
// Set with one that cannot keeps the name in every key.
func TestGuardedReads(t *testing.T) {
	for name, c := range map[string]struct {
		body    string
		guarded bool
	}{
		"in a message":     {`deny contains sprintf("%s", [input.workload.name]) if true`, true},
		"in a condition":   {`deny contains "x" if startswith(input.workload.name, "x")`, true},
		"in an else":       {"n := \"pod\" if { input.workload.kind == \"Pod\" } else := input.workload.name\ndeny contains n if true", true},
		"as an object key": {`deny contains "x" if input.workload.labels[input.workload.name] == "x"`, true},
		"whole workload":   {`deny contains "x" if input.workload[k] == "x"`, false},
		"longer ref":       {`deny contains "x" if input.workload.name[0] == "x"`, false},
		"with target":      {"p if input.workload.name == \"x\"\ndeny contains \"x\" if p with input.workload.name as \"x\"", false},
		"negated":          {`deny contains "x" if not startswith(input.workload.name, "x")`, false},
		"bare input":       {`deny contains "x" if is_object(input)`, false},
	} {
		t.Run(name, func(t *testing.T) {
			p := mustCompile(t, Policy{Name: "p", Module: module("package t.p", c.body)})
			if got := len(p.guarded) == 1; got != c.guarded {
				t.Errorf("guarded %v, want %v", p.guarded, c.guarded)
			}
			other := mustCompile(t, Policy{Name: "q", Module: module("package t.q", `deny contains input.workload.name if true`)})
			if got := len(NewSet(p, other).guarded) == 1; got != c.guarded {
				t.Errorf("set with a guarded policy: guarded %v, want %v", NewSet(p, other).guarded, c.guarded)
			}
		})
	}
	if _, err := Compile(context.Background(), Policy{Name: "own", Module: module("package t.own",
		`deny contains modelgate_internal.read("name", input.workload.name) if true`)}); err == nil {
		t.Error("a module calling modelgate's own builtin compiled")
	}
}

// Should two reviews of one base key ever disagree on reading the name,
// the base becomes a mark: no decision made with one name is given for
// another.
func TestDecisionCacheBaseDisagreement(t *testing.T) {
	set := NewSet()
	c := NewDecisionCache(1 << 20)
	d := func(msg string) Decision {
		return Decision{Results: []Result{{Policy: "p", Deny: []Violation{{Msg: msg}}}}}
	}
	a := cacheKey{base: [32]byte{1}, full: [32]byte{2}}
	b := cacheKey{base: a.base, full: [32]byte{3}}
	c.put(set, d("no name read"), false, a)
	c.put(set, d("name b read"), true, b)
	if got, _, ok := c.get(set, a); ok {
		t.Errorf("the base's decision outlived the mark: %+v", got)
	}
	if got, _, ok := c.get(set, b); !ok || got.Results[0].Deny[0].Msg != "name b read" {
		t.Errorf("name b: %+v %v", got, ok)
	}
	c.put(set, d("no name read"), false, a)
	if got, _, ok := c.get(set, cacheKey{base: a.base, full: [32]byte{9}}); ok {
		t.Errorf("a third name got a decision through a marked base: %+v", got)
	}
	if st := c.Stats(); st.Bytes <= 0 || st.Entries != 3 {
		t.Errorf("stats %+v: want the mark and the two names' decisions", st)
	}
}

// The rewrite of guarded reads changes no answer: each module, rewritten
// and compiled by Compile, denies exactly what OPA denies with the module
// as written, for names that match, do not match, are empty or absent.
func TestGuardedReadsKeepTheAnswers(t *testing.T) {
	ctx := context.Background()
	for _, body := range []string{
		`deny contains sprintf("pod %s", [input.workload.name]) if input.workload.owner == ""`,
		`deny contains "unnamed" if not input.workload.name`, // not guarded: the same module as written
		`deny contains "n" if input.workload.name == "n"`,
		"q := data.t.g.foo\ndeny contains \"with\" if { q == \"n\" with data.t.g.foo as input.workload.name }",
		`deny contains k if { some k, v in {input.workload.name: 1}; v == 1 }`,
		"f(a) := upper(a)\ndeny contains f(input.workload.name) if true",
		`deny contains "same" if input.workload.name == input.workload.kind`,
		`deny contains c.name if { some c in input.workload.containers; c.name == input.workload.name }`,
		"m := {\"a\": input.workload.name}\ndeny contains m.a if startswith(m.a, \"n\")",
		`deny contains "empty" if input.workload.name == ""`,
		`deny contains "every" if every c in input.workload.containers { c.name != input.workload.name }`,
	} {
		module := "package t.g\n" + body + "\n"
		c := mustCompile(t, Policy{Name: "g", Module: module})
		if len(c.guarded) != 1 && !strings.Contains(body, "not ") {
			t.Errorf("%q: not guarded", body)
		}
		e := NewEngine(Options{})
		e.Swap(NewSet(c))
		plain, err := rego.New(rego.Query("data.t.g.deny"), rego.Module("g.rego", module)).PrepareForEval(ctx)
		if err != nil {
			t.Fatalf("%q: %v", body, err)
		}
		for _, name := range []any{"n", "nx", "", "Pod", "vllm", nil} {
			wl := gpuWorkload()
			wl["owner"], wl["kind"] = "", "Pod"
			if name == nil {
				delete(wl, "name")
			} else {
				wl["name"] = name
			}
			got := e.Evaluate(ctx, Review{Kind: "Pod", Namespace: "team-a", Workload: toValue(t, wl)}).Denials()
			rs, err := plain.Eval(ctx, rego.EvalInput(map[string]any{"workload": wl, "parameters": map[string]any{}}))
			if err != nil || len(rs) != 1 {
				t.Fatalf("%q, name %v: %v (%d results)", body, name, err, len(rs))
			}
			var want []string
			for _, m := range rs[0].Expressions[0].Value.([]any) {
				want = append(want, "[g] "+m.(string))
			}
			slices.Sort(want)
			slices.Sort(got)
			if !slices.Equal(got, want) {
				t.Errorf("%q, name %v: rewritten %q, as written %q", body, name, got, want)
			}
		}
	}
}

// The cache's bound counts what its decisions hold: a policy that copies
// the workload's labels into its details is measured against the live heap
// the cache keeps (issue 42: the estimate was twice the details' JSON, a
// fraction of their maps' heap, so such a cache outgrew its bound).
func TestDecisionSizeDetails(t *testing.T) {
	for name, label := range map[string]string{"short labels": "l%d", "long labels": "example.com/label-%d"} {
		t.Run(name, func(t *testing.T) { measureDetails(t, label) })
	}
}

func measureDetails(t *testing.T, label string) {
	const n = 1500
	ctx := context.Background()
	c := mustCompile(t, Policy{Name: "copies", Module: module("package copies", "",
		`deny contains {"msg": "labelled", "details": {"labels": input.workload.labels, "names": [c.name | some c in input.workload.containers]}} if true`)})
	views := make([]*ObjectView, n)
	for i := range views {
		wl := gpuWorkload()
		labels := map[string]any{}
		for j := range 40 {
			labels[fmt.Sprintf(label, j)] = fmt.Sprintf("v%d-%d", i, j)
		}
		wl["labels"] = labels
		views[i] = NewObjectView(toValue(t, wl).(ast.Object))
	}
	cache := NewDecisionCache(1 << 40)
	e := NewEngine(Options{Cache: cache})
	e.Swap(NewSet(c))
	e.Evaluate(ctx, Review{Kind: "Pod", Namespace: "a", View: views[0]})
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for _, v := range views[1:] {
		e.Evaluate(ctx, Review{Kind: "Pod", Namespace: "a", View: v})
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	st := cache.Stats()
	if st.Entries != n {
		t.Fatalf("%d entries, want %d", st.Entries, n)
	}
	heap := float64(after.HeapAlloc-before.HeapAlloc) / float64(n-1)
	estimated := float64(st.Bytes) / float64(n)
	t.Logf("per entry: live heap %.0f B, estimated %.0f B", heap, estimated)
	if estimated < 0.9*heap || estimated > 1.6*heap {
		t.Errorf("estimated %.0f B per entry against a live heap of %.0f B: want within 0.9x to 1.6x", estimated, heap)
	}
	runtime.KeepAlive(views)
	runtime.KeepAlive(e)
}
