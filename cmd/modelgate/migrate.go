package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os/signal"
	"syscall"

	"k8s.io/client-go/dynamic"

	"github.com/modelgate/modelgate/migrate"
)

const migrateUsage = `Usage: modelgate migrate [--kubeconfig FILE] [--crd NAME] [--prune-stored-versions]

Rewrites every AIInference through the API server, so that each is stored
in the CRD's storage version (v1), and with --prune-stored-versions then
sets the CRD's status.storedVersions to that version alone: after that,
older versions can be removed from the CRD. Needs list and patch on the
resource and update on customresourcedefinitions/status (a cluster admin).
Exit status: 0 done, 1 some objects failed (storedVersions left as they
were), 2 an error.

Flags:
`

func migrateCmd(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("modelgate migrate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, migrateUsage); fs.PrintDefaults() }
	kubeconfig := fs.String("kubeconfig", "", "path to a kubeconfig; in-cluster or $KUBECONFIG when empty")
	crd := fs.String("crd", "aiinferences.serving.modelgate.io", "the CustomResourceDefinition whose objects are rewritten")
	prune := fs.Bool("prune-stored-versions", false, "set status.storedVersions to the storage version once every object is rewritten")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "modelgate migrate: unexpected arguments %v\n", fs.Args())
		return 2
	}
	rc, err := restConfig(*kubeconfig)
	if err != nil {
		fmt.Fprintf(stderr, "modelgate migrate: %v\n", err)
		return 2
	}
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		fmt.Fprintf(stderr, "modelgate migrate: %v\n", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	report, err := migrate.Run(ctx, dyn, migrate.Options{CRD: *crd, PruneStoredVersions: *prune, Log: stderr})
	fmt.Fprintln(stdout, report)
	switch {
	case errors.Is(err, migrate.ErrIncomplete):
		fmt.Fprintf(stderr, "modelgate migrate: %v\n", err)
		return 1
	case err != nil:
		fmt.Fprintf(stderr, "modelgate migrate: %v\n", err)
		return 2
	}
	return 0
}
