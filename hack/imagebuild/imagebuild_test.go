package imagebuild

import (
	"archive/tar"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"golang.org/x/crypto/x509roots/fallback/bundle"
)

func TestParsePlatforms(t *testing.T) {
	cases := map[string]struct {
		in      string
		want    []v1.Platform
		wantErr string
	}{
		"both": {
			in:   "linux/amd64,linux/arm64",
			want: []v1.Platform{{OS: "linux", Architecture: "amd64"}, {OS: "linux", Architecture: "arm64"}},
		},
		"spaces and variant": {
			in:   " linux/arm64/v8 ",
			want: []v1.Platform{{OS: "linux", Architecture: "arm64", Variant: "v8"}},
		},
		"empty":          {in: " , ", wantErr: "no platform"},
		"not linux":      {in: "windows/amd64", wantErr: "linux only"},
		"unknown arch":   {in: "linux/s390x", wantErr: "can only be amd64 or arm64"},
		"bad variant":    {in: "linux/amd64/v9", wantErr: "v1, v2, v3 or v4"},
		"listed twice":   {in: "linux/amd64,linux/amd64", wantErr: "twice"},
		"no arch at all": {in: "linux/", wantErr: "architecture"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := ParsePlatforms(tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("ParsePlatforms(%q) error = %v, want one mentioning %q", tc.in, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ParsePlatforms(%q) (-want +got):\n%s", tc.in, diff)
			}
		})
	}
}

func TestGoEnv(t *testing.T) {
	got, err := goEnv(v1.Platform{OS: "linux", Architecture: "arm64"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"CGO_ENABLED=0", "GOOS=linux", "GOARCH=arm64", "GOARM64=v8.0"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("goEnv (-want +got):\n%s", diff)
	}
}

func TestOptionsRequired(t *testing.T) {
	_, err := Assemble(Options{}, []Binary{{Platform: hostPlatform, Path: "x"}})
	for _, want := range []string{"module directory", "version", "creation time"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Assemble with no options: error = %v, want one naming the %s", err, want)
		}
	}
}

func TestMozillaRoots(t *testing.T) {
	pem, err := MozillaRoots()
	if err != nil {
		t.Fatal(err)
	}
	certs, err := ParseCABundle(pem)
	if err != nil {
		t.Fatal(err)
	}
	total, constrained := 0, 0
	for r := range bundle.Roots() {
		total++
		if r.Constraint != nil {
			constrained++
		}
	}
	if len(certs) < 100 || len(certs) != total-constrained {
		t.Errorf("the bundle has %d certificates, want the %d unconstrained roots of %d (and at least 100)", len(certs), total-constrained, total)
	}
	for _, c := range certs {
		if !c.IsCA {
			t.Errorf("%s is not a CA certificate", c.Subject)
		}
	}
}

func TestParseCABundle(t *testing.T) {
	cases := map[string]string{
		"empty":      "",
		"not PEM":    "hello",
		"a key":      "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n",
		"bad DER":    "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
		"only notes": "# just a comment\n",
	}
	for name, in := range cases {
		t.Run(name, func(t *testing.T) {
			if _, err := ParseCABundle([]byte(in)); err == nil {
				t.Errorf("ParseCABundle(%q) = nil error, want one", in)
			}
		})
	}
}

// TestNewLayer checks that a layer's bytes depend only on its files and
// time: not on the order the files are given in nor on the source file's
// own time and mode, and that entries come out sorted with fixed owners.
func TestNewLayer(t *testing.T) {
	mtime := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	src := filepath.Join(t.TempDir(), "bin")
	if err := os.WriteFile(src, []byte("binary"), 0o700); err != nil {
		t.Fatal(err)
	}
	files := append(baseFiles([]byte("certs")), programFiles(ModelgateProgram(), src)...)
	reversed := make([]file, len(files))
	for i, f := range files {
		reversed[len(files)-1-i] = f
	}
	a, err := newLayer(files, mtime)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(src, time.Now(), time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(src, 0o777); err != nil {
		t.Fatal(err)
	}
	b, err := newLayer(reversed, mtime)
	if err != nil {
		t.Fatal(err)
	}
	da, err := a.Digest()
	if err != nil {
		t.Fatal(err)
	}
	db, err := b.Digest()
	if err != nil {
		t.Fatal(err)
	}
	if da != db {
		t.Errorf("the same files give two layers: %s and %s", da, db)
	}

	rc, err := b.Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	var got []string
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, hdr.Name+" "+hdr.FileInfo().Mode().String()+" "+strconv.Itoa(hdr.Uid)+":"+strconv.Itoa(hdr.Gid))
		if !hdr.ModTime.Equal(mtime) {
			t.Errorf("%s: modification time %s, want %s", hdr.Name, hdr.ModTime, mtime)
		}
	}
	want := []string{
		"etc/ drwxr-xr-x 0:0",
		"etc/group -rw-r--r-- 0:0",
		"etc/passwd -rw-r--r-- 0:0",
		"etc/ssl/ drwxr-xr-x 0:0",
		"etc/ssl/certs/ drwxr-xr-x 0:0",
		"etc/ssl/certs/ca-certificates.crt -rw-r--r-- 0:0",
		"home/ drwxr-xr-x 0:0",
		"home/nonroot/ drwx------ 65532:65532",
		"modelgate -rwxr-xr-x 0:0",
		"tmp/ dtrwxrwxrwx 0:0",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("layer entries (-want +got):\n%s", diff)
	}
}

func TestNewLayerRejectsDuplicates(t *testing.T) {
	files := []file{{name: "etc/", mode: 0o755}, {name: "etc/", mode: 0o700}}
	if _, err := newLayer(files, time.Unix(0, 0)); err == nil {
		t.Error("newLayer with /etc twice: nil error, want one")
	}
}

// TestDockerfileAgrees checks that the Dockerfile, for people with Docker,
// builds the image this package builds: same labels, environment, user,
// entrypoint, command and go build flags.
func TestDockerfileAgrees(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	dockerfile := string(b)
	want := []string{
		LabelSource + `="` + Source + `"`,
		LabelDescription + `="` + Description + `"`,
		LabelLicenses + `="` + Licenses + `"`,
		LabelVersion + `="${VERSION}"`,
		LabelRevision + `="${REVISION}"`,
		"ENV SSL_CERT_FILE=" + CABundlePath + "\n",
		"WORKDIR /\n",
		"--chown=0:0 --chmod=0755 /out/modelgate " + BinaryPath + "\n",
		"USER " + User + "\n",
		`ENTRYPOINT ["` + BinaryPath + `"]` + "\n",
		`CMD ["` + DefaultCmd + `"]` + "\n",
		"CGO_ENABLED=0 ",
		`go build -trimpath -ldflags "` + LDFlags("${VERSION}") + `"`,
		"FROM gcr.io/distroless/static-debian12:nonroot\n",
	}
	for _, w := range want {
		if !strings.Contains(dockerfile, w) {
			t.Errorf("the Dockerfile has no %q", w)
		}
	}
}

// TestMakefileLDFlags checks that make build's flags are LDFlags, the
// default of a build without the Makefile.
func TestMakefileLDFlags(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	if want := "GO_LDFLAGS = " + LDFlags("$(VERSION)") + "\n"; !strings.Contains(string(b), want) {
		t.Errorf("the Makefile has no %q", want)
	}
}
