package main

import (
	"os"
	"slices"
	"testing"
)

// The Configuration's defaults fill only what the Pod did not set.
func TestApplyEnvDefaults(t *testing.T) {
	t.Setenv("HF_ENDPOINT", "https://mirror.team.example")
	t.Setenv("MODELGATE_DEFAULT_HF_ENDPOINT", "https://mirror.cluster.example")
	t.Setenv("MODELGATE_DEFAULT_AWS_REGION", "eu-west-1")
	t.Setenv("MODELGATE_DEFAULT_", "ignored")
	os.Unsetenv("AWS_REGION")
	t.Cleanup(func() { os.Unsetenv("AWS_REGION") })

	set := applyEnvDefaults()
	if !slices.Equal(set, []string{"AWS_REGION"}) {
		t.Errorf("set %v, want [AWS_REGION]", set)
	}
	if got := os.Getenv("HF_ENDPOINT"); got != "https://mirror.team.example" {
		t.Errorf("HF_ENDPOINT = %q: the Pod's own value must win", got)
	}
	if got := os.Getenv("AWS_REGION"); got != "eu-west-1" {
		t.Errorf("AWS_REGION = %q, want the default", got)
	}
}
