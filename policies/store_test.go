package policies

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// denier returns a policy of the source and name that denies with msg.
func denier(t *testing.T, source, name, msg string) *Compiled {
	t.Helper()
	return mustCompile(t, Policy{Name: name, Source: source,
		Module: module("package p", "", fmt.Sprintf("deny contains %q if true", msg))})
}

func TestStore(t *testing.T) {
	e := NewEngine(Options{})
	s := NewStore(e)
	denials := func() []string { return e.Evaluate(context.Background(), Review{}).Denials() }
	steps := []struct {
		name   string
		change func() error
		want   []string
	}{
		{"empty", func() error { return nil }, nil},
		{"replace a source", func() error {
			return s.Replace("dir", []*Compiled{denier(t, "dir", "b", "dir b"), denier(t, "dir", "a", "dir a")})
		}, []string{"[a] dir a", "[b] dir b"}},
		{"same name in another source", func() error {
			s.Upsert(denier(t, "crd", "a", "crd a"))
			return nil
		}, []string{"[a] crd a", "[a] dir a", "[b] dir b"}},
		{"upsert replaces by source and name", func() error {
			s.Upsert(denier(t, "crd", "a", "crd a v2"))
			return nil
		}, []string{"[a] crd a v2", "[a] dir a", "[b] dir b"}},
		{"replace drops what is not listed", func() error {
			return s.Replace("dir", []*Compiled{denier(t, "dir", "c", "dir c")})
		}, []string{"[a] crd a v2", "[c] dir c"}},
		{"delete", func() error {
			s.Delete("crd", "a")
			return nil
		}, []string{"[c] dir c"}},
		{"delete of a missing policy changes nothing", func() error {
			s.Delete("crd", "a")
			s.Delete("nope", "c")
			return nil
		}, []string{"[c] dir c"}},
		{"replace with nothing empties the source", func() error {
			return s.Replace("dir", nil)
		}, nil},
	}
	for _, step := range steps {
		if err := step.change(); err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		if diff := cmp.Diff(step.want, denials()); diff != "" {
			t.Errorf("%s: denials (-want +got):\n%s", step.name, diff)
		}
	}
}

func TestStoreReplaceErrors(t *testing.T) {
	cases := map[string][]*Compiled{
		"wrong source":   {denier(t, "crd", "a", "x")},
		"duplicate name": {denier(t, "dir", "a", "x"), denier(t, "dir", "a", "y")},
	}
	for name, cs := range cases {
		t.Run(name, func(t *testing.T) {
			e := NewEngine(Options{})
			s := NewStore(e)
			if err := s.Replace("dir", []*Compiled{denier(t, "dir", "keep", "kept")}); err != nil {
				t.Fatal(err)
			}
			if err := s.Replace("dir", cs); err == nil {
				t.Error("Replace succeeded, want an error")
			}
			if diff := cmp.Diff([]string{"keep"}, e.Set().Names()); diff != "" {
				t.Errorf("names after a failed Replace (-want +got):\n%s", diff)
			}
		})
	}
}

// TestSwapIsAtomic evaluates while sets are swapped: every review must see
// exactly one whole set. Run it with -race.
func TestSwapIsAtomic(t *testing.T) {
	const policies = 4
	sets := make([]*Set, 2)
	want := make([][]string, 2)
	for v := range sets {
		var cs []*Compiled
		for i := range policies {
			name := fmt.Sprintf("p%d", i)
			msg := fmt.Sprintf("version %d", v)
			// Reading parameters, the object and the workload shares
			// their values between concurrent reviews.
			cs = append(cs, mustCompile(t, Policy{Name: name, Source: "test",
				Parameters: map[string]any{"kinds": []any{"Deployment"}, "v": v},
				Module: module("package p", "", fmt.Sprintf("deny contains %q if {", msg),
					"  input.object.kind in input.parameters.kinds",
					"  input.workload.labels.app == \"llama\"", "}"),
			}))
			want[v] = append(want[v], fmt.Sprintf("[%s] %s", name, msg))
		}
		sets[v] = NewSet(cs...)
	}
	e := NewEngine(Options{})
	e.Swap(sets[0])
	review := Review{Workload: toValue(t, gpuWorkload()), Object: []byte(`{"kind": "Deployment"}`)}

	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
				e.Swap(sets[i%2])
			}
		}
	})
	seen := [2]int{}
	var mu sync.Mutex
	var evals sync.WaitGroup
	for range 4 {
		evals.Go(func() {
			for range 200 {
				got := e.Evaluate(context.Background(), review).Denials()
				v := -1
				for i := range want {
					if cmp.Equal(want[i], got) {
						v = i
					}
				}
				if v < 0 {
					t.Errorf("review saw a mixed or partial set: %q", got)
					return
				}
				mu.Lock()
				seen[v]++
				mu.Unlock()
			}
		})
	}
	evals.Wait()
	close(stop)
	wg.Wait()
	t.Logf("reviews per set version: %v", seen)
}
