package policysource

import (
	"context"
	"slices"
	"testing"

	policyv1 "github.com/modelgate/modelgate/api/policy/v1"
	"github.com/modelgate/modelgate/policies"
	"github.com/modelgate/modelgate/test/harnesses/builders"
	"github.com/modelgate/modelgate/validators"
)

// nPolicies is n copies of the library's sample policies, each of its own
// name.
func nPolicies(tb testing.TB, n int) []*policyv1.WorkloadPolicy {
	tb.Helper()
	lib, err := builders.SamplePolicies("../../config/samples/policies")
	if err != nil {
		tb.Fatal(err)
	}
	if len(lib) != 8 {
		tb.Fatalf("%d sample policies, want the library's 8", len(lib))
	}
	return builders.ManyPolicies(lib, n)
}

// startEngine is the engine of BenchmarkLoadPolicies: what a starting
// replica does before it is Ready is compile its policies and put them in
// force. The combined query is prepared after that, in the background:
// started on every iteration, those preparations would overlap the next
// iterations and the benchmarks run after this one, and count in their
// figures (allocations are the process's). With one query per policy,
// Swap starts none.
var startEngine = policies.Options{SeparateQueries: true}

// BenchmarkLoadPolicies is what a starting replica spends on 100
// WorkloadPolicies before it is ready: each compiled (parse, type-check,
// prepare its query) and the set swapped in. side-by-side is how it loads
// them (compileAll, one per CPU); one-by-one is the baseline. The rest of
// a cold start is the informers' sync with the API server.
func BenchmarkLoadPolicies(b *testing.B) {
	wps := nPolicies(b, 100)
	ctx := context.Background()
	b.Run("side-by-side", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			cs := compileAll(ctx, wps)
			if slices.Contains(cs, nil) {
				b.Fatal("a policy did not compile")
			}
			policies.NewEngine(startEngine).Swap(policies.NewSet(cs...))
		}
	})
	b.Run("one-by-one", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			cs := make([]*policies.Compiled, 0, len(wps))
			for _, wp := range wps {
				c, err := validators.CompileWorkloadPolicy(ctx, wp)
				if err != nil {
					b.Fatal(err)
				}
				cs = append(cs, c)
			}
			policies.NewEngine(startEngine).Swap(policies.NewSet(cs...))
		}
	})
}
