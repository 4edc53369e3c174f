package imagebuild

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The tests build modelgate for the host's architecture only, once, and
// share it.
var (
	hostPlatform = v1.Platform{OS: "linux", Architecture: runtime.GOARCH}
	testCreated  = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	testRef      = "registry.example/modelgate/modelgate:v9.8.7-test"
)

func testOptions() Options {
	return Options{
		ModuleDir: filepath.Join("..", ".."),
		Version:   "v9.8.7-test",
		Revision:  "0123456789abcdef0123456789abcdef01234567",
		Platforms: []v1.Platform{hostPlatform},
		Created:   testCreated,
	}
}

var hostBuild struct {
	once sync.Once
	dir  string
	bins []Binary
	idx  v1.ImageIndex
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if hostBuild.dir != "" {
		os.RemoveAll(hostBuild.dir)
	}
	os.Exit(code)
}

// builtIndex compiles modelgate for the host once and assembles its index.
func builtIndex(t *testing.T) ([]Binary, v1.ImageIndex) {
	t.Helper()
	if runtime.GOOS != "linux" || (runtime.GOARCH != "amd64" && runtime.GOARCH != "arm64") {
		t.Skipf("the image is linux/amd64 or linux/arm64: cannot run its binary on %s/%s", runtime.GOOS, runtime.GOARCH)
	}
	if testing.Short() {
		t.Skip("builds modelgate: not in -short mode")
	}
	hostBuild.once.Do(func() {
		hostBuild.dir, hostBuild.err = os.MkdirTemp("", "imagebuild-test-")
		if hostBuild.err != nil {
			return
		}
		hostBuild.bins, hostBuild.err = Compile(context.Background(), testOptions(), hostBuild.dir)
		if hostBuild.err != nil {
			return
		}
		hostBuild.idx, hostBuild.err = Assemble(testOptions(), hostBuild.bins)
	})
	if hostBuild.err != nil {
		t.Fatalf("building the image: %v", hostBuild.err)
	}
	return hostBuild.bins, hostBuild.idx
}

// TestImage writes the image as an OCI layout, reads it back, and checks its
// index, config and files, then runs its binary.
func TestImage(t *testing.T) {
	_, built := builtIndex(t)
	dir := filepath.Join(t.TempDir(), "oci")
	if err := WriteLayout(dir, built, testRef); err != nil {
		t.Fatal(err)
	}
	idx, img := readLayout(t, dir, built)
	checkIndex(t, idx)
	checkConfig(t, img)
	bin := checkFiles(t, img)
	checkBinary(t, bin)
}

func readLayout(t *testing.T, dir string, built v1.ImageIndex) (v1.ImageIndex, v1.Image) {
	t.Helper()
	outer, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatalf("reading the layout: %v", err)
	}
	om, err := outer.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(om.Manifests) != 1 {
		t.Fatalf("index.json has %d entries, want 1 (the image index)", len(om.Manifests))
	}
	entry := om.Manifests[0]
	want := map[string]string{annotationRefName: "v9.8.7-test", annotationContainerdName: testRef}
	if diff := cmp.Diff(want, entry.Annotations); diff != "" {
		t.Errorf("index.json entry's annotations (-want +got):\n%s", diff)
	}
	builtDigest, err := built.Digest()
	if err != nil {
		t.Fatal(err)
	}
	if entry.MediaType != types.OCIImageIndex || entry.Digest != builtDigest {
		t.Errorf("index.json entry is %s %s, want %s %s", entry.MediaType, entry.Digest, types.OCIImageIndex, builtDigest)
	}
	idx, err := outer.ImageIndex(entry.Digest)
	if err != nil {
		t.Fatalf("reading the image index from the layout: %v", err)
	}
	img, err := ImageFor(idx, hostPlatform)
	if err != nil {
		t.Fatal(err)
	}
	return idx, img
}

func checkIndex(t *testing.T, idx v1.ImageIndex) {
	t.Helper()
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if m.MediaType != types.OCIImageIndex {
		t.Errorf("index media type = %s, want %s", m.MediaType, types.OCIImageIndex)
	}
	if len(m.Manifests) != 1 || m.Manifests[0].Platform == nil || !m.Manifests[0].Platform.Equals(hostPlatform) ||
		m.Manifests[0].MediaType != types.OCIManifestSchema1 {
		t.Errorf("index manifests = %+v, want one %s for %s", m.Manifests, types.OCIManifestSchema1, hostPlatform)
	}
	if m.Annotations[LabelSource] != Source || m.Annotations[LabelVersion] != "v9.8.7-test" {
		t.Errorf("index annotations = %v, want the OCI labels", m.Annotations)
	}
}

