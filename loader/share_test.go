package loader_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/modelgate/modelgate/loader"
	"github.com/modelgate/modelgate/loader/loadertest"
)

// TestSharedDestination: Pods sharing a cache claim: one fetches, the
// others wait for its manifest, and the model is fetched exactly once.
func TestSharedDestination(t *testing.T) {
	files := model()
	srv := loadertest.NewServer(files)
	defer srv.Close()
	srv.SetRate(4 << 20) // per response: the load takes a while
	dest := t.TempDir()
	const pods = 4
	results := make([]*loader.Result, pods)
	errs := make([]error, pods)
	var wg sync.WaitGroup
	for i := range pods {
		wg.Go(func() {
			o := fastOptions(dest, "s3://bucket/model")
			o.Host = "pod-" + string(rune('a'+i))
			results[i], errs[i] = loader.Load(context.Background(), srv.Source(nil), o)
		})
	}
	wg.Wait()
	fetchers := 0
	for i := range pods {
		if errs[i] != nil {
			t.Fatalf("pod %d: %v", i, errs[i])
		}
		if !results[i].Waited && !results[i].CacheHit {
			fetchers++
		}
	}
	if fetchers != 1 {
		t.Errorf("%d loaders fetched, want 1", fetchers)
	}
	var total int64
	for _, c := range files {
		total += c.Size()
	}
	if srv.BytesServed() != total {
		t.Errorf("served %d bytes, want the model's %d exactly once", srv.BytesServed(), total)
	}
	if diff := cmp.Diff(want(files), sums(t, dest)); diff != "" {
		t.Errorf("files (-want +got):\n%s", diff)
	}
}

// TestTakeover: a holder that makes no progress is taken over; the same
// Pod's earlier loader (killed) at once.
func TestTakeover(t *testing.T) {
	tests := map[string]struct {
		host          string
		takeoverAfter time.Duration
	}{
		"another pod's holder, silent": {host: "other-pod", takeoverAfter: 300 * time.Millisecond},
		"this pod's earlier loader":    {host: "test-pod", takeoverAfter: time.Hour},
		"an unreadable holder, silent": {host: "", takeoverAfter: 300 * time.Millisecond},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			files := model()
			srv := loadertest.NewServer(files)
			defer srv.Close()
			dest := t.TempDir()
			if err := os.MkdirAll(filepath.Join(dest, loader.StateDir), 0o755); err != nil {
				t.Fatal(err)
			}
			b, _ := json.Marshal(map[string]any{"holder": tc.host + "-1234", "host": tc.host, "seq": 7, "progress": 1000, "phase": "fetching"})
			if tc.host == "" {
				b = []byte("{torn")
			}
			if err := os.WriteFile(filepath.Join(dest, loader.StateDir, "holder-00000003"), b, 0o644); err != nil {
				t.Fatal(err)
			}
			o := fastOptions(dest, "s3://bucket/model")
			o.TakeoverAfter = tc.takeoverAfter
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			res, err := loader.Load(ctx, srv.Source(nil), o)
			if err != nil {
				t.Fatal(err)
			}
			if res.Waited || res.CacheHit {
				t.Errorf("result = %+v, want this loader to fetch", res)
			}
			left, _ := filepath.Glob(filepath.Join(dest, loader.StateDir, "holder-*"))
			if len(left) != 0 {
				t.Errorf("holder files left after the load: %v", left)
			}
		})
	}
}

// TestLiveHolderIsNotTakenOver: a holder whose file keeps changing is
// waited for, however long it takes.
func TestLiveHolderIsNotTakenOver(t *testing.T) {
	srv := loadertest.NewServer(model())
	defer srv.Close()
	dest := t.TempDir()
	state := filepath.Join(dest, loader.StateDir)
	if err := os.MkdirAll(state, 0o755); err != nil {
		t.Fatal(err)
	}
	holder := filepath.Join(state, "holder-00000001")
	if err := os.WriteFile(holder, []byte(`{"holder":"live","host":"other"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for seq := 0; ; seq++ {
			b, _ := json.Marshal(map[string]any{"holder": "live", "host": "other", "seq": seq, "progress": seq * 1000})
			_ = os.WriteFile(holder, b, 0o644)
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	})
	o := fastOptions(dest, "s3://bucket/model")
	o.TakeoverAfter = 200 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	_, err := loader.Load(ctx, srv.Source(nil), o)
	close(stop)
	wg.Wait()
	if err == nil || srv.Requests() != 0 {
		t.Fatalf("load = %v with %d requests, want it to wait for the live holder until its deadline", err, srv.Requests())
	}
}
