package loader_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/modelgate/modelgate/loader"
	"github.com/modelgate/modelgate/loader/loadertest"
)

// The child side of TestKillAndResume: a load in its own process, so it
// can be SIGKILLed.
const (
	childURL    = "LOADERTEST_CHILD_URL"
	childDest   = "LOADERTEST_CHILD_DEST"
	childDigest = "LOADERTEST_CHILD_DIGEST"
)

// Options of the killed loads: small parts and frequent checkpoints, so
// that a kill every few hundred milliseconds still makes progress.
const (
	killConcurrency = 4
	killPartSize    = 512 << 10
	killCkptBytes   = 1 << 20
	killCkptEvery   = 50 * time.Millisecond
	// killRate is the server's rate per response: with four in flight the
	// load takes several seconds, so the kills land mid-load.
	killRate = 1500 << 10
)

func TestMain(m *testing.M) {
	if url := os.Getenv(childURL); url != "" {
		os.Exit(child(url, os.Getenv(childDest)))
	}
	os.Exit(m.Run())
}

func child(url, dest string) int {
	remote := loadertest.Remote(url)
	var srv loader.Source = remote
	switch d := loader.Algorithm(os.Getenv(childDigest)); d {
	case compositeMD5:
		srv = compositeSource{Source: remote, files: killFiles(), partSize: killPartSize * 3 / 2}
	default:
		remote.Digest = d
	}
	o := loader.Options{Dest: dest, URI: "https://x/model", Concurrency: killConcurrency, PartSize: killPartSize,
		CheckpointBytes: killCkptBytes, CheckpointEvery: killCkptEvery, Host: "kill-pod"}
	if _, err := loader.Load(context.Background(), srv, o); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// TestKillAndResume SIGKILLs a loader at random points until it
// completes: every file at a final path is always whole and verified, the
// manifest appears only with the whole model, and each kill costs at most
// the bytes since the last checkpoint plus the parts in flight.
func TestKillAndResume(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	// SHA-256 is hashed in order as the bytes arrive, those ahead of the
	// hash buffered or read back, and resumes from a hash state a kill may
	// leave in the middle of a part; CRC64NVME is summed per part as it
	// arrives and combined, a part an earlier run fetched (or began) read
	// back; a multipart ETag's parts (not the loader's part size) are each
	// summed the same way.
	for _, digest := range []loader.Algorithm{loader.SHA256, loader.CRC64NVME, compositeMD5} {
		t.Run(string(digest), func(t *testing.T) { killAndResume(t, digest) })
	}
}

// compositeMD5 names the kill test's multipart-ETag variant.
const compositeMD5 = loader.MD5 + loader.CompositeSuffix

// killFiles is the killed loads' model, the same in the test and its
// children.
func killFiles() map[string]loadertest.Content {
	return map[string]loadertest.Content{
		"a.safetensors":   loadertest.Generated(11, 9*mib+7),
		"b.safetensors":   loadertest.Generated(12, 6*mib),
		"c/tokenizer.bin": loadertest.Generated(13, 700_000),
		"config.json":     loadertest.Bytes([]byte(`{"a":1}`)),
	}
}

func killAndResume(t *testing.T, digest loader.Algorithm) {
	files := killFiles()
	var total int64
	for _, c := range files {
		total += c.Size()
	}
	wantSums := want(files)
	srv := loadertest.NewServer(files)
	defer srv.Close()
	srv.SetRate(killRate)
	dest := t.TempDir()

	r := rand.New(rand.NewPCG(1, 2))
	kills := 0
	for run := 0; ; run++ {
		if run > 40 {
			t.Fatal("the loader never completed")
		}
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), childURL+"="+srv.URL(), childDest+"="+dest, childDigest+"="+string(digest))
		out := &limited{}
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		killAt := time.Duration(150+r.IntN(500)) * time.Millisecond
		if kills >= 8 {
			killAt = time.Minute // enough: let it finish
		}
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("loader failed: %v\n%s", err, out)
			}
		case <-time.After(killAt):
			_ = cmd.Process.Signal(syscall.SIGKILL)
			<-done
			kills++
			t.Logf("kill %d at %s: %d bytes served so far", kills, killAt, srv.BytesServed())
		}
		complete := checkInvariant(t, dest, wantSums)
		if complete {
			break
		}
	}
	if diff := cmp.Diff(wantSums, sums(t, dest)); diff != "" {
		t.Errorf("files after %d kills (-want +got):\n%s", kills, diff)
	}
	refetched := srv.BytesServed() - total
	perKill := int64(0)
	if kills > 0 {
		perKill = refetched / int64(kills)
	}
	// At most what arrived since the last checkpoint (by size, or by time
	// at four responses' rate), plus what was in the server's write
	// buffers (a 256 KiB chunk per response).
	bound := int64(killCkptBytes) + int64(4*killRate*max(killCkptEvery, 100*time.Millisecond).Seconds()) + 4*256<<10
	t.Logf("%d kills, %d bytes re-fetched in all, %d per kill (bound %d), model %d bytes", kills, refetched, perKill, bound, total)
	if kills < 3 {
		t.Errorf("only %d kills landed before the load completed; the test proves nothing", kills)
	}
	if perKill > bound {
		t.Errorf("re-fetched %d bytes per kill, want at most %d", perKill, bound)
	}
}

