package installed_test

import (
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/modelgate/modelgate/hack/render"
	"github.com/modelgate/modelgate/test/harnesses/env"
)

// kustomizeSpecs install config/default as `kubectl apply -k
// config/default` does: kustomize's library renders it (kubectl's own
// kustomize), and every object is applied server-side.
func kustomizeSpecs(namespace func() string) {
	var objs []*unstructured.Unstructured

	It("runs two replicas on the real node that serve cert-manager's certificate and answer reviews", func(ctx SpecContext) {
		var err error
		objs, err = render.Render(filepath.Join(root, "config", "default"))
		Expect(err).NotTo(HaveOccurred())
		started := time.Now()
		Expect(env.ApplyObjects(ctx, k8s, objs)).To(Succeed())
		eventually(ctx, func(g Gomega) {
			g.Expect(answered(ctx, namespace())).To(Succeed())
		}).Should(Succeed(), func() string { return podsReport(ctx) })
		AddReportEntry("kubectl apply -k config/default to the first answered review", time.Since(started).Round(100*time.Millisecond).String())
		pods := readyReplicas(ctx)
		for _, p := range pods {
			Expect(p.Spec.NodeName).To(Equal(gpuCluster.RealNode.Name))
			Expect(p.Spec.Containers[0].Image).To(Equal(chartImage), "config/default and the chart install the same image")
		}
		expectCertManagerInstall(ctx, pods)
	}, SpecTimeout(5*time.Minute))

	AfterAll(func(ctx SpecContext) {
		// Everything but the namespace, which the suite made.
		for i := len(objs) - 1; i >= 0; i-- {
			if objs[i].GetKind() == "Namespace" {
				continue
			}
			Expect(client.IgnoreNotFound(k8s.Delete(ctx, objs[i]))).To(Succeed(), "%s %s", objs[i].GetKind(), objs[i].GetName())
		}
	})
}
