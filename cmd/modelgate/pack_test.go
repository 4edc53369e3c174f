package main

import (
	"bytes"
	"encoding/pem"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/modelgate/modelgate/api/annotations"
	"github.com/modelgate/modelgate/loader"
	"github.com/modelgate/modelgate/loader/hf/hubtest"
	"github.com/modelgate/modelgate/loader/loadertest"
	"github.com/modelgate/modelgate/pack/packtest"
)

// packRegistry serves an in-process registry and returns its host:port.
func packRegistry(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// packHub is a fake Hub holding acme/tiny: a weight file of 3 MiB and two
// small files.
func packHub(t *testing.T) (*hubtest.Server, string) {
	t.Helper()
	h := hubtest.New()
	t.Cleanup(h.Close)
	r := hubtest.OneCommit(
		hubtest.File{Path: "config.json", Content: loadertest.Bytes([]byte(`{"model_type":"llama"}`))},
		hubtest.File{Path: "model.safetensors", Content: loadertest.Generated(7, 3<<20), LFS: true},
		hubtest.File{Path: "tokenizer/tokenizer.json", Content: loadertest.Bytes([]byte(`{}`))},
	)
	h.AddRepo("acme/tiny", r)
	return h, r.Refs["main"]
}

// invokePack runs `modelgate pack` in process and returns the exit code,
// stdout and stderr.
func invokePack(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	// No Docker config of the machine running the tests.
	t.Setenv("DOCKER_CONFIG", t.TempDir())
	var out, errOut bytes.Buffer
	code := run(append([]string{"pack", "--stall-timeout=2s"}, args...), nil, &out, &errOut)
	return code, out.String(), errOut.String()
}

var pushedRE = regexp.MustCompile(`(?m)^pushed (\S+@sha256:[0-9a-f]{64})$`)

// pushedRef is the reference by digest pack printed.
func pushedRef(t *testing.T, stdout string) name.Digest {
	t.Helper()
	m := pushedRE.FindStringSubmatch(stdout)
	if m == nil {
		t.Fatalf("no pushed reference printed:\n%s", stdout)
	}
	ref, err := name.NewDigest(m[1])
	if err != nil {
		t.Fatal(err)
	}
	return ref
}

// loaded is what `modelgate load URI` writes, but the loader's state.
func loaded(t *testing.T, uri string, extra ...string) map[string]string {
	t.Helper()
	dir := t.TempDir()
	var out, errOut bytes.Buffer
	if code := run(append([]string{"load", "--termination-log=", "--log-format=text", uri, dir}, extra...), nil, &out, &errOut); code != 0 {
		t.Fatalf("load %s: exit %d\n%s", uri, code, errOut.String())
	}
	return packtest.Tree(t, dir, loader.StateDir)
}

// pulled is what each platform's image of ref holds, extracted layer
// after layer, and the index.
func pulled(t *testing.T, ref name.Reference) (map[string]map[string]string, *v1.IndexManifest) {
	t.Helper()
	idx, err := remote.Index(ref)
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]string{}
	for _, d := range im.Manifests {
		img, err := idx.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		ls, err := img.Layers()
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		for _, l := range ls {
			if err := packtest.ExtractLayer(l, dir); err != nil {
				t.Fatal(err)
			}
		}
		out[d.Platform.String()] = packtest.Tree(t, dir)
	}
	return out, im
}

