package pack

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"golang.org/x/sync/errgroup"
)

// ErrEmpty says the directory holds nothing to pack.
var ErrEmpty = errors.New("nothing to pack")

// Build makes the image index of dir: one manifest per platform, all
// over the same layers (see the package comment for how files are split
// into layers), annotated with o.Model. It reads every file once, to hash
// the layers, and holds no file's content in memory; the index reads the
// files again whenever a layer is read (by Push), so they must not change
// until then. The same directory and options give the same index digest.
func Build(ctx context.Context, dir string, o Options) (v1.ImageIndex, error) {
	if err := o.validate(); err != nil {
		return nil, err
	}
	dir, err := filepath.EvalSymlinks(dir) // a link to the directory is the directory
	if err != nil {
		return nil, err
	}
	ps, err := plans(dir, &o)
	if err != nil {
		return nil, err
	}
	if len(ps) == 0 {
		return nil, fmt.Errorf("%s: %w", dir, ErrEmpty)
	}
	layers, err := hashLayers(ctx, dir, ps, o.Jobs)
	if err != nil {
		return nil, err
	}
	ann := o.Model.annotations()
	images := make([]*image, len(o.Platforms))
	for i, p := range o.Platforms {
		if images[i], err = newImage(p, layers, ann); err != nil {
			return nil, err
		}
	}
	return newIndex(o.Platforms, images, ann)
}

// hashLayers makes the layers of ps, hashing jobs of them at once
// (default GOMAXPROCS).
func hashLayers(ctx context.Context, dir string, ps []plan, jobs int) ([]*layer, error) {
	if jobs <= 0 {
		jobs = runtime.GOMAXPROCS(0)
	}
	layers := make([]*layer, len(ps))
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(jobs)
	for i, p := range ps {
		g.Go(func() (err error) {
			layers[i], err = newLayer(ctx, dir, p)
			return err
		})
	}
	return layers, g.Wait()
}
