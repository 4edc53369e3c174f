package decode

import (
	"errors"
	"os"
	"regexp"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestSteadyError: the decoder's message says "cannot" or "unable to" at
// random per process; ours always says "cannot", and unwraps.
func TestSteadyError(t *testing.T) {
	inner := errors.New("json: unable to unmarshal JSON string into Go []v1.Container within \"/spec/containers\"")
	err := steadyError{inner}
	if got, want := err.Error(), "json: cannot unmarshal JSON string into Go []v1.Container within \"/spec/containers\""; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if !errors.Is(err, inner) {
		t.Error("steadyError does not unwrap")
	}
	_, derr := Whole[metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}]([]byte(`{"spec":{"containers":"x"}}`))
	if derr == nil || !strings.Contains(derr.Error(), `json: cannot unmarshal JSON string into Go []v1.Container within "/spec/containers"`) {
		t.Errorf("decoding error %v: want the field and the steady verb", derr)
	}
}

// TestEasyjsonVersionsAgree: `make generate` builds the generator named for
// the version go.mod requires of easyjson's runtime.
func TestEasyjsonVersionsAgree(t *testing.T) {
	mk, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	mod, err := os.ReadFile("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	inMakefile := regexp.MustCompile(`(?m)^EASYJSON_VERSION \?= (v\S+)$`).FindSubmatch(mk)
	inGoMod := regexp.MustCompile(`(?m)^\s*github\.com/mailru/easyjson (v\S+)$`).FindSubmatch(mod)
	if inMakefile == nil || inGoMod == nil || string(inMakefile[1]) != string(inGoMod[1]) {
		t.Errorf("the Makefile's EASYJSON_VERSION is %q, go.mod requires %q", inMakefile, inGoMod)
	}
}