func checkConfig(t *testing.T, img v1.Image) {
	t.Helper()
	mt, err := img.MediaType()
	if err != nil {
		t.Fatal(err)
	}
	if mt != types.OCIManifestSchema1 {
		t.Errorf("manifest media type = %s, want %s", mt, types.OCIManifestSchema1)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	want := v1.Config{
		Entrypoint: []string{"/modelgate"},
		Cmd:        []string{"serve"},
		User:       "65532:65532",
		WorkingDir: "/",
		Env:        []string{"SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"},
		Labels: map[string]string{
			"org.opencontainers.image.source":      "https://github.com/modelgate/modelgate",
			"org.opencontainers.image.description": "Admission webhook and policy engine for GPU and AI workloads",
			"org.opencontainers.image.licenses":    "Apache-2.0",
			"org.opencontainers.image.version":     "v9.8.7-test",
			"org.opencontainers.image.revision":    "0123456789abcdef0123456789abcdef01234567",
		},
	}
	if diff := cmp.Diff(want, cf.Config); diff != "" {
		t.Errorf("config (-want +got):\n%s", diff)
	}
	uid, gid, ok := strings.Cut(cf.Config.User, ":")
	if n, err := strconv.Atoi(uid); !ok || err != nil || n == 0 {
		t.Errorf("user %q: want a numeric non-root uid:gid", cf.Config.User)
	}
	if n, err := strconv.Atoi(gid); err != nil || n == 0 {
		t.Errorf("user %q: want a numeric non-root gid", cf.Config.User)
	}
	if cf.OS != hostPlatform.OS || cf.Architecture != hostPlatform.Architecture {
		t.Errorf("config platform = %s/%s, want %s", cf.OS, cf.Architecture, hostPlatform)
	}
	if !cf.Created.Equal(testCreated) {
		t.Errorf("created = %s, want %s", cf.Created.Time, testCreated)
	}
	if len(cf.History) != 2 {
		t.Errorf("history has %d entries, want 2 (base files, binary)", len(cf.History))
	}
	for i, h := range cf.History {
		if !h.Created.Equal(testCreated) {
			t.Errorf("history[%d] created = %s, want %s", i, h.Created.Time, testCreated)
		}
	}
}

// checkFiles checks the image's flattened filesystem and returns the path
// of a copy of /modelgate.
func checkFiles(t *testing.T, img v1.Image) string {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	var (
		names    []string
		bin      = filepath.Join(t.TempDir(), "modelgate")
		caBundle []byte
		passwdIn []byte
	)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		// mutate.Extract cleans the names: no directory ends in "/".
		hdr.Name = strings.TrimSuffix(hdr.Name, "/")
		names = append(names, hdr.Name)
		checkEntry(t, hdr)
		switch hdr.Name {
		case "modelgate":
			copyTo(t, bin, tr)
		case "etc/ssl/certs/ca-certificates.crt":
			caBundle = readAll(t, tr)
		case "etc/passwd":
			passwdIn = readAll(t, tr)
		}
	}
	want := []string{"etc", "etc/group", "etc/passwd", "etc/ssl", "etc/ssl/certs", "etc/ssl/certs/ca-certificates.crt",
		"home", "home/nonroot", "modelgate", "tmp"}
	slices.Sort(names)
	if diff := cmp.Diff(want, names); diff != "" {
		t.Errorf("files (-want +got):\n%s", diff)
	}
	certs, err := ParseCABundle(caBundle)
	if err != nil {
		t.Errorf("%s: %v", CABundlePath, err)
	}
	if len(certs) < 100 {
		t.Errorf("%s has %d certificates, want at least 100", CABundlePath, len(certs))
	}
	if !strings.Contains(string(passwdIn), "nonroot:x:65532:65532:") {
		t.Errorf("/etc/passwd has no nonroot user 65532:\n%s", passwdIn)
	}
	return bin
}

