package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/modelgate/modelgate/api/annotations"
	"github.com/modelgate/modelgate/loader"
	"github.com/modelgate/modelgate/mutators"
	"github.com/modelgate/modelgate/pack"
)

const packUsage = `modelgate pack: put a model into an OCI image, laid out as modelgate load lays out a directory.

Usage:
  modelgate pack URI IMAGE [flags]

URI is any model modelgate load reads: hf://org/repo[@revision],
s3://bucket/prefix, gs://bucket/prefix, https://host/path/file[#sha256=<hex>]
or oci://registry/repo(:tag|@sha256:<hex>); not pvc://. IMAGE is
registry/repository:tag.

The model is loaded into a work directory (--dir, or a temporary one),
packed into an image whose volume, mounted at /models, holds what
modelgate load writes into /models (an hf:// model's Hugging Face hub
cache too), pushed to IMAGE and read back. The model's credentials come
from the environment, as for modelgate load; the registry's from the
Docker config (docker login).

Exit codes: 0 pushed, 1 failed, 2 invalid.

Flags:
`

// packLoadFlags are the load flags pack takes too, with load's defaults.
var packLoadFlags = []string{"concurrency", "part-size", "stall-timeout", "timeout", "ca-bundle", "log-format"}

// packFlags are the pack subcommand's flags.
type packFlags struct {
	load      loadFlags
	dir       string
	threshold string
	insecure  bool
}

func (f *packFlags) bind(fs *flag.FlagSet) {
	fs.StringVar(&f.dir, "dir", "", "work directory the model is loaded into, and kept: a later pack with the same --dir loads nothing again (default: a temporary directory, removed)")
	fs.StringVar(&f.threshold, "layer-threshold", "1Mi", "files of at least this size get a layer of their own (a quantity: 512Ki, 64Mi)")
	fs.BoolVar(&f.insecure, "insecure", false, "allow a registry over plain HTTP")
	load := flag.NewFlagSet("load", flag.ContinueOnError)
	f.load.bind(load)
	f.load.logFormat = "text"
	for _, n := range packLoadFlags {
		l := load.Lookup(n)
		fs.Var(l.Value, n, l.Usage)
	}
}

// packArgs are pack's arguments, parsed and checked.
type packArgs struct {
	uri       annotations.ModelURI
	image     name.Tag
	threshold int64
}

// parse checks the arguments before anything is fetched. Each error
// names the argument, the value and what is accepted.
func (f *packFlags) parse(args []string) (*packArgs, error) {
	if len(args) != 2 {
		return nil, fmt.Errorf("takes a model URI and an image (modelgate pack URI IMAGE), got %d arguments: %w", len(args), loader.ErrInvalid)
	}
	u, err := annotations.ParseModelURI(args[0])
	if err != nil {
		return nil, fmt.Errorf("URI %s: %w: %w", annotations.RedactURI(args[0]), err, loader.ErrInvalid)
	}
	if u.Scheme == annotations.SchemePVC {
		return nil, fmt.Errorf("URI %s: a pvc:// model is a claim already in the cluster and cannot be packed; "+
			"pack the model it was loaded from (hf://, s3://, gs://, https:// or oci://): %w", annotations.RedactURI(args[0]), loader.ErrInvalid)
	}
	image, err := pack.ParseImage(args[1], f.insecure)
	if err != nil {
		return nil, fmt.Errorf("IMAGE %w: %w", err, loader.ErrInvalid)
	}
	// The workload names the image as an oci:// model: it must be one.
	if _, err := annotations.ParseModelURI("oci://" + image.Name()); err != nil {
		return nil, fmt.Errorf("IMAGE %q cannot be mounted as a model, oci://%s: %w: %w", args[1], image.Name(), err, loader.ErrInvalid)
	}
	q, err := resource.ParseQuantity(f.threshold)
	if err != nil || q.Value() < 1 {
		return nil, fmt.Errorf("--layer-threshold %q must be a positive quantity (512Ki, 1Mi, 64Mi): %w", f.threshold, loader.ErrInvalid)
	}
	return &packArgs{uri: u, image: image, threshold: q.Value()}, nil
}