func TestPackCommandHF(t *testing.T) {
	h, commit := packHub(t)
	t.Setenv("HF_ENDPOINT", h.URL())
	host := packRegistry(t)
	const uri = "hf://acme/tiny@main"
	image := host + "/mirror/acme/tiny:main"
	work := t.TempDir()

	code, stdout, stderr := invokePack(t, uri, image, "--insecure", "--dir", work)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	ref := pushedRef(t, stdout)
	tag, err := name.NewTag(image)
	if err != nil {
		t.Fatal(err)
	}
	desc, err := remote.Head(tag)
	if err != nil {
		t.Fatal(err)
	}
	if ref.DigestStr() != desc.Digest.String() || ref.Context().Name() != host+"/mirror/acme/tiny" {
		t.Errorf("printed %s, the registry's %s is %s", ref, image, desc.Digest)
	}
	// The hub cache (blobs, snapshot links, refs) and the plain view: the
	// 3 MiB weights in a layer of their own, the rest in another.
	for _, want := range []string{
		"layers: 2, 3.",
		"\n  modelgate.io/model: oci://" + ref.String() + "\n  modelgate.io/model-mount: image-volume\n",
		"the Configuration's injection.imageVolumes.hubMirror is " + host + "/mirror,\nthe webhook mounts this image for\n  modelgate.io/model: hf://acme/tiny@main\n",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
	}
	if !regexp.MustCompile(`(?m)^pack: built, pushed and verified in [0-9.]+ s \([0-9.]+ MB/s\)$`).MatchString(stdout) {
		t.Errorf("no pack throughput:\n%s", stdout)
	}
	if u, err := annotations.ParseModelURI("oci://" + ref.String()); err != nil || !u.Pinned() {
		t.Errorf("the printed model URI oci://%s: %v, pinned %t", ref, err, u.Pinned())
	}

	want := loaded(t, uri)
	if _, ok := want[".cache/huggingface/hub/models--acme--tiny/snapshots/"+commit+"/model.safetensors"]; !ok {
		t.Fatalf("the loaded tree has no hub cache: %v", want)
	}
	trees, im := pulled(t, ref)
	for _, p := range []string{"linux/amd64", "linux/arm64"} {
		if diff := cmp.Diff(want, trees[p]); diff != "" {
			t.Errorf("%s image against modelgate load (-want +got):\n%s", p, diff)
		}
	}
	wantAnn := map[string]string{
		"org.opencontainers.image.source": uri, "io.modelgate.model.uri": uri,
		"io.modelgate.hf.repo": "acme/tiny", "io.modelgate.hf.commit": commit,
	}
	if diff := cmp.Diff(wantAnn, im.Annotations); diff != "" {
		t.Errorf("index annotations (-want +got):\n%s", diff)
	}

	// Again with the same work directory: nothing fetched, the same image.
	h.ResetStats()
	code, again, stderr := invokePack(t, uri, image, "--insecure", "--dir", work)
	if code != 0 {
		t.Fatalf("second pack: exit %d\n%s\n%s", code, again, stderr)
	}
	if got := pushedRef(t, again); got != ref || !strings.Contains(again, "load: already loaded: 3 files") {
		t.Errorf("second pack pushed %s, want %s, from the work directory:\n%s", got, ref, again)
	}
	for _, r := range []hubtest.Route{hubtest.RouteRevision, hubtest.RouteTree, hubtest.RouteResolve, hubtest.RouteCDN} {
		if n := h.Requests(r); n != 0 {
			t.Errorf("second pack: %d requests to %s", n, r)
		}
	}
}

func TestPackCommandHTTPS(t *testing.T) {
	file := loadertest.Generated(3, 2<<20)
	web := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.ServeContent(w, r, "model.bin", time.Time{}, file.Reader())
	}))
	defer web.Close()
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: web.Certificate().Raw}), 0o644); err != nil {
		t.Fatal(err)
	}
	uri := web.URL + "/models/model.bin#sha256=" + file.SHA256()
	image := packRegistry(t) + "/models/bin:v1"

	code, stdout, stderr := invokePack(t, uri, image, "--insecure", "--ca-bundle", ca, "--layer-threshold=4Mi")
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	if !strings.Contains(stdout, "layers: 1, ") {
		t.Errorf("a 2 MiB file under a 4 MiB threshold: not one layer:\n%s", stdout)
	}
	trees, im := pulled(t, pushedRef(t, stdout))
	if diff := cmp.Diff(loaded(t, uri, "--ca-bundle", ca), trees["linux/amd64"]); diff != "" {
		t.Errorf("image against modelgate load (-want +got):\n%s", diff)
	}
	if got := im.Annotations["io.modelgate.model.uri"]; got != uri {
		t.Errorf("io.modelgate.model.uri %q, want %q", got, uri)
	}
}

func TestPackCommandInvalid(t *testing.T) {
	cases := map[string]struct {
		args []string
		want string
	}{
		"no arguments":   {args: nil, want: "takes a model URI and an image (modelgate pack URI IMAGE), got 0 arguments"},
		"one argument":   {args: []string{"hf://acme/tiny"}, want: "got 1 arguments"},
		"a pvc":          {args: []string{"pvc://claim/models", "registry.example.com/m:v1"}, want: "URI pvc://claim/models: a pvc:// model is a claim already in the cluster and cannot be packed; pack the model it was loaded from (hf://, s3://, gs://, https:// or oci://)"},
		"a bad scheme":   {args: []string{"ftp://x/y", "registry.example.com/m:v1"}, want: `URI ftp://x/y: unsupported scheme "ftp" (supported: `},
		"credentials":    {args: []string{"https://host/m.bin?token=s3cr3t", "registry.example.com/m:v1"}, want: "URI https://host/m.bin?<redacted> must not carry a credential in its query"},
		"image digest":   {args: []string{"hf://acme/tiny", "registry.example.com/m@sha256:" + strings.Repeat("0", 64)}, want: `IMAGE "registry.example.com/m@sha256:` + strings.Repeat("0", 64) + `" names a digest; name a tag (registry/repository:tag)`},
		"image no tag":   {args: []string{"hf://acme/tiny", "registry.example.com/Acme"}, want: `IMAGE "registry.example.com/Acme" must be registry/repository:tag`},
		"image as URI":   {args: []string{"hf://acme/tiny", "oci://registry.example.com/m:v1"}, want: `IMAGE "oci://registry.example.com/m:v1" is a URI; write the image without its scheme`},
		"image no model": {args: []string{"hf://acme/tiny", "registry.example.com/a__-b:v1"}, want: `IMAGE "registry.example.com/a__-b:v1" cannot be mounted as a model, oci://registry.example.com/a__-b:v1: repository "a__-b" must be lower-case path components`},
		"bad threshold":  {args: []string{"hf://acme/tiny", "registry.example.com/m:v1", "--layer-threshold=0"}, want: `--layer-threshold "0" must be a positive quantity (512Ki, 1Mi, 64Mi)`},
		"bad part size":  {args: []string{"hf://acme/tiny", "registry.example.com/m:v1", "--part-size=1"}, want: `--part-size "1" must be a quantity from 64Ki to 1Gi`},
		"a flag of load": {args: []string{"hf://acme/tiny", "registry.example.com/m:v1", "--dest=/tmp"}, want: "flag provided but not defined: -dest"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			code, stdout, stderr := invokePack(t, tc.args...)
			if code != exitLoadInvalid || !strings.Contains(stderr, tc.want) || stdout != "" {
				t.Errorf("exit %d, stdout %q, stderr:\n%s\nwant exit %d saying %q", code, stdout, stderr, exitLoadInvalid, tc.want)
			}
			if strings.Contains(stderr, "s3cr3t") {
				t.Errorf("a credential is in the message: %s", stderr)
			}
		})
	}
}

