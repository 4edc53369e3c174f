// Package makerun_test runs `make run` (bin/devcluster) as a developer
// would, with the real node: the samples applied, their loaders
// downloading the samples' model from the Hub and the S3 store make run
// serves, an engine Ready in a real container, Ctrl-C leaving nothing on
// the machine, and a second `make run` right after starting clean.
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

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

var (
	modelgateBinary  = flag.String("modelgate", "", "the modelgate binary to run (default: <repo>/bin/modelgate, built by `make build`)")
	devclusterBinary = flag.String("devcluster", "", "the program behind `make run` (default: <repo>/bin/devcluster, built by `make devcluster`)")
)

func TestMakeRun(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "make run with the real node")
}
