// Command modelgate is the admission webhook and mutating policy engine for
// GPU and AI workloads. It has subcommands; this file only dispatches them.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	buildversion "github.com/modelgate/modelgate/internal/version"
)

// version is set at build time with -ldflags "-X main.version=..." (make
// build, make image and the Dockerfile do). main hands it to
// internal/version, where the rest of modelgate reads it (the default
// loader image is this release's).
var version = "dev"

const usage = `modelgate: admission webhook and policy engine for GPU and AI workloads.

Usage:
  modelgate serve [flags]    run the webhook server (modelgate serve -h for flags)
  modelgate render -f FILE   run manifests through the webhooks offline: mutated objects
                             on stdout, decisions on stderr (modelgate render -h for flags)
  modelgate test PATH...     run the Rego tests and declarative case files under PATH
  modelgate audit [-f FILE]  judge workloads that already exist (a cluster's, or manifests):
                             policy violations, missing or stale injection (modelgate audit -h)
  modelgate load --uri=URI --dest=DIR
                             fetch a model into DIR, whole and verified (the model-loader
                             init container; modelgate load -h for flags and exit codes)
  modelgate pack URI IMAGE   push a model as an OCI image laid out as load writes it (modelgate pack -h)
  modelgate migrate          rewrite every AIInference in the storage version (modelgate migrate -h)
  modelgate version          print the version
`

func main() {
	if version != "dev" && buildversion.Version == "dev" {
		buildversion.Version = version
	}
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "serve":
		return serve(args[1:], stderr)
	case "render":
		return render(args[1:], stdin, stdout, stderr)
	case "test":
		return test(args[1:], stdout, stderr)
	case "audit":
		return auditCmd(args[1:], stdin, stdout, stderr)
	case "load":
		return loadCmd(args[1:], stdout, stderr)
	case "pack":
		return packCmd(args[1:], stdout, stderr)
	case "migrate":
		return migrateCmd(args[1:], stdout, stderr)
	case "version":
		fmt.Fprintln(stdout, buildversion.Version)
		return 0
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "modelgate: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
}

// parseFlags parses a subcommand's flags. When it returns false the
// subcommand exits with code: 0 after -h (the flag package printed the
// usage), 2 after a bad flag (it printed the error and the usage).
func parseFlags(fs *flag.FlagSet, args []string) (code int, ok bool) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0, false
		}
		return 2, false
	}
	return 0, true
}
