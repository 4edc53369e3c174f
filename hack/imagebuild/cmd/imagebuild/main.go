// Command imagebuild is `make image` and `make image-push`: it builds
// modelgate's container image without a container engine (see package
// imagebuild), writes it as an OCI image layout directory and, if asked, a
// `docker load` tarball of one platform, and pushes it if asked.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/modelgate/modelgate/hack/imagebuild"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "imagebuild:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("imagebuild", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		moduleDir  = fs.String("module-dir", ".", "the modelgate module's root directory")
		version    = fs.String("version", "", "the version stamped into the binary and the version label (required)")
		revision   = fs.String("revision", "", "the revision label; default: the module's git HEAD")
		ldflags    = fs.String("ldflags", "", `go build -ldflags; default: "`+imagebuild.LDFlags("VERSION")+`"`)
		platforms  = fs.String("platforms", "linux/amd64,linux/arm64", "comma-separated platforms of the image index")
		image      = fs.String("image", "", "the image reference that names the layout's index and tags the tarball, e.g. ghcr.io/modelgate/modelgate:v1.2.3")
		layoutDir  = fs.String("oci-layout", "bin/image/oci", "write the OCI image layout (the whole index) to this directory, replacing it; empty: none")
		tarPath    = fs.String("tarball", "", "also write a docker load tarball of one platform's image, tagged --image, to this file")
		tarPlat    = fs.String("tarball-platform", "", "the tarball's platform; default: linux/"+runtime.GOARCH+" if built, else the first")
		push       = fs.String("push", "", "push the index to this registry reference with the default keychain (docker login)")
		caBundle   = fs.String("ca-bundle", "", "a PEM file to use as the image's CA bundle instead of Mozilla's roots from golang.org/x/crypto/x509roots/fallback")
		pkg        = fs.String("package", imagebuild.DefaultPackage, "the main package to build, relative to --module-dir")
		program    = fs.String("program", "", `another program than modelgate, as JSON: {"path": "/pause", "links": [], "entrypoint": ["/pause"], "cmd": [], "user": "65535:65535", "description": "..."}`)
		sourceDate = os.Getenv("SOURCE_DATE_EPOCH")
	)
	fs.Usage = func() {
		fmt.Fprintf(stderr, `Usage: imagebuild --version VERSION [flags]

Builds modelgate's image FROM SCRATCH for every platform, reproducibly: file
and config times are SOURCE_DATE_EPOCH, else the commit time of HEAD.

Flags:
`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if *version == "" {
		return errors.New("--version is required")
	}
	if *tarPath != "" && *image == "" {
		return errors.New("--tarball needs --image to tag the image")
	}
	plats, err := imagebuild.ParsePlatforms(*platforms)
	if err != nil {
		return fmt.Errorf("--platforms: %w", err)
	}
	created, err := creationTime(ctx, *moduleDir, sourceDate)
	if err != nil {
		return err
	}
	if *revision == "" {
		*revision = gitOutput(ctx, *moduleDir, "rev-parse", "HEAD")
	}
	var prog imagebuild.Program
	if *program != "" {
		dec := json.NewDecoder(strings.NewReader(*program))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&prog); err != nil {
			return fmt.Errorf("--program %s: %w", *program, err)
		}
	}
	opts := imagebuild.Options{
		Package:   *pkg,
		Program:   prog,
		ModuleDir: *moduleDir,
		Version:   *version,
		Revision:  *revision,
		LDFlags:   *ldflags,
		Platforms: plats,
		Created:   created,
		Log:       stderr,
	}
	if *caBundle != "" {
		b, err := os.ReadFile(filepath.Clean(*caBundle))
		if err != nil {
			return fmt.Errorf("--ca-bundle: %w", err)
		}
		opts.CABundle = b
	}
	var tarPlatform v1.Platform
	if *tarPath != "" {
		if tarPlatform, err = pickTarballPlatform(*tarPlat, plats); err != nil {
			return err
		}
	}

	idx, err := imagebuild.Build(ctx, opts)
	if err != nil {
		return err
	}
	digest, err := idx.Digest()
	if err != nil {
		return err
	}
	if *layoutDir != "" {
		if err := imagebuild.WriteLayout(*layoutDir, idx, *image); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "OCI image layout: %s (%s)\n", *layoutDir, *platforms)
	}
	if *tarPath != "" {
		if err := imagebuild.WriteTarball(*tarPath, idx, tarPlatform, *image); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "docker load tarball: %s (%s, %s)\n", *tarPath, tarPlatform.String(), *image)
	}
	if *push != "" {
		d, err := imagebuild.Push(ctx, idx, *push)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "pushed: %s\n", d)
	}
	if *image != "" {
		fmt.Fprintf(stdout, "image: %s\n", *image)
	}
	fmt.Fprintf(stdout, "digest: %s\n", digest)
	return nil
}

// creationTime is the build's one timestamp: SOURCE_DATE_EPOCH when set,
// else the commit time of the module's HEAD.
func creationTime(ctx context.Context, dir, sourceDateEpoch string) (time.Time, error) {
	if sourceDateEpoch != "" {
		secs, err := strconv.ParseInt(sourceDateEpoch, 10, 64)
		if err != nil || secs < 0 {
			return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH=%q: must be a non-negative number of seconds", sourceDateEpoch)
		}
		return time.Unix(secs, 0), nil
	}
	out := gitOutput(ctx, dir, "log", "-1", "--format=%ct")
	secs, err := strconv.ParseInt(out, 10, 64)
	if out == "" || err != nil {
		return time.Time{}, errors.New("no commit time: set SOURCE_DATE_EPOCH (seconds since 1970) outside a git checkout")
	}
	return time.Unix(secs, 0), nil
}

// gitOutput runs git in dir and returns its trimmed output, or "" when git
// fails (no git, not a checkout).
func gitOutput(ctx context.Context, dir string, args ...string) string {
	cmd := exec.CommandContext(ctx, "git", append([]string{"-C", dir}, args...)...) //nolint:gosec // fixed git queries.
	out, err := cmd.Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

func pickTarballPlatform(flagValue string, built []v1.Platform) (v1.Platform, error) {
	if flagValue != "" {
		ps, err := imagebuild.ParsePlatforms(flagValue)
		if err != nil || len(ps) != 1 {
			return v1.Platform{}, fmt.Errorf("--tarball-platform %q: want one platform such as linux/amd64", flagValue)
		}
		for _, p := range built {
			if p.Equals(ps[0]) {
				return p, nil
			}
		}
		return v1.Platform{}, fmt.Errorf("--tarball-platform %q is not one of --platforms", flagValue)
	}
	host := v1.Platform{OS: "linux", Architecture: runtime.GOARCH}
	for _, p := range built {
		if p.OS == host.OS && p.Architecture == host.Architecture {
			return p, nil
		}
	}
	return built[0], nil
}
