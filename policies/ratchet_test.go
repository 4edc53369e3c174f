package policies

import (
	"context"
	"slices"
	"testing"
)

// An UPDATE keeps a violation the old object had (same policy, same
// message) as a warning; a new violation, one
// that got worse, and any under a policy that does not ratchet still deny.
func TestRatchet(t *testing.T) {
	maxGPUs := module(
		"package modelgate",
		"deny contains sprintf(\"%s asks for %d GPUs, more than %d\", [input.workload.name, input.workload.gpu.count, input.parameters.max]) if {",
		"	input.workload.gpu.count > input.parameters.max",
		"}",
	)
	noLatest := module(
		"package modelgate",
		"deny contains \"no :latest images\" if {",
		"	some c in input.workload.containers",
		"	endswith(c.image, \":latest\")",
		"}",
	)
	e := NewEngine(Options{})
	e.Swap(NewSet(
		mustCompile(t, Policy{Name: "max-gpus", Source: "test", Module: maxGPUs, Parameters: map[string]any{"max": 4}}),
		mustCompile(t, Policy{Name: "no-latest", Source: "test", Module: noLatest}),
		mustCompile(t, Policy{Name: "strict-gpus", Source: "test", Module: maxGPUs, Parameters: map[string]any{"max": 4}, NoRatchet: true}),
	))
	eval := func(name string, gpus int, image string) Decision {
		w := gpuWorkload()
		w["name"] = name
		w["gpu"].(map[string]any)["count"] = gpus
		w["containers"].([]any)[0].(map[string]any)["image"] = image
		return e.Evaluate(context.Background(), Review{Workload: toValue(t, w)})
	}

	old := eval("gpu8", 8, "vllm/vllm-openai:v0.6.0")
	if !old.Ratchetable() {
		t.Fatal("the old object's decision: want a ratchetable denial")
	}
	if got := old.RatchetSet(e.Set()).Names(); !slices.Equal(got, []string{"max-gpus"}) {
		t.Errorf("RatchetSet: %v, want [max-gpus] (no-latest did not deny, strict-gpus does not ratchet)", got)
	}

	// A label changed: the same 8 GPUs.
	d := eval("gpu8", 8, "vllm/vllm-openai:v0.6.0")
	if n := d.Ratchet(old); n != 1 {
		t.Errorf("lifted %d denials, want 1 (max-gpus; strict-gpus does not ratchet)", n)
	}
	if got, want := d.Denials(), []string{"[strict-gpus] gpu8 asks for 8 GPUs, more than 4"}; !slices.Equal(got, want) {
		t.Errorf("denials %q, want %q", got, want)
	}
	wantWarn := "[max-gpus] existing violation, not introduced by this update: gpu8 asks for 8 GPUs, more than 4"
	if got := d.Warnings(); !slices.Contains(got, wantWarn) {
		t.Errorf("warnings %q, want %q among them", got, wantWarn)
	}
	for _, r := range d.Results {
		if r.Policy == "max-gpus" && r.Decision() != "ratcheted" {
			t.Errorf("max-gpus: Decision() = %q, want ratcheted", r.Decision())
		}
	}

	// Messages are compared as written: the same message of two policies
	// has two keys.
	if violationKey("test", "max-gpus", "m") == violationKey("test", "other", "m") {
		t.Error("the same message of two policies has one key")
	}
	if violationKey("test", "max-gpus", "m") == violationKey("directory", "max-gpus", "m") {
		t.Error("the same message of two sources' policies has one key")
	}

	// Worse (16 GPUs: another message) and a new violation: both deny.
	d = eval("gpu8", 16, "vllm/vllm-openai:latest")
	if n := d.Ratchet(old); n != 0 {
		t.Errorf("lifted %d denials of new violations", n)
	}
	want := []string{
		"[max-gpus] gpu8 asks for 16 GPUs, more than 4",
		"[no-latest] no :latest images",
		"[strict-gpus] gpu8 asks for 16 GPUs, more than 4",
	}
	if got := d.Denials(); !slices.Equal(got, want) {
		t.Errorf("denials %q, want %q", got, want)
	}

	// Nothing to lift: a decision without denials is not ratchetable.
	if eval("small", 1, "vllm/vllm-openai:v0.6.0").Ratchetable() {
		t.Error("an allowed decision is ratchetable")
	}
}

// A new violation whose message differs from an old one only where the
// object's name appears is new (issue 42): Deployment llama has a
// privileged GPU container vllm, and the UPDATE adds a second one named
// vllmllama. Were the name left out of the key, "vllmllama" would read as
// "vllm" and the new violation would pass as the old.
func TestRatchetKeepsTheName(t *testing.T) {
	noPriv := module(
		"package modelgate",
		"deny contains sprintf(\"%s: privileged GPU container %s\", [input.workload.name, c.name]) if {",
		"	some c in input.workload.containers",
		"	c.privileged",
		"	c.gpus > 0",
		"}",
	)
	e := NewEngine(Options{})
	e.Swap(NewSet(mustCompile(t, Policy{Name: "no-privileged-gpu", Source: "test", Module: noPriv})))
	eval := func(containers ...string) Decision {
		w := gpuWorkload()
		w["name"] = "llama"
		var cs []any
		for _, name := range containers {
			cs = append(cs, map[string]any{"name": name, "privileged": true, "gpus": 1})
		}
		w["containers"] = cs
		return e.Evaluate(context.Background(), Review{Workload: toValue(t, w)})
	}
	old := eval("vllm")
	d := eval("vllm", "vllmllama")
	if n := d.Ratchet(old); n != 1 {
		t.Errorf("lifted %d denials, want 1 (the existing vllm)", n)
	}
	want := []string{"[no-privileged-gpu] llama: privileged GPU container vllmllama"}
	if got := d.Denials(); !slices.Equal(got, want) {
		t.Errorf("denials %q, want %q", got, want)
	}
}
