package installed_test

import (
	"context"
	"fmt"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/modelgate/modelgate/test/harnesses/env"
)

// startLoad starts a steady load of opted-in Pods created in namespace
// ns (env.StartLoad): server-side dry runs, each reviewed by the mutating
// webhook and the validating ones as a real create is, and each required
// to come back injected.
func startLoad(ctx context.Context, ns string) *env.Load {
	return env.StartLoad(context.WithoutCancel(ctx), func(ctx context.Context) error { return answered(ctx, ns) })
}

// settle waits until the load has made n more admissions.
func settle(ctx context.Context, l *env.Load, n int) {
	GinkgoHelper()
	Expect(l.WaitMore(ctx, n, within)).To(Succeed())
}

// report stops the load, adds its figures to the spec's report and
// returns them: the admissions that succeeded and the failures (the first
// five in the report).
func report(l *env.Load, what string) (int, []error) {
	admitted, failed := l.Stop()
	AddReportEntry(what, fmt.Sprintf("%d admissions, %d failed %v", admitted+len(failed), len(failed), failed[:min(len(failed), 5)]))
	return admitted, failed
}

// adminClient is the cluster administrator's client, with the suite's
// scheme.
func adminClient() client.Client {
	GinkgoHelper()
	c, err := client.New(gpuCluster.Admin, client.Options{Scheme: k8s.Scheme()})
	Expect(err).NotTo(HaveOccurred())
	return c
}
