package policysource

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	policyv1 "github.com/modelgate/modelgate/api/policy/v1"
	"github.com/modelgate/modelgate/policies"
	"github.com/modelgate/modelgate/validators"
)

// TestInForce: the start's list never puts back a policy the reconciler
// deleted or replaces a newer generation; the reconciler's own decisions
// always apply; a generation in force is not compiled again.
func TestInForce(t *testing.T) {
	wp := func(uid string, gen int64, msg string) *policyv1.WorkloadPolicy {
		p := &policyv1.WorkloadPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p", UID: types.UID(uid), Generation: gen}}
		p.Spec.Rego = "package p\n\ndeny contains \"" + msg + "\" if true\n"
		return p
	}
	compile := func(p *policyv1.WorkloadPolicy) *policies.Compiled {
		c, err := validators.CompileWorkloadPolicy(context.Background(), p)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	e := policies.NewEngine(policies.Options{})
	r := &Reconciler{Store: policies.NewStore(e)}
	says := func() []string {
		return e.Evaluate(context.Background(), policies.Review{Kind: "Pod"}).Denials()
	}
	want := func(step string, msgs ...string) {
		t.Helper()
		got := says()
		if len(got) != len(msgs) || len(msgs) == 1 && got[0] != "[p] "+msgs[0] {
			t.Fatalf("%s: the engine says %q, want %q", step, got, msgs)
		}
	}

	gen2 := wp("a", 2, "gen 2")
	r.compiledNow(gen2, compile(gen2), false)
	if !r.isInForce(gen2) || r.isInForce(wp("a", 3, "")) || r.isInForce(wp("b", 2, "")) {
		t.Fatal("isInForce does not follow the UID and generation compiled")
	}
	gen1 := wp("a", 1, "gen 1")
	r.compiledNow(gen1, compile(gen1), true)
	want("an older generation from the list", "gen 2")

	r.dropped("p")
	want("deleted")
	r.compiledNow(gen2, compile(gen2), true)
	want("the list after a deletion")

	again := wp("b", 1, "recreated")
	r.compiledNow(again, compile(again), false)
	want("recreated, seen by the reconciler", "recreated")
}

// TestLoadAllAtOnce: the start's list is compiled side by side, each
// result at its policy's place, one that does not compile left out; the
// listed policies go into force together, in one Set, and the list still
// does not put back a newer generation the reconciler has.
func TestLoadAllAtOnce(t *testing.T) {
	wps := nPolicies(t, 24)
	broken := wps[5].DeepCopy()
	broken.Spec.Rego = "package broken\n\ndeny contains msg if {\n"
	wps[5] = broken
	cs := compileAll(context.Background(), wps)
	for i, c := range cs {
		switch {
		case i == 5 && c != nil:
			t.Error("a policy that does not compile was compiled")
		case i != 5 && (c == nil || c.Name() != wps[i].Name):
			t.Errorf("cs[%d] is %v, want %s compiled", i, c, wps[i].Name)
		}
	}

	e := policies.NewEngine(policies.Options{})
	r := &Reconciler{Store: policies.NewStore(e)}
	newer := wps[0].DeepCopy()
	newer.Generation = wps[0].Generation + 1
	nc, err := validators.CompileWorkloadPolicy(context.Background(), newer)
	if err != nil {
		t.Fatal(err)
	}
	r.compiledNow(newer, nc, false)
	before := e.Set()
	r.compiledAll(wps, cs, true)
	if e.Set() == before || e.Set().Len() != len(wps)-1 {
		t.Fatalf("%d policies in force, want %d", e.Set().Len(), len(wps)-1)
	}
	if !r.isInForce(newer) {
		t.Error("the list replaced a newer generation")
	}
}