func packCmd(args []string, stdout, stderr io.Writer) int {
	var f packFlags
	positional, code, done := parseCommand("pack", packUsage, f.bind, args, stdout, stderr)
	if done {
		return code
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx = logr.NewContext(ctx, newLoadLogger(f.load.logFormat, stderr))

	r, err := runPack(ctx, &f, positional)
	if err != nil {
		code := exitLoadFailed
		msg := err.Error()
		if errors.Is(err, loader.ErrInvalid) {
			code, msg = exitLoadInvalid, strings.TrimSuffix(msg, ": "+loader.ErrInvalid.Error())
		}
		fmt.Fprintf(stderr, "modelgate pack: %s\n", scrub(msg))
		return code
	}
	r.print(stdout)
	return 0
}

// packed is what a pack did, for its report.
type packed struct {
	args   *packArgs
	load   *loader.Result
	ref    name.Digest
	layers int
	bytes  int64
	took   time.Duration
}

// runPack loads the model into the work directory, builds its image and
// pushes it.
func runPack(ctx context.Context, f *packFlags, args []string) (*packed, error) {
	a, err := f.parse(args)
	if err != nil {
		return nil, err
	}
	if f.load.timeout > 0 { // the whole pack's, not only the load's
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, f.load.timeout)
		defer cancel()
	}
	dir := f.dir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "modelgate-pack-"); err != nil {
			return nil, fmt.Errorf("the work directory: %w", err)
		}
		defer os.RemoveAll(dir)
	}
	lf := f.load
	lf.uri, lf.dest, lf.timeout = a.uri.Raw, dir, 0
	res, err := runLoad(ctx, &lf)
	if err != nil {
		return nil, fmt.Errorf("loading %s: %w", annotations.RedactURI(a.uri.Raw), err)
	}

	start := time.Now()
	model := pack.Model{URI: annotations.RedactURI(a.uri.Raw)}
	if a.uri.Scheme == annotations.SchemeHF {
		model.HFRepo, model.HFCommit = a.uri.Path, res.Revision
	}
	idx, err := pack.Build(ctx, dir, pack.Options{LayerThreshold: a.threshold, Exclude: []string{loader.StateDir}, Model: model})
	if err != nil {
		return nil, fmt.Errorf("building the image of %s: %w", dir, err)
	}
	p := &packed{args: a, load: res}
	if p.layers, p.bytes, err = layerStats(idx); err != nil {
		return nil, err
	}
	log := logr.FromContextOrDiscard(ctx)
	log.Info("pushing", "image", a.image.String(), "layers", p.layers, "bytes", p.bytes)
	var last time.Time
	progress := func(complete, total int64) {
		if now := time.Now(); now.Sub(last) >= f.load.progressInterval {
			last = now
			log.Info("pushing", "written", loader.HumanBytes(complete), "of", loader.HumanBytes(total))
		}
	}
	if p.ref, err = pack.Push(ctx, idx, a.image, pack.PushOptions{Progress: progress}); err != nil {
		return nil, err
	}
	p.took = time.Since(start)
	return p, nil
}

// layerStats counts the layers of the index's first image (every image
// has the same) and their bytes.
func layerStats(idx v1.ImageIndex) (int, int64, error) {
	im, err := idx.IndexManifest()
	if err != nil {
		return 0, 0, err
	}
	img, err := idx.Image(im.Manifests[0].Digest)
	if err != nil {
		return 0, 0, err
	}
	m, err := img.Manifest()
	if err != nil {
		return 0, 0, err
	}
	var n int64
	for _, l := range m.Layers {
		n += l.Size
	}
	return len(m.Layers), n, nil
}

// print reports the pack on w: what was loaded, the image pushed by
// digest, its layers, the pack's speed, and how a workload mounts it.
func (p *packed) print(w io.Writer) {
	msg, _ := outcome(p.load, nil)
	fmt.Fprintf(w, "load: %s\n", msg)
	fmt.Fprintf(w, "pushed %s\n", p.ref)
	fmt.Fprintf(w, "layers: %d, %s\n", p.layers, loader.HumanBytes(p.bytes))
	rate := ""
	if s := p.took.Seconds(); s > 0 {
		rate = fmt.Sprintf(" (%.1f MB/s)", float64(p.bytes)/1e6/s)
	}
	fmt.Fprintf(w, "pack: built, pushed and verified in %s%s\n", seconds(p.took), rate)
	fmt.Fprintf(w, "\nTo mount it as an image volume, annotate the workload:\n  %s: oci://%s\n  %s: %s\n",
		annotations.Model, p.ref, annotations.ModelMount, annotations.DeliveryImageVolume)
	if p.args.uri.Scheme == annotations.SchemeHF {
		fmt.Fprint(w, "\n"+hubMirrorNote(p.args.uri, p.args.image))
	}
}

// hubMirrorNote says how the image serves an hf:// URI itself, from the
// Configuration's hub mirror: the webhook mounts
// <mirror>/<org>/<name>:<revision> for it.
func hubMirrorNote(u annotations.ModelURI, image name.Tag) string {
	keep := fmt.Sprintf("  %s: %s\n  %s: %s\n", annotations.Model, u.Raw, annotations.ModelMount, annotations.DeliveryImageVolume)
	pushed := image.Name()
	tail := "/" + strings.ToLower(u.Path) + ":" + image.TagStr()
	if mirror, ok := strings.CutSuffix(pushed, tail); ok {
		if ref, err := mutators.HubMirrorImage(mirror, u); err == nil && ref == pushed {
			return fmt.Sprintf("Or keep the Hugging Face model: where the Configuration's injection.imageVolumes.hubMirror is %s,\n"+
				"the webhook mounts this image for\n%s", mirror, keep)
		}
	}
	ref, err := mutators.HubMirrorImage("<mirror>", u)
	if err != nil {
		return fmt.Sprintf("This image cannot be a hub mirror's: %v.\n", err)
	}
	return fmt.Sprintf("Or keep the Hugging Face model: for\n%sthe webhook mounts %s,\n"+
		"<mirror> being the Configuration's injection.imageVolumes.hubMirror; pack to that image to serve it so.\n", keep, ref)
}