// checkInvariant: without a manifest, anything at a final path is whole
// and verified; with one, everything is. It reports whether the manifest
// is there.
func checkInvariant(t *testing.T, dest string, wantSums map[string]string) bool {
	t.Helper()
	got := sums(t, dest)
	for p, s := range got {
		if wantSums[p] != s {
			t.Fatalf("%s is at its final path with sha256 %s, want %s (or absent)", p, s, wantSums[p])
		}
	}
	_, err := os.Stat(filepath.Join(dest, loader.StateDir, loader.ManifestFile))
	if err == nil && len(got) != len(wantSums) {
		t.Fatalf("a manifest with only %d of %d files in place", len(got), len(wantSums))
	}
	return err == nil
}

// limited keeps the first 64 KiB of a process's output.
type limited struct{ b []byte }

func (l *limited) Write(p []byte) (int, error) {
	if room := 64<<10 - len(l.b); room > 0 {
		l.b = append(l.b, p[:min(len(p), room)]...)
	}
	return len(p), nil
}

func (l *limited) String() string { return string(l.b) }

var _ = http.MethodGet

// TestKillBetweenStagingAndRecord: a kill after a verified file was
// staged and before its done record was written costs no byte of it; the
// next run hashes it from disk and stages it again.
func TestKillBetweenStagingAndRecord(t *testing.T) {
	files := model()
	srv := loadertest.NewServer(files)
	defer srv.Close()
	dest := t.TempDir()
	opts := fastOptions(dest, "https://x/m")
	if _, err := loader.Load(context.Background(), srv.Source(nil), opts); err != nil {
		t.Fatal(err)
	}
	listing, err := srv.Source(nil).List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var staged *loader.File
	for i := range listing.Files {
		f := &listing.Files[i]
		if f.Size > opts.PartSize && staged == nil {
			staged = f
			continue
		}
		// The other files: not fetched yet when the kill landed.
		if err := os.Remove(filepath.Join(dest, f.Path)); err != nil {
			t.Fatal(err)
		}
	}
	if staged == nil {
		t.Fatal("the model has no file of several parts")
	}
	if err := loader.Staged(dest, staged, opts.PartSize); err != nil {
		t.Fatal(err)
	}
	before := srv.BytesServed()
	if _, err := loader.Load(context.Background(), srv.Source(nil), opts); err != nil {
		t.Fatal(err)
	}
	var total int64
	for _, c := range files {
		total += c.Size()
	}
	if got, want := srv.BytesServed()-before, total-staged.Size; got != want {
		t.Errorf("the resumed load fetched %d bytes, want %d: every file but the staged %s (%d bytes)", got, want, staged.Path, staged.Size)
	}
	if diff := cmp.Diff(want(files), sums(t, dest)); diff != "" {
		t.Errorf("files (-want +got):\n%s", diff)
	}
}
