package webhook

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// testLimits are small limits the tests can fill.
func testLimits() Limits {
	return Limits{
		MaxRequestBytes:  64 << 10,
		MaxInFlightBytes: 100 << 10,
		QueueWait:        100 * time.Millisecond,
		ReadTimeout:      300 * time.Millisecond,
		WriteTimeout:     time.Second,
	}
}

// Issue 15, item 1: what the server spends on requests is bounded, whoever
// sends them.
func TestLimits(t *testing.T) {
	release := make(chan struct{})
	var mu sync.Mutex
	var bodyErrs []error
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, err := io.Copy(io.Discard, r.Body)
		mu.Lock()
		bodyErrs = append(bodyErrs, err)
		mu.Unlock()
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if r.Header.Get("X-Hold") != "" {
			<-release
		}
		w.WriteHeader(http.StatusOK)
	})
	srv := httptest.NewServer(NewLimiter(testLimits()).Wrap(handler))
	defer srv.Close()
	post := func(body []byte, hold bool) int {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, srv.URL, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if hold {
			req.Header.Set("X-Hold", "1")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("POST: %v", err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}

	t.Run("a body over the cap is refused unread", func(t *testing.T) {
		if got := post(make([]byte, 65<<10), false); got != http.StatusRequestEntityTooLarge {
			t.Errorf("status %d, want 413", got)
		}
	})

	t.Run("reviews past the in-flight budget wait, then are refused", func(t *testing.T) {
		var wg sync.WaitGroup
		codes := make([]int, 2)
		for i := range codes {
			wg.Go(func() { codes[i] = post(make([]byte, 40<<10), true) })
		}
		// Both holders are in (80 KiB of 100): a third 40 KiB review
		// finds no room within the queue wait.
		waitFor(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(bodyErrs) >= 2 })
		start := time.Now()
		if got := post(make([]byte, 40<<10), false); got != http.StatusTooManyRequests {
			t.Errorf("third review: status %d, want 429", got)
		}
		if d := time.Since(start); d < 100*time.Millisecond {
			t.Errorf("refused after %s, before the queue wait", d)
		}
		// A small review still fits (16 KiB counted).
		if got := post([]byte(`{}`), false); got != http.StatusOK {
			t.Errorf("small review: status %d, want 200", got)
		}
		close(release)
		wg.Wait()
		for i, c := range codes {
			if c != http.StatusOK {
				t.Errorf("holder %d: status %d", i, c)
			}
		}
		// Their room is back.
		if got := post(make([]byte, 40<<10), false); got != http.StatusOK {
			t.Errorf("after release: status %d, want 200", got)
		}
	})

	t.Run("a sender that trickles its body loses the connection at the read timeout", func(t *testing.T) {
		conn, err := net.Dial("tcp", strings.TrimPrefix(srv.URL, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		mu.Lock()
		called := len(bodyErrs)
		mu.Unlock()
		fmt.Fprintf(conn, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{")
		start := time.Now()
		resp, err := io.ReadAll(conn)
		if d := time.Since(start); d > 3*time.Second {
			t.Errorf("connection held %s", d)
		}
		if err == nil && !strings.Contains(string(resp), "400") {
			t.Errorf("answer %q, want a 400 or a closed connection", resp)
		}
		// The limiter receives the body: the handler never sees a partial one.
		mu.Lock()
		if len(bodyErrs) != called {
			t.Errorf("the handler was called with the trickled body (%v)", bodyErrs[len(bodyErrs)-1])
		}
		mu.Unlock()
		// Its room is back.
		if got := post(make([]byte, 60<<10), false); got != http.StatusOK {
			t.Errorf("after the timeout: status %d, want 200", got)
		}
	})

	t.Run("a body without a length is counted at the cap and cut there", func(t *testing.T) {
		req, err := http.NewRequest(http.MethodPost, srv.URL, io.MultiReader(bytes.NewReader(make([]byte, 80<<10))))
		if err != nil {
			t.Fatal(err)
		}
		req.ContentLength = -1 // chunked
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestEntityTooLarge {
			t.Errorf("status %d, want 413 (body cut at 64 KiB)", resp.StatusCode)
		}
	})
}

// TestTricklingBodiesHoldNoInFlightRoom is make soak's slow-bodies attack:
// senders that declare large bodies and trickle them used to hold the
// in-flight budget (counted at their Content-Length) for the whole read
// timeout, and every review behind them got 429. They now hold only
// reading room for what they sent.
func TestTricklingBodiesHoldNoInFlightRoom(t *testing.T) {
	l := testLimits()
	l.ReadTimeout = 5 * time.Second
	srv := httptest.NewServer(NewLimiter(l).Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.Copy(io.Discard, r.Body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
		}
	})))
	defer srv.Close()
	// Two senders declare 50 KiB each (100 KiB: the whole in-flight budget,
	// as they were counted before) and stop after 40 KiB.
	for range 2 {
		conn, err := net.Dial("tcp", strings.TrimPrefix(srv.URL, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		fmt.Fprintf(conn, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s", 50<<10, bytes.Repeat([]byte("a"), 40<<10))
	}
	time.Sleep(200 * time.Millisecond) // both are being received
	for _, size := range []int{2 << 10, 40 << 10} {
		start := time.Now()
		resp, err := http.Post(srv.URL, "application/json", bytes.NewReader(make([]byte, size))) //nolint:noctx // a test request.
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("a whole %d KiB review while two bodies trickle: status %d, want 200", size>>10, resp.StatusCode)
		}
		if d := time.Since(start); d >= l.QueueWait {
			t.Errorf("a whole %d KiB review waited %s for room", size>>10, d)
		}
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 5s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// BenchmarkLimiter is what the limiter adds to a review of an ordinary
// size (a 6 KB Deployment CREATE) and of a large one, against the bare
// handler in the same run; the handler reads the body as controller-
// runtime's does (io.ReadAll).
func BenchmarkLimiter(b *testing.B) {
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.ReadAll(r.Body); err != nil {
			b.Fatal(err)
		}
		w.WriteHeader(http.StatusOK)
	})
	limited := NewLimiter(DefaultLimits()).Wrap(handler)
	for _, size := range []int{6 << 10, 1 << 20} {
		body := bytes.Repeat([]byte("a"), size)
		for name, h := range map[string]http.Handler{"bare": handler, "limited": limited} {
			b.Run(fmt.Sprintf("%dKiB/%s", size>>10, name), func(b *testing.B) {
				b.ReportAllocs()
				b.SetBytes(int64(size))
				for b.Loop() {
					req := httptest.NewRequest(http.MethodPost, "/mutate", bytes.NewReader(body))
					h.ServeHTTP(httptest.NewRecorder(), req)
				}
			})
		}
	}
}
