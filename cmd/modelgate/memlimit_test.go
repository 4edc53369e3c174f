package main

import (
	"math"
	"runtime/debug"
	"testing"
)

func TestSetMemoryLimit(t *testing.T) {
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(-1))
	env := func(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }

	limit, _, err := setMemoryLimit(env(map[string]string{memoryLimitEnv: "268435456"}))
	if err != nil || limit != 241591910 || debug.SetMemoryLimit(-1) != 241591910 {
		t.Errorf("256Mi container: limit %d (runtime %d), error %v; want 90%%, 241591910", limit, debug.SetMemoryLimit(-1), err)
	}
	debug.SetMemoryLimit(math.MaxInt64)
	if limit, from, err := setMemoryLimit(env(map[string]string{"GOMEMLIMIT": "100MiB", memoryLimitEnv: "268435456"})); err != nil ||
		limit != math.MaxInt64 || from != "GOMEMLIMIT=100MiB" {
		t.Errorf("GOMEMLIMIT set: limit %d from %q, error %v; want the runtime's own, untouched", limit, from, err)
	}
	if limit, _, err := setMemoryLimit(env(nil)); err != nil || limit != 0 {
		t.Errorf("nothing set: limit %d, error %v", limit, err)
	}
	if _, _, err := setMemoryLimit(env(map[string]string{memoryLimitEnv: "256Mi"})); err == nil {
		t.Error("a quantity that is not bytes was accepted")
	}
}
