package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"regexp"
	"runtime/pprof"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/modelgate/modelgate/api/annotations"
	"github.com/modelgate/modelgate/loader"
)

// Exit codes of `modelgate load`, one per failure kind, so that a Pod's
// status tells them apart without reading logs.
const (
	exitLoadFailed   = 1
	exitLoadInvalid  = 2
	exitNotFound     = 3
	exitAccessDenied = 4
	exitVerification = 5
	exitNoSpace      = 6
	exitTimeout      = 7
	exitNotWritable  = 8
)

// loadExit maps a failure kind to its exit code and the word the
// termination message starts with.
var loadExit = []struct {
	kind error
	code int
	word string
}{
	{loader.ErrInvalid, exitLoadInvalid, "invalid"},
	{loader.ErrNotFound, exitNotFound, "not found"},
	{loader.ErrAccessDenied, exitAccessDenied, "access denied"},
	{loader.ErrVerification, exitVerification, "verification failed"},
	{loader.ErrNoSpace, exitNoSpace, "no space"},
	{loader.ErrTimeout, exitTimeout, "timed out"},
	{loader.ErrNotWritable, exitNotWritable, "not writable"},
	{context.DeadlineExceeded, exitTimeout, "timed out"},
}

const loadUsage = `modelgate load: put a model into a directory, whole and verified, or not at all.

Usage:
  modelgate load URI DIR [flags]
  modelgate load --uri=URI --dest=DIR [flags]

URI is a modelgate.io/model value: s3://bucket/prefix, gs://bucket/prefix,
hf://org/repo[@revision], https://host/path/file[#sha256=<hex>] or
oci://registry/repo(:tag|@sha256:<hex>). Credentials come from the
environment (docs/loader.md), never from flags.

Exit codes: 0 loaded (or already there), 1 failed, 2 invalid, 3 not found,
4 access denied, 5 verification failed, 6 no space, 7 timed out,
8 destination not writable.

Flags:
`

// loadFlags are the load subcommand's flags.
type loadFlags struct {
	uri, dest        string
	concurrency      int
	partSize         string
	stallTimeout     time.Duration
	timeout          time.Duration
	takeoverAfter    time.Duration
	progressInterval time.Duration
	caBundle         string
	terminationLog   string
	logFormat        string
	cpuProfile       string
}

func (f *loadFlags) bind(fs *flag.FlagSet) {
	fs.StringVar(&f.uri, "uri", "", "the model (required)")
	fs.StringVar(&f.dest, "dest", "", "the destination directory (required)")
	fs.IntVar(&f.concurrency, "concurrency", 16, "ranged reads in flight at once")
	fs.StringVar(&f.partSize, "part-size", "16Mi", "size of a ranged read (a quantity: 8Mi, 64Mi)")
	fs.DurationVar(&f.stallTimeout, "stall-timeout", time.Minute, "retry a read that receives no byte for this long")
	fs.DurationVar(&f.timeout, "timeout", 0, "give up after this long in all (0: no limit; reads still time out on stalls)")
	fs.DurationVar(&f.takeoverAfter, "takeover-after", 3*time.Minute, "take over a shared destination whose loader made no progress for this long")
	fs.DurationVar(&f.progressInterval, "progress-interval", 5*time.Second, "how often progress is logged")
	fs.StringVar(&f.caBundle, "ca-bundle", os.Getenv("MODELGATE_CA_BUNDLE"), "PEM file of CA certificates trusted besides the system's ($MODELGATE_CA_BUNDLE)")
	fs.StringVar(&f.terminationLog, "termination-log", "/dev/termination-log", "file for the one-line outcome Kubernetes shows as the container's message (empty: none)")
	fs.StringVar(&f.logFormat, "log-format", "json", "log format: json or text")
	fs.StringVar(&f.cpuProfile, "cpuprofile", "", "write a CPU profile of the load to this file (go tool pprof reads it)")
}

// parseInterleaved parses flags that come before, between or after the
// positional arguments (modelgate load URI DIR --concurrency 32), as cp
// and s5cmd are called; "--" ends the flags.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return positional, nil
		}
		if len(args) > len(rest) && args[len(args)-len(rest)-1] == "--" {
			return append(positional, rest...), nil
		}
		positional, args = append(positional, rest[0]), rest[1:]
	}
}

