// Package imagebuild builds modelgate's container image without a container
// engine: it cross-compiles cmd/modelgate for each platform and assembles,
// FROM SCRATCH, an OCI image index with one image per platform. Each image
// holds the static binary at /modelgate, a CA bundle, /etc/passwd and
// /etc/group with the nonroot user 65532 and its home, and an empty /tmp,
// and runs as 65532:65532: the same layout as the Dockerfile's distroless
// image.
//
// The build is reproducible: every timestamp is Options.Created, tar entries
// are sorted with fixed owners and modes, and compression is deterministic,
// so two builds of one commit with one Go toolchain give one digest.
package imagebuild

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Paths, user and command of the image; the Dockerfile's image has the same.
const (
	// BinaryPath is where the modelgate binary lives in the image.
	BinaryPath = "/modelgate"
	// CABundlePath is the CA bundle, where Go (and distroless) look for it.
	CABundlePath = "/etc/ssl/certs/ca-certificates.crt"
	// NonrootID is the nonroot user's and group's id (distroless's nonroot).
	NonrootID = 65532
	// User is the image's user: nonroot, by number so that Kubernetes'
	// runAsNonRoot can check it without reading /etc/passwd.
	User = "65532:65532"
	// DefaultCmd is the subcommand run when none is given: the webhook server.
	DefaultCmd = "serve"
)

// The OCI labels of the image (org.opencontainers.image.*); the Dockerfile
// sets the same.
const (
	LabelSource      = "org.opencontainers.image.source"
	LabelDescription = "org.opencontainers.image.description"
	LabelLicenses    = "org.opencontainers.image.licenses"
	LabelVersion     = "org.opencontainers.image.version"
	LabelRevision    = "org.opencontainers.image.revision"

	Source      = "https://github.com/modelgate/modelgate"
	Description = "Admission webhook and policy engine for GPU and AI workloads"
	Licenses    = "Apache-2.0"
)

// DefaultPackage is the main package built into BinaryPath.
const DefaultPackage = "./cmd/modelgate"

// Program is the one program an image runs: where its binary lives, the
// other names it answers to, and the image's entrypoint, command and user.
// The zero Program is modelgate's (ModelgateProgram). The simulated
// cluster's real node builds its pause and stand-in engine images with
// other programs on the same base files.
type Program struct {
	// Path is the binary's absolute path in the image.
	Path string `json:"path"`
	// Links are more absolute paths that are symbolic links to Path, for a
	// program that acts on the name it is called by (as busybox does).
	Links []string `json:"links,omitempty"`
	// Entrypoint and Cmd are the image config's.
	Entrypoint []string `json:"entrypoint,omitempty"`
	Cmd        []string `json:"cmd,omitempty"`
	// User is the image's "uid:gid", by number.
	User string `json:"user"`
	// Description is the org.opencontainers.image.description label.
	Description string `json:"description,omitempty"`
}

// ModelgateProgram is modelgate's: /modelgate serve, as nonroot.
func ModelgateProgram() Program {
	return Program{
		Path: BinaryPath, Entrypoint: []string{BinaryPath}, Cmd: []string{DefaultCmd},
		User: User, Description: Description,
	}
}

func (p Program) isZero() bool {
	return p.Path == "" && len(p.Links) == 0 && len(p.Entrypoint) == 0 && len(p.Cmd) == 0 && p.User == "" && p.Description == ""
}

func (p Program) check() error {
	var errs []error
	for _, path := range append([]string{p.Path}, p.Links...) {
		if !strings.HasPrefix(path, "/") || path == "/" || strings.HasSuffix(path, "/") || strings.Contains(path, "//") {
			errs = append(errs, fmt.Errorf("the program's path %q must be an absolute file path", path))
		}
	}
	if uid, gid, ok := strings.Cut(p.User, ":"); !ok || !isNumber(uid) || !isNumber(gid) {
		errs = append(errs, fmt.Errorf("the program's user %q must be uid:gid by number", p.User))
	}
	return errors.Join(errs...)
}

func isNumber(s string) bool {
	_, err := strconv.ParseUint(s, 10, 32)
	return err == nil
}

// Options says what to build. ModuleDir, Version and Created are required.
type Options struct {
	// ModuleDir is the root of the modelgate module (the directory of go.mod).
	ModuleDir string
	// Package is the main package to build, relative to ModuleDir;
	// DefaultPackage when empty.
	Package string
	// Program is where the binary goes and how the image runs it;
	// ModelgateProgram when zero.
	Program Program
	// Version is the version stamped into the binary and the version label.
	Version string
	// Revision is the source revision (commit) for the revision label;
	// the label is left out when empty.
	Revision string
	// LDFlags are go build's -ldflags; LDFlags(Version) when empty. Keep them
	// the Makefile's (make build passes the same).
	LDFlags string
	// Platforms to build, linux only; DefaultPlatforms when empty.
	Platforms []v1.Platform
	// Created is the one timestamp of the build: the config's created time,
	// the history's and every file's modification time. Use the commit time
	// or SOURCE_DATE_EPOCH, never the clock, for a reproducible digest.
	Created time.Time
	// CABundle is the PEM bundle written to CABundlePath; MozillaRoots when
	// nil.
	CABundle []byte
	// Go is the go command; "go" when empty.
	Go string
	// Log receives go build's output and progress lines; discarded when nil.
	Log io.Writer
}

// Binary is a compiled modelgate for one platform.
type Binary struct {
	Platform v1.Platform
	// Path is the binary's file; Assemble reads it, so it must exist until
	// Assemble returns.
	Path string
}

