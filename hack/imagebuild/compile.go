package imagebuild

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Compile cross-compiles opts.Package for every platform of opts into dir,
// as `make build` does: CGO_ENABLED=0, -trimpath and opts.LDFlags.
func Compile(ctx context.Context, opts Options, dir string) ([]Binary, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	bins := make([]Binary, 0, len(opts.Platforms))
	for _, p := range opts.Platforms {
		env, err := goEnv(p)
		if err != nil {
			return nil, err
		}
		out := filepath.Join(dir, "modelgate-"+strings.ReplaceAll(platformString(p), "/", "-"))
		fmt.Fprintf(opts.Log, "building %s for %s\n", opts.Package, platformString(p))
		cmd := exec.CommandContext(ctx, opts.Go, "build", "-trimpath", "-ldflags", opts.LDFlags, "-o", out, opts.Package) //nolint:gosec // the go command and its arguments come from the caller.
		cmd.Dir = opts.ModuleDir
		cmd.Env = append(os.Environ(), env...)
		cmd.Stdout = opts.Log
		cmd.Stderr = opts.Log
		if err := cmd.Run(); err != nil {
			return nil, fmt.Errorf("go build %s for %s: %w", opts.Package, platformString(p), err)
		}
		bins = append(bins, Binary{Platform: p, Path: out})
	}
	return bins, nil
}