func TestPackCommandRegistryDown(t *testing.T) {
	h, _ := packHub(t)
	t.Setenv("HF_ENDPOINT", h.URL())
	srv := httptest.NewServer(http.NotFoundHandler())
	host := strings.TrimPrefix(srv.URL, "http://")
	srv.Close()
	code, stdout, stderr := invokePack(t, "hf://acme/tiny", host+"/m:v1", "--insecure")
	if code != exitLoadFailed || !strings.Contains(stderr, "modelgate pack: pushing "+host+"/m:v1: ") || stdout != "" {
		t.Errorf("exit %d, stdout %q, stderr:\n%s", code, stdout, stderr)
	}
}

func TestPackHubMirrorNote(t *testing.T) {
	commit := strings.Repeat("ab", 20)
	cases := map[string]struct {
		uri, image string
		want       string
	}{
		"the mirror's image": {
			uri: "hf://Acme/Tiny@v1.0", image: "registry.example.com/hub/acme/tiny:v1.0",
			want: "Or keep the Hugging Face model: where the Configuration's injection.imageVolumes.hubMirror is registry.example.com/hub,\n" +
				"the webhook mounts this image for\n  modelgate.io/model: hf://Acme/Tiny@v1.0\n  modelgate.io/model-mount: image-volume\n",
		},
		"no revision is main": {
			uri: "hf://acme/tiny", image: "registry.example.com:5000/acme/tiny:main",
			want: "Or keep the Hugging Face model: where the Configuration's injection.imageVolumes.hubMirror is registry.example.com:5000,\n" +
				"the webhook mounts this image for\n  modelgate.io/model: hf://acme/tiny\n  modelgate.io/model-mount: image-volume\n",
		},
		"another tag": {
			uri: "hf://acme/tiny@" + commit, image: "registry.example.com/hub/acme/tiny:latest",
			want: "Or keep the Hugging Face model: for\n  modelgate.io/model: hf://acme/tiny@" + commit + "\n  modelgate.io/model-mount: image-volume\n" +
				"the webhook mounts <mirror>/acme/tiny:" + commit + ",\n" +
				"<mirror> being the Configuration's injection.imageVolumes.hubMirror; pack to that image to serve it so.\n",
		},
		"another repository": {
			uri: "hf://acme/tiny@main", image: "registry.example.com/models/tiny:main",
			want: "Or keep the Hugging Face model: for\n  modelgate.io/model: hf://acme/tiny@main\n  modelgate.io/model-mount: image-volume\n" +
				"the webhook mounts <mirror>/acme/tiny:main,\n" +
				"<mirror> being the Configuration's injection.imageVolumes.hubMirror; pack to that image to serve it so.\n",
		},
		"a revision no tag can be": {
			uri: "hf://acme/tiny@refs/pr/1", image: "registry.example.com/models/tiny:pr1",
			want: `This image cannot be a hub mirror's: revision "refs/pr/1" of acme/tiny cannot be an image tag in the hub mirror`,
		},
	}
	for title, tc := range cases {
		t.Run(title, func(t *testing.T) {
			u, err := annotations.ParseModelURI(tc.uri)
			if err != nil {
				t.Fatal(err)
			}
			tag, err := name.NewTag(tc.image)
			if err != nil {
				t.Fatal(err)
			}
			got := hubMirrorNote(u, tag)
			if !strings.HasPrefix(got, tc.want) {
				t.Errorf("note (-want +got):\n%s", cmp.Diff(tc.want, got))
			}
		})
	}
}