// LDFlags returns the linker flags of `make build` for version: stripped,
// with main.version set.
func LDFlags(version string) string {
	return "-s -w -X main.version=" + version
}

// Build compiles modelgate for every platform of opts and assembles the
// image index. The binaries are compiled into a temporary directory that is
// gone when Build returns: the index holds its layers in memory.
func Build(ctx context.Context, opts Options) (v1.ImageIndex, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "modelgate-imagebuild-")
	if err != nil {
		return nil, fmt.Errorf("creating a directory for the binaries: %w", err)
	}
	defer os.RemoveAll(dir)
	bins, err := Compile(ctx, opts, dir)
	if err != nil {
		return nil, err
	}
	return Assemble(opts, bins)
}

// Assemble builds the image index from compiled binaries, one image per
// binary, in the order given. It reads every binary before it returns.
func Assemble(opts Options, bins []Binary) (v1.ImageIndex, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	if len(bins) == 0 {
		return nil, errors.New("no binaries to assemble")
	}
	if err := checkCABundle(opts.CABundle); err != nil {
		return nil, err
	}
	// One base layer for every platform: its blob is shared.
	base, err := newLayer(baseFiles(opts.CABundle), opts.Created)
	if err != nil {
		return nil, fmt.Errorf("building the base layer: %w", err)
	}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, bin := range bins {
		img, err := assembleImage(opts, bin, base)
		if err != nil {
			return nil, fmt.Errorf("assembling the %s image: %w", platformString(bin.Platform), err)
		}
		p := bin.Platform
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{
			Add:        img,
			Descriptor: v1.Descriptor{MediaType: types.OCIManifestSchema1, Platform: &p},
		})
	}
	// Registries (GHCR) read a multi-platform image's description and
	// source from the index's annotations.
	annotated, ok := mutate.Annotations(idx, labels(opts)).(v1.ImageIndex)
	if !ok {
		return nil, errors.New("annotating the index: unexpected type")
	}
	return annotated, nil
}

func assembleImage(opts Options, bin Binary, base v1.Layer) (v1.Image, error) {
	binLayer, err := newLayer(programFiles(opts.Program, bin.Path), opts.Created)
	if err != nil {
		return nil, fmt.Errorf("building the binary's layer: %w", err)
	}
	img, err := mutate.ConfigFile(empty.Image, configFile(opts, bin.Platform))
	if err != nil {
		return nil, err
	}
	created := v1.Time{Time: opts.Created}
	img, err = mutate.Append(img,
		mutate.Addendum{Layer: base, History: v1.History{
			Created:   created,
			CreatedBy: "imagebuild: /etc/passwd, /etc/group, " + CABundlePath + ", /home/nonroot, /tmp",
			Comment:   "base files (distroless static nonroot layout)",
		}},
		mutate.Addendum{Layer: binLayer, History: v1.History{
			Created:   created,
			CreatedBy: "imagebuild: go build -trimpath -ldflags '" + opts.LDFlags + "' -o " + opts.Program.Path + " " + opts.Package,
		}},
	)
	if err != nil {
		return nil, err
	}
	img = mutate.MediaType(img, types.OCIManifestSchema1)
	return mutate.ConfigMediaType(img, types.OCIConfigJSON), nil
}

func configFile(opts Options, p v1.Platform) *v1.ConfigFile {
	return &v1.ConfigFile{
		Created:      v1.Time{Time: opts.Created},
		OS:           p.OS,
		Architecture: p.Architecture,
		Variant:      p.Variant,
		RootFS:       v1.RootFS{Type: "layers"},
		Config: v1.Config{
			Entrypoint: opts.Program.Entrypoint,
			Cmd:        opts.Program.Cmd,
			User:       opts.Program.User,
			WorkingDir: "/",
			Env:        []string{"SSL_CERT_FILE=" + CABundlePath},
			Labels:     labels(opts),
		},
	}
}

func labels(opts Options) map[string]string {
	l := map[string]string{
		LabelSource:      Source,
		LabelDescription: opts.Program.Description,
		LabelLicenses:    Licenses,
		LabelVersion:     opts.Version,
	}
	if opts.Revision != "" {
		l[LabelRevision] = opts.Revision
	}
	return l
}

func (o Options) withDefaults() (Options, error) {
	var errs []error
	if o.ModuleDir == "" {
		errs = append(errs, errors.New("the module directory is required"))
	}
	if o.Version == "" {
		errs = append(errs, errors.New("the version is required"))
	}
	if o.Created.IsZero() {
		errs = append(errs, errors.New("the creation time is required (the commit time or SOURCE_DATE_EPOCH)"))
	}
	if o.Program.isZero() {
		o.Program = ModelgateProgram()
	}
	if err := o.Program.check(); err != nil {
		errs = append(errs, err)
	}
	if o.Created.Before(time.Unix(0, 0)) {
		errs = append(errs, fmt.Errorf("the creation time %s is before 1970", o.Created))
	}
	for _, p := range o.Platforms {
		if err := checkPlatform(p); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return o, err
	}
	if o.Package == "" {
		o.Package = DefaultPackage
	}
	if o.LDFlags == "" {
		o.LDFlags = LDFlags(o.Version)
	}
	if len(o.Platforms) == 0 {
		o.Platforms = DefaultPlatforms()
	}
	if o.CABundle == nil {
		roots, err := MozillaRoots()
		if err != nil {
			return o, err
		}
		o.CABundle = roots
	}
	if o.Go == "" {
		o.Go = "go"
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	// Whole seconds in UTC: tar headers stay plain ustar and the JSON
	// timestamps do not depend on the machine's zone.
	o.Created = o.Created.UTC().Truncate(time.Second)
	return o, nil
}
