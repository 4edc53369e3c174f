package webhook

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
)

// TestDrainClosesConnections checks, through a real HTTP server, that
// answers keep their connection alive until the drain starts and close it
// after, refusals included, and that readiness fails from then on.
func TestDrainClosesConnections(t *testing.T) {
	d := &drain{period: time.Minute}
	lm := NewLimiter(Limits{MaxRequestBytes: 10, MaxInFlightBytes: minReviewBytes, QueueWait: time.Millisecond,
		ReadTimeout: time.Second, WriteTimeout: time.Second})
	srv := httptest.NewServer(d.wrap(lm.Wrap(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "ok")
	}))))
	defer srv.Close()
	post := func(body string) (int, bool) {
		t.Helper()
		resp, err := srv.Client().Post(srv.URL, "application/json", strings.NewReader(body)) //nolint:noctx // a test request.
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, resp.Close
	}
	if code, closed := post("{}"); code != http.StatusOK || closed {
		t.Errorf("before the drain: %d, connection closed %v; want 200 kept alive", code, closed)
	}
	if err := d.check(nil); err != nil {
		t.Errorf("readiness before the drain: %v", err)
	}
	d.draining.Store(true)
	if code, closed := post("{}"); code != http.StatusOK || !closed {
		t.Errorf("draining: %d, connection closed %v; want 200 and Connection: close", code, closed)
	}
	if code, closed := post("a body over ten bytes"); code != http.StatusRequestEntityTooLarge || !closed {
		t.Errorf("draining, a refusal: %d, connection closed %v; want 413 and Connection: close", code, closed)
	}
	if err := d.check(nil); !errors.Is(err, errDraining) {
		t.Errorf("readiness while draining: %v, want %v", err, errDraining)
	}
}

// TestDrainAfter checks the manager's context: it outlives the signal by
// the drain period, and the drain starts with the signal.
func TestDrainAfter(t *testing.T) {
	for _, period := range []time.Duration{0, 300 * time.Millisecond} {
		d := &drain{period: period}
		parent, stop := context.WithCancel(context.Background())
		inner, cancel := d.after(parent, logr.Discard())
		if d.draining.Load() || inner.Err() != nil {
			t.Fatalf("period %s: draining or stopped before the signal", period)
		}
		stopped := time.Now()
		stop()
		<-inner.Done()
		if took := time.Since(stopped); took < period {
			t.Errorf("period %s: the manager's context ended %s after the signal", period, took)
		}
		if !d.draining.Load() {
			t.Errorf("period %s: not draining after the signal", period)
		}
		cancel()
	}
	// Cancelled by its owner (the manager returned), the goroutine ends
	// without a signal.
	d := &drain{period: time.Hour}
	_, cancel := d.after(context.Background(), logr.Discard())
	cancel()
}
