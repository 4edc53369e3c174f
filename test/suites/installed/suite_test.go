// Package installed_test installs modelgate as its users do, into Pods on
// the simulated cluster's real node (test/harnesses/cluster, InstallNone):
// modelgate's image, as `make node-images` builds it, served by the node's
// registry under the chart's own image reference; cert-manager's own
// controllers (test/harnesses/certmanager) issuing its certificates; the
// chart installed by the real helm with its defaults, and config/default
// rendered by kustomize's library (as kubectl apply -k does) and applied,
// as the second way; two replicas Running in the
// node's Pod network as the chart's service account, reaching the API
// server at the kubernetes Service's address, and the API server calling
// them at their endpoints. `make test-installed` runs it as root with the
// helm and cert-manager it builds.
package installed_test

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	cmv1 "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	"github.com/go-logr/logr"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/yaml"

	"github.com/modelgate/modelgate/test/harnesses/certmanager"
	"github.com/modelgate/modelgate/test/harnesses/cluster"
	"github.com/modelgate/modelgate/test/harnesses/env"
)

var (
	helmBinary       = flag.String("helm", "", "the helm binary (bin/helm-<version>)")
	certManagerDir   = flag.String("certmanager", "", "cert-manager's controllers and CRDs (bin/cert-manager/<version>)")
	prometheusBinary = flag.String("prometheus", "", "the prometheus binary (bin/prometheus-<version>)")
	operatorBinary   = flag.String("prometheus-operator", "", "the Prometheus Operator binary (bin/prometheus-operator-<version>)")
)

var (
	root       string
	gpuCluster *cluster.Cluster
	k8s        client.Client
	// chartImage is the image the chart installs by default:
	// ghcr.io/modelgate/modelgate:<the chart's appVersion>.
	chartImage string
)

func TestInstalled(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "modelgate installed as users install it")
}

var _ = BeforeSuite(func(ctx SpecContext) {
	logf.SetLogger(logr.Discard())
	Expect(*helmBinary).NotTo(BeEmpty(), "-helm is required (make test-installed gives it)")
	Expect(*certManagerDir).NotTo(BeEmpty(), "-certmanager is required (make test-installed gives it)")
	Expect(*prometheusBinary).NotTo(BeEmpty(), "-prometheus is required (make test-installed gives it)")
	Expect(*operatorBinary).NotTo(BeEmpty(), "-prometheus-operator is required (make test-installed gives it)")
	var err error
	root, err = env.RepoRoot()
	Expect(err).NotTo(HaveOccurred())
	chartImage = chartDefaultImage()
	dir := GinkgoT().TempDir()
	gpuCluster, err = cluster.Start(ctx, cluster.Options{
		Root: root, Dir: dir, User: "platform-admin",
		Install: cluster.InstallNone,
		RealNode: cluster.RealNodeOptions{
			Mode: cluster.RealNodeRequired, Taint: true,
			ModelgateImages: []string{chartImage, nextImage},
		},
	})
	if gpuCluster != nil {
		DeferCleanup(func() {
			Expect(gpuCluster.Stop()).To(Succeed())
		})
	}
	Expect(err).NotTo(HaveOccurred())
	s, err := env.Scheme()
	Expect(err).NotTo(HaveOccurred())
	Expect(cmv1.AddToScheme(s)).To(Succeed())
	k8s, err = client.New(gpuCluster.Developer, client.Options{Scheme: s})
	Expect(err).NotTo(HaveOccurred())

	// cert-manager's own controllers and cainjector, as the chart's
	// default (certificates.mode cert-manager) and config/default expect.
	cm, err := certmanager.Start(ctx, gpuCluster.Admin, certmanager.Options{
		Binary: filepath.Join(*certManagerDir, "certmanager"), CRDs: filepath.Join(*certManagerDir, "crds"),
		Kubeconfig: gpuCluster.Kubeconfig, Log: filepath.Join(gpuCluster.LogDir, "cert-manager.log"),
	})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() {
		Expect(cm.Stop()).To(Succeed())
	})
	installOperator(ctx, filepath.Join(dir, "prometheus-operator"))
}, NodeTimeout(6*time.Minute))

// chartDefaultImage reads the chart's appVersion: the tag of the image it
// installs when image.tag is not set.
func chartDefaultImage() string {
	GinkgoHelper()
	b, err := os.ReadFile(filepath.Join(root, "charts", "modelgate", "Chart.yaml"))
	Expect(err).NotTo(HaveOccurred())
	var chart struct {
		AppVersion string `json:"appVersion"`
	}
	Expect(yaml.Unmarshal(b, &chart)).To(Succeed())
	Expect(chart.AppVersion).NotTo(BeEmpty())
	return "ghcr.io/modelgate/modelgate:" + chart.AppVersion
}

// nextImage is the image a helm upgrade moves to: modelgate's, under
// another tag.
const nextImage = "ghcr.io/modelgate/modelgate:next"

// within is how long a step that needs Pods to start on the real node may
// take.
const within = 3 * time.Minute

// poll is how often a wait looks again.
const poll = 250 * time.Millisecond

// eventually waits for f with the suite's timeout and interval.
func eventually(ctx context.Context, f any) AsyncAssertion {
	return Eventually(f).WithContext(ctx).WithTimeout(within).WithPolling(poll)
}
