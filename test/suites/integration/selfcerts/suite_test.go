// Package selfcerts_test proves modelgate's self-managed certificates
// through a real kube-apiserver: its own envtest, where no other webhook
// server runs, so the API server reaches modelgate only if modelgate's
// own CA bundle injection worked.
package selfcerts_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/modelgate/modelgate/test/harnesses/env"
)

func TestSelfManagedCertificates(t *testing.T) {
	RegisterFailHandler(Fail)
	// What the specs wait for (a watch event, a reconcile, a compile)
	// takes what the machine takes: half a minute, not gomega's default
	// second, before a condition that does not come is a failure.
	SetDefaultEventuallyTimeout(30 * time.Second)
	SetDefaultEventuallyPollingInterval(50 * time.Millisecond)
	RunSpecs(t, "modelgate self-managed certificates through a real API server")
}

var (
	testEnv  *envtest.Environment
	admin    client.Client
	adminCfg *rest.Config
	// modelgateUser authenticates as modelgate's service account, with
	// config/rbac's permissions only.
	modelgateUser *envtest.AuthenticatedUser
)

var _ = BeforeSuite(func() {
	logf.SetLogger(zap.New(zap.WriteTo(GinkgoWriter)))
	root, err := env.RepoRoot()
	Expect(err).NotTo(HaveOccurred())
	testEnv, err = env.New(root)
	Expect(err).NotTo(HaveOccurred())
	adminCfg, err = testEnv.Start()
	Expect(err).NotTo(HaveOccurred())
	s, err := env.Scheme()
	Expect(err).NotTo(HaveOccurred())
	admin, err = client.New(adminCfg, client.Options{Scheme: s})
	Expect(err).NotTo(HaveOccurred())
	// The self-managed install's permissions: config/rbac and what
	// config/self-managed adds for the certificates.
	modelgateUser, err = env.ModelgateIdentity(context.Background(), testEnv, admin, root, "config/self-managed/rbac")
	Expect(err).NotTo(HaveOccurred())
})

var _ = AfterSuite(func() {
	if testEnv != nil {
		Expect(testEnv.Stop()).To(Succeed())
	}
})
