// Command modelgate is the admission webhook and mutating policy engine for
// GPU and AI workloads. It has subcommands; this file only dispatches them.
package main

import (
	"fmt"
	"io"
	"os"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

const usage = `modelgate: admission webhook and policy engine for GPU and AI workloads.

Usage:
  modelgate serve [flags]    run the webhook server (modelgate serve -h for flags)
  modelgate render -f FILE   run manifests through the webhooks offline: mutated objects
                             on stdout, decisions on stderr (modelgate render -h for flags)
  modelgate test PATH...     run the Rego tests and declarative case files under PATH
  modelgate migrate          rewrite every AIInference in the storage version (modelgate migrate -h)
  modelgate version          print the version
`

func main() {
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
	case "migrate":
		return migrateCmd(args[1:], stdout, stderr)
	case "version":
		fmt.Fprintln(stdout, version)
		return 0
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "modelgate: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
}
