// Package makerun_test runs `make run` (bin/devcluster) as a developer
// would, with the real node: the samples applied, their loaders
// downloading the samples' model from the Hub and the S3 store make run
// serves, an engine Ready in a real container, Ctrl-C leaving nothing on
// the machine, and a second `make run` right after starting clean; then
// `make run INSTALL=helm`: the chart's replicas on the real node injecting
// a sample, and Ctrl-C leaving nothing, cert-manager included.
//
// It is a suite of its own, run by `make test-e2e` after test/suites/e2e: the
// machine has one real node, and the e2e suite holds it for its whole
// run. As root the real node must start (--real-node=on: a machine that
// cannot run it, or a node lock held by another cluster, fails the
// suite); not root, the spec fails, as the e2e suite's real node specs do.
package makerun_test

import (
	"flag"
	"testing"

	"github.com/go-logr/logr"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
)

var (
	modelgateBinary  = flag.String("modelgate", "", "the modelgate binary to run (default: <repo>/bin/modelgate, built by `make build`)")
	devclusterBinary = flag.String("devcluster", "", "the program behind `make run` (default: <repo>/bin/devcluster, built by `make devcluster`)")
	helmBinary       = flag.String("helm", "", "the helm binary `make run INSTALL=helm` installs the chart with (bin/helm-<version>)")
	certManagerDir   = flag.String("certmanager", "", "cert-manager's controllers and CRDs (default: <repo>/bin/cert-manager/<version>, built by `make cert-manager`)")
)

func TestMakeRun(t *testing.T) {
	logf.SetLogger(logr.Discard())
	RegisterFailHandler(Fail)
	RunSpecs(t, "make run with the real node")
}