// checkEntry checks one file's owner, mode and time: root-owned (but the
// nonroot user's home), nothing writable by group or others but the sticky
// /tmp, /modelgate executable.
func checkEntry(t *testing.T, hdr *tar.Header) {
	t.Helper()
	const sticky = 0o1000
	uid := 0
	if hdr.Name == "home/nonroot" {
		uid = NonrootID
	}
	if hdr.Uid != uid || hdr.Gid != uid {
		t.Errorf("/%s is owned by %d:%d, want %d:%d", hdr.Name, hdr.Uid, hdr.Gid, uid, uid)
	}
	if hdr.Mode&0o022 != 0 && (hdr.Typeflag != tar.TypeDir || hdr.Mode&sticky == 0) {
		t.Errorf("/%s has mode %o: writable by group or others", hdr.Name, hdr.Mode)
	}
	if !hdr.ModTime.Equal(testCreated) {
		t.Errorf("/%s has modification time %s, want %s", hdr.Name, hdr.ModTime, testCreated)
	}
	switch hdr.Name {
	case "tmp":
		if hdr.Typeflag != tar.TypeDir || hdr.Mode != 0o1777 {
			t.Errorf("/tmp is type %c mode %o, want a directory with mode 1777", hdr.Typeflag, hdr.Mode)
		}
	case "modelgate":
		if hdr.Typeflag != tar.TypeReg || hdr.Mode != 0o755 {
			t.Errorf("/modelgate is type %c mode %o, want a regular file with mode 755", hdr.Typeflag, hdr.Mode)
		}
	}
}

// checkBinary runs the image's /modelgate: its version is the one built in,
// and it has the loader the image's init containers run.
func checkBinary(t *testing.T, bin string) {
	t.Helper()
	out, err := exec.Command(bin, "version").CombinedOutput()
	if err != nil {
		t.Fatalf("modelgate version: %v\n%s", err, out)
	}
	if got := strings.TrimSpace(string(out)); got != "v9.8.7-test" {
		t.Errorf("modelgate version printed %q, want %q", got, "v9.8.7-test")
	}
	// The flag package spells it -uri, others --uri.
	out, err = exec.Command(bin, "load", "-h").CombinedOutput()
	if err != nil {
		t.Errorf("modelgate load -h: %v (the image's init containers run modelgate load)\n%s", err, out)
	} else if !strings.Contains(string(out), "-uri") {
		t.Errorf("modelgate load -h does not mention --uri:\n%s", out)
	}
}

// TestReproducible assembles the image again from a copy of the binary
// with another path, time and mode: the digest is the same, so nothing of
// the build machine's files gets in. A different creation time gives
// another digest. (The binary itself is reproducible by go build: -trimpath,
// CGO_ENABLED=0 and a fixed architecture level; compiling it twice here
// would double the test's time and prove Go's guarantee, not ours.)
func TestReproducible(t *testing.T) {
	bins, first := builtIndex(t)
	again := make([]Binary, len(bins))
	for i, b := range bins {
		again[i] = Binary{Platform: b.Platform, Path: filepath.Join(t.TempDir(), "copy")}
		in, err := os.Open(b.Path)
		if err != nil {
			t.Fatal(err)
		}
		copyTo(t, again[i].Path, in)
		in.Close()
		if err := os.Chmod(again[i].Path, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(again[i].Path, time.Now(), time.Now().Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	second, err := Assemble(testOptions(), again)
	if err != nil {
		t.Fatal(err)
	}
	if d1, d2 := digest(t, first), digest(t, second); d1 != d2 {
		t.Errorf("two builds: %s and %s, want one digest", d1, d2)
	}
	opts := testOptions()
	opts.Created = opts.Created.Add(time.Second)
	later, err := Assemble(opts, bins)
	if err != nil {
		t.Fatal(err)
	}
	if digest(t, later) == digest(t, first) {
		t.Error("a build one second later has the same digest: the creation time is not used")
	}
}

func digest(t *testing.T, idx v1.ImageIndex) v1.Hash {
	t.Helper()
	d, err := idx.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func copyTo(t *testing.T, path string, r io.Reader) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(f, r); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func readAll(t *testing.T, r io.Reader) []byte {
	t.Helper()
	var buf bytes.Buffer
	if _, err := io.Copy(&buf, r); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
