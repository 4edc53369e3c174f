package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"maps"
	"net"
	"net/http"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/modelgate/modelgate/internal/enginefacts"
)

// nodeImageNames are the OCI layouts `make node-images` writes into
// bin/node/images: modelgate's image as `make image` builds it, the pause
// image (test/standins/pause) and the stand-in engine (test/standins/engine).
var nodeImageNames = []string{"modelgate", "pause", "engine"}

// PauseImage is the sandbox image containerd runs for every Pod.
const PauseImage = "registry.k8s.io/pause:3.10"

// EngineImage is what the node's registry serves for a published engine
// image's repository: the stand-in engine (test/standins/engine), with
// the published image's entrypoint and the variables its ENV sets.
type EngineImage struct {
	Entrypoint []string
	Env        map[string]string
}

// TestEngineRepository is the stand-in engine's own repository.
const TestEngineRepository = "modelgate/test-engine"

// EngineRepositories are the repositories of the published serving images
// in modelgate's table of engine facts (internal/enginefacts), and
// TestEngineRepository, that the node's registry answers with the
// stand-in engine, whatever the registry host and tag, each with its
// image's entrypoint and variables: a published manifest naming
// docker.io/vllm/vllm-openai:v0.23.0 runs unchanged (vllm serve ...).
func EngineRepositories() (map[string]EngineImage, error) {
	table, err := enginefacts.Load()
	if err != nil {
		return nil, err
	}
	out := map[string]EngineImage{TestEngineRepository: {}}
	for _, e := range table.Engines {
		for _, i := range e.Images {
			img := EngineImage{Entrypoint: i.Entrypoint, Env: i.Env}
			if len(img.Entrypoint) == 0 {
				img.Entrypoint = nil
			}
			t, err := name.NewTag(i.Ref)
			if err != nil {
				return nil, fmt.Errorf("engine %s: image %q: want a tagged reference: %w", e.Name, i.Ref, err)
			}
			repo := t.RepositoryStr()
			if seen, ok := out[repo]; ok && !reflect.DeepEqual(seen, img) {
				return nil, fmt.Errorf("engine %s: image %s: its repository %s has another entrypoint or environment in the table", e.Name, i.Ref, repo)
			}
			out[repo] = img
		}
	}
	return out, nil
}

// engineTag is the tag the engine's repositories are pushed with; a
// request for any other tag of theirs is answered with it.
const engineTag = "latest"

// nodeRegistry is an OCI registry on 127.0.0.1 that serves the images the
// real node runs; containerd's hosts.toml sends every registry to it.
type nodeRegistry struct {
	host    string // 127.0.0.1:port
	srv     *http.Server
	ln      net.Listener
	engines map[string]EngineImage
}

// startNodeRegistry serves an empty in-memory registry on 127.0.0.1,
// logging its requests to logw.
func startNodeRegistry(logw io.Writer) (*nodeRegistry, error) {
	engines, err := EngineRepositories()
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listening for the node's registry: %w", err)
	}
	h := registry.New(registry.Logger(log.New(logw, "registry: ", log.LstdFlags)))
	r := &nodeRegistry{host: ln.Addr().String(), ln: ln, engines: engines, srv: &http.Server{
		Handler:           anyEngineTag(h, engines),
		ReadHeaderTimeout: 10 * time.Second,
	}}
	go func() { _ = r.srv.Serve(ln) }()
	return r, nil
}

// anyEngineTag answers a manifest request for any tag of an engine
// repository with engineTag's manifest.
func anyEngineTag(next http.Handler, engines map[string]EngineImage) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if repo, ref, ok := manifestRequest(req.URL.Path); ok && req.Method != http.MethodPut {
			if _, engine := engines[repo]; engine && !strings.Contains(ref, ":") && ref != engineTag {
				req = req.Clone(req.Context())
				req.URL.Path = "/v2/" + repo + "/manifests/" + engineTag
			}
		}
		next.ServeHTTP(w, req)
	})
}

// manifestRequest splits /v2/<repo>/manifests/<reference>.
func manifestRequest(path string) (repo, ref string, ok bool) {
	rest, ok := strings.CutPrefix(path, "/v2/")
	if !ok {
		return "", "", false
	}
	i := strings.LastIndex(rest, "/manifests/")
	if i <= 0 {
		return "", "", false
	}
	return rest[:i], rest[i+len("/manifests/"):], true
}

// Close stops the registry.
func (r *nodeRegistry) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return r.srv.Shutdown(ctx)
}

