package policies

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// FuzzCompile feeds malformed modules to Compile: it must never panic, an
// error must be usable, and a compiled policy must evaluate without
// panicking.
func FuzzCompile(f *testing.F) {
	for _, m := range []string{
		denyAB, warnOnly, allowAll, objectMsgs, numberMsg, objNoMsg, objBadMsg, readsObject, ownerRego, maxGPUsRego,
		"", "package", "package p", "package p\n\ndeny contains", "package p\n\ndeny := {\"a\"}\n",
		"package p\n\ndeny[msg] {\n  msg := \"a\"\n}\n", "package p\nimport input.object as o\nwarn contains o.kind if o\n",
		"package p\n\ndeny contains msg if {\n  msg := 1 + \"a\"\n}\n", "package p\n\ndeny contains x if x := input[_]\n",
		"package p.q[\"r\"]\n\ndefault deny := set()\n", "package p\n\ndeny contains \"\\u0000\" if true\n",
		"package p\n\nwarn contains sprintf(\"%v\", [input]) if true\nwarn contains input.parameters if true\n",
	} {
		f.Add(m)
	}
	files, _ := filepath.Glob(filepath.Join(benchDir, "*.rego"))
	for _, file := range files {
		src, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(src))
	}
	e := NewEngine(Options{Timeout: 100 * time.Millisecond})
	review := Review{
		Kind: "Deployment", Namespace: "team-a", Workload: toValue(f, gpuWorkload()),
		Object: []byte(`{"kind": "Deployment", "spec": {"replicas": 2}}`),
	}
	f.Fuzz(func(t *testing.T, src string) {
		c, err := Compile(context.Background(), Policy{Name: "fuzz", Module: src, Parameters: map[string]any{"max": 1}})
		if err != nil {
			var ce *CompileError
			if !errors.As(err, &ce) {
				t.Fatalf("Compile error %v (%T) is not a *CompileError", err, err)
			}
			if len(ce.Problems) == 0 || ce.Error() == "" {
				t.Fatalf("CompileError without problems: %#v", ce)
			}
			return
		}
		if c == nil || c.Name() != "fuzz" || len(c.rules) == 0 {
			t.Fatalf("Compile gave no error and an unusable policy: %#v", c)
		}
		e.Swap(NewSet(c))
		d := e.Evaluate(context.Background(), review)
		if len(d.Results) != 1 {
			t.Fatalf("got %d results, want 1", len(d.Results))
		}
		if err := d.Results[0].Err; errors.Is(err, errPanic) {
			t.Fatalf("evaluation panicked: %v", err)
		}
	})
}
