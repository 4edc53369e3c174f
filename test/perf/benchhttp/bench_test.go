package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"

	"github.com/modelgate/modelgate/internal/seal"
)

// testBodies is a new record key and the load's review bodies sealed with
// it, from this repository's samples.
func testBodies(t *testing.T) (key *seal.Key, mutate, validate []byte) {
	t.Helper()
	key, err := seal.New(seal.Generate())
	if err != nil {
		t.Fatal(err)
	}
	if mutate, validate, err = bodies(filepath.Join("..", "..", ".."), key); err != nil {
		t.Fatal(err)
	}
	return key, mutate, validate
}

// TestBodies: the load's reviews are what the table says: the vLLM
// Deployment as sent, and the same Deployment injected (the loader and
// the record) for /validate, both CREATE reviews of the team namespace.
func TestBodies(t *testing.T) {
	_, mutate, validate := testBodies(t)
	for name, body := range map[string][]byte{"mutate": mutate, "validate": validate} {
		var ar admissionv1.AdmissionReview
		if err := json.Unmarshal(body, &ar); err != nil || ar.Request == nil {
			t.Fatalf("%s: not a review: %v", name, err)
		}
		if ar.APIVersion != "admission.k8s.io/v1" || ar.Request.Operation != admissionv1.Create || ar.Request.Namespace != teamNamespace {
			t.Errorf("%s: %s %s in %q", name, ar.APIVersion, ar.Request.Operation, ar.Request.Namespace)
		}
		injected := bytes.Contains(ar.Request.Object.Raw, []byte("model-loader"))
		if injected != (name == "validate") {
			t.Errorf("%s: the object carries the loader: %v", name, injected)
		}
	}
}

// TestFloorAnswer: the answering floor sends /mutate's answer to the load's
// review (a JSON patch that injects the loader) under the review's UID,
// and the plain floor a bare allowed.
func TestFloorAnswer(t *testing.T) {
	key, mutate, _ := testBodies(t)
	raw, err := mutateAnswer(mutate, key)
	if err != nil {
		t.Fatal(err)
	}
	answer := &admissionv1.AdmissionResponse{}
	if err := json.Unmarshal(raw, answer); err != nil {
		t.Fatal(err)
	}
	for name, h := range map[string]http.HandlerFunc{"floor": floorHandler(nil), "answering floor": floorHandler(answer)} {
		rec := httptest.NewRecorder()
		h(rec, httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(mutate)))
		var got admissionv1.AdmissionReview
		if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil || got.Response == nil {
			t.Fatalf("%s: %d %s: %v", name, rec.Code, rec.Body, err)
		}
		if got.Response.UID != "705ab4f5-6393-11e8-b7cc-42010a800002" || !got.Response.Allowed {
			t.Errorf("%s: uid %q allowed %v", name, got.Response.UID, got.Response.Allowed)
		}
		patched := bytes.Contains(got.Response.Patch, []byte("model-loader")) && got.Response.PatchType != nil
		if patched != (name == "answering floor") {
			t.Errorf("%s: answers with the loader's patch: %v (%d bytes)", name, patched, len(got.Response.Patch))
		}
	}
}

func TestResult(t *testing.T) {
	r := result{requests: 100, elapsed: 2 * time.Second}
	for i := range 100 {
		r.latencies = append(r.latencies, time.Duration(i+1)*time.Millisecond)
	}
	if r.rps() != 50 || r.quantile(0.5) != 50*time.Millisecond || r.quantile(0.99) != 99*time.Millisecond {
		t.Errorf("rps %v p50 %v p99 %v", r.rps(), r.quantile(0.5), r.quantile(0.99))
	}
	if (result{}).quantile(0.99) != 0 {
		t.Error("quantile of nothing is not 0")
	}
}

func TestVmHWM(t *testing.T) {
	status := []byte("Name:\tbench-http\nVmPeak:\t 1300000 kB\nVmHWM:\t   90112 kB\nVmRSS:\t   80000 kB\n")
	if got := vmHWM(status); got != 90112<<10 {
		t.Errorf("VmHWM %d bytes, want %d", got, 90112<<10)
	}
	if got := vmHWM([]byte("Name:\tx\n")); got != 0 {
		t.Errorf("no VmHWM: %d, want 0", got)
	}
}