// positional takes URI and DIR from the positional arguments, which
// --uri and --dest must then not repeat.
func (f *loadFlags) positional(args []string) error {
	switch {
	case len(args) == 0:
		return nil
	case len(args) != 2:
		return fmt.Errorf("takes a URI and a directory (modelgate load URI DIR), got %d arguments: %w", len(args), loader.ErrInvalid)
	case f.uri != "" || f.dest != "":
		return fmt.Errorf("the URI and directory are given both as arguments and as --uri/--dest; give one of them: %w", loader.ErrInvalid)
	}
	f.uri, f.dest = args[0], args[1]
	return nil
}

// parseCommand parses a loader command's flags, bound by bind, and its
// positional arguments anywhere among them. -h prints usage and the flags
// to stdout and ends the command with 0; a bad flag (which the flag
// package reports on stderr) ends it with exitLoadInvalid. done says the
// command is over, with code.
func parseCommand(name, usage string, bind func(*flag.FlagSet), args []string, stdout, stderr io.Writer) (positional []string, code int, done bool) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	bind(fs)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usage)
		fs.PrintDefaults()
	}
	positional, err := parseInterleaved(fs, args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		fs.SetOutput(stdout)
		fs.Usage()
		return nil, 0, true
	case err != nil:
		return nil, exitLoadInvalid, true
	}
	return positional, 0, false
}

func loadCmd(args []string, stdout, stderr io.Writer) int {
	var f loadFlags
	positional, code, done := parseCommand("load", loadUsage, f.bind, args, stdout, stderr)
	if done {
		return code
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log := newLoadLogger(f.logFormat, stderr)
	ctx = logr.NewContext(ctx, log)
	if set := applyEnvDefaults(); len(set) > 0 {
		log.Info("the cluster's defaults", "variables", set)
	}

	var res *loader.Result
	err := f.positional(positional)
	if err == nil && f.cpuProfile != "" {
		var stopProfile func()
		if stopProfile, err = startCPUProfile(f.cpuProfile); err == nil {
			defer stopProfile()
		}
	}
	if err == nil {
		res, err = runLoad(ctx, &f)
	}
	msg, code := outcome(res, err)
	writeTerminationMessage(f.terminationLog, msg)
	if err != nil {
		log.Error(nil, msg, "exitCode", code)
	} else {
		log.Info(msg)
	}
	return code
}

// startCPUProfile profiles the process's CPU into path until the returned
// function is called.
func startCPUProfile(path string) (func(), error) {
	out, err := os.Create(path) //nolint:gosec // a file the user names
	if err != nil {
		return nil, fmt.Errorf("--cpuprofile: %w: %w", err, loader.ErrInvalid)
	}
	if err := pprof.StartCPUProfile(out); err != nil {
		_ = out.Close()
		return nil, fmt.Errorf("--cpuprofile: %w: %w", err, loader.ErrInvalid)
	}
	return func() {
		pprof.StopCPUProfile()
		_ = out.Close()
	}, nil
}

// writeTerminationMessage writes the outcome where the kubelet reads it.
// The kubelet creates that file before the container starts; outside a
// Pod it does not exist and nothing is written (never a new file in /dev).
func writeTerminationMessage(path, msg string) {
	if path == "" {
		return
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0) //nolint:gosec // the termination message file the kubelet mounts, named by a flag
	if err != nil {
		return
	}
	_, _ = f.WriteString(msg)
	_ = f.Close()
}

func newLoadLogger(format string, w io.Writer) logr.Logger {
	opts := &slog.HandlerOptions{Level: slog.LevelInfo}
	if format == "text" {
		return logr.FromSlogHandler(slog.NewTextHandler(w, opts))
	}
	return logr.FromSlogHandler(slog.NewJSONHandler(w, opts))
}

func runLoad(ctx context.Context, f *loadFlags) (*loader.Result, error) {
	if f.uri == "" || f.dest == "" {
		return nil, fmt.Errorf("a URI and a directory are required (modelgate load URI DIR, or --uri and --dest): %w", loader.ErrInvalid)
	}
	u, err := annotations.ParseModelURI(f.uri)
	if err != nil {
		return nil, fmt.Errorf("--uri %s: %w: %w", annotations.RedactURI(f.uri), err, loader.ErrInvalid)
	}
	part, err := resource.ParseQuantity(f.partSize)
	if err != nil || part.Value() < 64<<10 || part.Value() > 1<<30 {
		return nil, fmt.Errorf("--part-size %q must be a quantity from 64Ki to 1Gi: %w", f.partSize, loader.ErrInvalid)
	}
	if f.concurrency < 1 || f.concurrency > 256 {
		return nil, fmt.Errorf("--concurrency %d must be from 1 to 256: %w", f.concurrency, loader.ErrInvalid)
	}
	if f.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, f.timeout)
		defer cancel()
	}
	if u.Scheme == annotations.SchemePVC {
		return nil, fmt.Errorf("pvc:// models are mounted into the serving container, not loaded: %w", loader.ErrInvalid)
	}
	src := &lazySource{mk: func() (loader.Source, error) { return newSource(ctx, u, f) }}
	return loader.Load(ctx, src, loader.Options{
		Dest: f.dest, URI: f.uri, Concurrency: f.concurrency, PartSize: part.Value(),
		StallTimeout: f.stallTimeout, TakeoverAfter: f.takeoverAfter, ProgressEvery: f.progressInterval,
		Extract: extract, Version: version,
		// The Pod, as the webhook passes it: the lock's identity.
		Host: os.Getenv("MODELGATE_POD_UID"),
	})
}