// hostPlatform is the platform the node runs images for.
func hostPlatform() v1.Platform { return v1.Platform{OS: "linux", Architecture: runtime.GOARCH} }

// layoutImage reads the host platform's image from an OCI layout's one
// index.
func layoutImage(dir string) (v1.Image, error) {
	p, err := layout.FromPath(dir)
	if err != nil {
		return nil, fmt.Errorf("reading the image layout %s: %w", dir, err)
	}
	top, err := p.ImageIndex()
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", dir, err)
	}
	m, err := top.IndexManifest()
	if err != nil {
		return nil, fmt.Errorf("%s: want one image index in the layout: %w", dir, err)
	}
	if len(m.Manifests) != 1 {
		return nil, fmt.Errorf("%s: want one image index in the layout, found %d", dir, len(m.Manifests))
	}
	idx, err := top.ImageIndex(m.Manifests[0].Digest)
	if err != nil {
		return nil, fmt.Errorf("reading %s's index: %w", dir, err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return nil, fmt.Errorf("reading %s's index: %w", dir, err)
	}
	want := hostPlatform()
	for _, d := range im.Manifests {
		if d.Platform != nil && d.Platform.OS == want.OS && d.Platform.Architecture == want.Architecture {
			return idx.Image(d.Digest)
		}
	}
	return nil, fmt.Errorf("%s has no %s image: build it with IMAGE_PLATFORMS including it", dir, want)
}

// push pushes img to the registry as repo:tag, in an index that names its
// platform (containerd picks images by platform).
func (r *nodeRegistry) push(ctx context.Context, img v1.Image, repoTag string) error {
	ref, err := name.ParseReference(r.host+"/"+repoTag, name.Insecure)
	if err != nil {
		return fmt.Errorf("image name %s: %w", repoTag, err)
	}
	p := hostPlatform()
	idx := mutate.AppendManifests(mutate.IndexMediaType(empty.Index, types.OCIImageIndex), mutate.IndexAddendum{
		Add: img, Descriptor: v1.Descriptor{Platform: &p},
	})
	if err := remote.WriteIndex(ref, idx, remote.WithContext(ctx)); err != nil {
		return fmt.Errorf("pushing %s to the node's registry: %w", repoTag, err)
	}
	return nil
}

// asEngineImage returns img with e's entrypoint, no command, and e's
// variables set over the image's own.
func asEngineImage(img v1.Image, e EngineImage) (v1.Image, error) {
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.Config.Entrypoint = e.Entrypoint
	cf.Config.Cmd = nil
	cf.Config.Env = slices.DeleteFunc(cf.Config.Env, func(kv string) bool {
		k, _, _ := strings.Cut(kv, "=")
		_, set := e.Env[k]
		return set
	})
	for _, k := range slices.Sorted(maps.Keys(e.Env)) {
		cf.Config.Env = append(cf.Config.Env, k+"="+e.Env[k])
	}
	return mutate.ConfigFile(img, cf)
}

// pushNodeImages pushes the layouts in imagesDir: modelgate's under each
// of modelgateRefs (the Configuration's injection.loader.image first, each
// with its registry host dropped: every host resolves to this registry), the pause
// image as PauseImage, and the engine under each of r.engines.
func (r *nodeRegistry) pushNodeImages(ctx context.Context, imagesDir string, modelgateRefs []string) error {
	images := map[string]v1.Image{}
	for _, n := range nodeImageNames {
		img, err := layoutImage(filepath.Join(imagesDir, n))
		if err != nil {
			return err
		}
		images[n] = img
	}
	refs := map[string]v1.Image{PauseImage: images["pause"]}
	for _, ref := range modelgateRefs {
		refs[ref] = images["modelgate"]
	}
	var errs []error
	for ref, img := range refs {
		repoTag, err := repositoryAndTag(ref)
		if err != nil {
			return err
		}
		errs = append(errs, r.push(ctx, img, repoTag))
	}
	for repo, e := range r.engines {
		img, err := asEngineImage(images["engine"], e)
		if err != nil {
			return fmt.Errorf("setting %s's entrypoint and environment: %w", repo, err)
		}
		errs = append(errs, r.push(ctx, img, repo+":"+engineTag))
	}
	return errors.Join(errs...)
}

// repositoryAndTag returns "repository:tag" of an image reference, without
// its registry (docker.io's library/ kept).
func repositoryAndTag(ref string) (string, error) {
	t, err := name.NewTag(ref)
	if err != nil {
		return "", fmt.Errorf("image %q: want a tagged reference: %w", ref, err)
	}
	return t.RepositoryStr() + ":" + t.TagStr(), nil
}