// outcome is the one line Kubernetes shows for the container, and the exit
// code.
func outcome(r *loader.Result, err error) (string, int) {
	if err != nil {
		code, word, text := exitLoadFailed, "failed", err.Error()
		for _, k := range loadExit {
			if errors.Is(err, k.kind) {
				code, word = k.code, k.word
				// The kind leads the message; the sentinel's own ": not
				// found" at its end would only repeat it.
				text = strings.TrimSuffix(text, ": "+k.kind.Error())
				break
			}
		}
		return clip("load failed (" + word + "): " + scrub(text)), code
	}
	rev := ""
	if r.Revision != "" {
		rev = ", revision " + shortRevision(r.Revision)
	}
	verified := "verified"
	if r.Verified < r.Files {
		verified = fmt.Sprintf("%d of %d files verified (the source lists no digest for the others)", r.Verified, r.Files)
	}
	switch {
	case r.CacheHit:
		return clip(fmt.Sprintf("already loaded: %d files, %s%s, %s", r.Files, loader.HumanBytes(r.Bytes), rev, verified)), 0
	case r.Waited:
		return clip(fmt.Sprintf("loaded by another Pod sharing the cache: %d files, %s%s, %s (waited %s)",
			r.Files, loader.HumanBytes(r.Bytes), rev, verified, seconds(r.Elapsed))), 0
	}
	rate := ""
	if s := r.Elapsed.Seconds(); s > 0 && r.Fetched > 0 {
		rate = " (" + loader.HumanBytes(int64(float64(r.Fetched)/s)) + "/s)"
	}
	resumed := ""
	if r.Resumed > 0 {
		resumed = ", " + loader.HumanBytes(r.Resumed) + " resumed"
	}
	return clip(fmt.Sprintf("loaded %d files, %s in %s%s%s%s, %s", r.Files, loader.HumanBytes(r.Bytes), seconds(r.Elapsed), rate, resumed, rev, verified)), 0
}

func seconds(d time.Duration) string {
	if d < 10*time.Second {
		return fmt.Sprintf("%.1f s", d.Seconds())
	}
	return fmt.Sprintf("%d s", int(d.Round(time.Second).Seconds()))
}

// shortRevision shortens a commit or digest for the message.
func shortRevision(r string) string {
	if d, ok := strings.CutPrefix(r, "sha256:"); ok && len(d) > 12 {
		return "sha256:" + d[:12]
	}
	if len(r) == 40 {
		return r[:7]
	}
	return r
}

// maxTerminationMessage is what Kubernetes keeps of a termination message.
const maxTerminationMessage = 4096

func clip(s string) string {
	if len(s) > maxTerminationMessage {
		return s[:maxTerminationMessage-3] + "..."
	}
	return s
}

// urlQuery finds a URL's query string. Sources keep credentials out of
// their errors; scrub is the second line of defence for the termination
// message and the log: no query string (a signature, a token) ever leaves.
var (
	urlQuery   = regexp.MustCompile(`((?:https?|s3|gs|oci)://[^\s?"']*)\?[^\s"']*`)
	bearerWord = regexp.MustCompile(`(?i)\b(bearer )[A-Za-z0-9._~+/-]+=*`)
	keyValue   = regexp.MustCompile(`(?i)\b(token|password|secret|signature|sig|credential)=[^\s&"',]+`)
)

func scrub(s string) string {
	s = urlQuery.ReplaceAllString(s, "$1?<redacted>")
	s = bearerWord.ReplaceAllString(s, "$1<redacted>")
	return keyValue.ReplaceAllString(s, "$1=<redacted>")
}
