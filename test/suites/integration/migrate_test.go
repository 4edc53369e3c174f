package integration_test

import (
	"context"
	"fmt"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/modelgate/modelgate/migrate"
	"github.com/modelgate/modelgate/test/harnesses/env"
)

var _ = Describe("modelgate migrate", func() {
	It("rewrites objects stored in an old version and then prunes status.storedVersions", func() {
		ctx := context.Background()
		crdClient, err := client.New(adminCfg, client.Options{Scheme: policyScheme()})
		Expect(err).NotTo(HaveOccurred())
		Expect(apiextensionsv1.AddToScheme(crdClient.Scheme())).To(Succeed())
		warnCfg := rest.CopyConfig(adminCfg)
		warn := &env.Warnings{}
		warnCfg.WarningHandlerWithContext = warn
		dyn, err := dynamic.NewForConfig(warnCfg)
		Expect(err).NotTo(HaveOccurred())

		// A CRD of its own, so the spec does not depend on any modelgate
		// API: stored as v1beta1 first, then switched to v1.
		version := func(name string, storage bool) apiextensionsv1.CustomResourceDefinitionVersion {
			return apiextensionsv1.CustomResourceDefinitionVersion{Name: name, Served: true, Storage: storage,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", XPreserveUnknownFields: ptr.To(true)}}}
		}
		crd := &apiextensionsv1.CustomResourceDefinition{
			ObjectMeta: metav1.ObjectMeta{Name: "widgets.migrate.modelgate.io"},
			Spec: apiextensionsv1.CustomResourceDefinitionSpec{
				Group: "migrate.modelgate.io", Scope: apiextensionsv1.NamespaceScoped,
				Names:    apiextensionsv1.CustomResourceDefinitionNames{Plural: "widgets", Singular: "widget", Kind: "Widget", ListKind: "WidgetList"},
				Versions: []apiextensionsv1.CustomResourceDefinitionVersion{version("v1beta1", true), version("v1", false)},
			},
		}
		Expect(crdClient.Create(ctx, crd)).To(Succeed())
		DeferCleanup(func() { Expect(client.IgnoreNotFound(crdClient.Delete(ctx, crd))).To(Succeed()) })
		established := func(g Gomega) {
			g.Expect(crdClient.Get(ctx, client.ObjectKeyFromObject(crd), crd)).To(Succeed())
			ok := false
			for _, c := range crd.Status.Conditions {
				ok = ok || (c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue)
			}
			g.Expect(ok).To(BeTrue())
		}
		Eventually(established).Should(Succeed())

		ns := namespace(ctx, nil)
		old := schema.GroupVersionResource{Group: "migrate.modelgate.io", Version: "v1beta1", Resource: "widgets"}
		Eventually(func() error {
			_, err := dyn.Resource(old).Namespace(ns).List(ctx, metav1.ListOptions{})
			return err
		}).Should(Succeed())
		for i := range 3 {
			w := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "migrate.modelgate.io/v1beta1", "kind": "Widget",
				"metadata": map[string]any{"name": fmt.Sprintf("w%d", i)}, "spec": map[string]any{"size": int64(i)},
			}}
			_, err := dyn.Resource(old).Namespace(ns).Create(ctx, w, metav1.CreateOptions{})
			Expect(err).NotTo(HaveOccurred())
		}

		// v1 stored from now on, and v1beta1 deprecated, as an upgrade
		// does. The API server serves the CRD as its informer has it: a
		// rewrite before it sees the change would store v1beta1 again.
		// Its storage and its deprecation warnings are built together from
		// one CRD: the warning on a v1beta1 request proves the storage.
		beta := version("v1beta1", false)
		beta.Deprecated, beta.DeprecationWarning = true, ptr.To("migrate.modelgate.io/v1beta1 Widget is deprecated")
		crd.Spec.Versions = []apiextensionsv1.CustomResourceDefinitionVersion{beta, version("v1", true)}
		Expect(crdClient.Update(ctx, crd)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(crdClient.Get(ctx, client.ObjectKeyFromObject(crd), crd)).To(Succeed())
			g.Expect(crd.Status.StoredVersions).To(ConsistOf("v1beta1", "v1"))
		}).Should(Succeed())
		Eventually(func(g Gomega) {
			warn.Take()
			_, err := dyn.Resource(old).Namespace(ns).List(ctx, metav1.ListOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(warn.Take()).To(ContainElement(*beta.DeprecationWarning))
		}).Should(Succeed())

		current := schema.GroupVersionResource{Group: "migrate.modelgate.io", Version: "v1", Resource: "widgets"}
		versions := func() map[string]string {
			list, err := dyn.Resource(current).Namespace(ns).List(ctx, metav1.ListOptions{})
			Expect(err).NotTo(HaveOccurred())
			out := map[string]string{}
			for _, it := range list.Items {
				out[it.GetName()] = it.GetResourceVersion()
			}
			return out
		}
		before := versions()

		report, err := migrate.Run(ctx, dyn, migrate.Options{CRD: crd.Name, PruneStoredVersions: true})
		Expect(err).NotTo(HaveOccurred())
		Expect(report.StorageVersion).To(Equal("v1"))
		Expect(report.Total).To(Equal(3))
		Expect(report.Migrated).To(Equal(3))
		Expect(report.Failed).To(BeZero())
		Expect(report.StoredVersionsAfter).To(Equal([]string{"v1"}))
		Expect(crdClient.Get(ctx, client.ObjectKeyFromObject(crd), crd)).To(Succeed())
		Expect(crd.Status.StoredVersions).To(Equal([]string{"v1"}))

		migrated := versions()
		for name, rv := range before {
			Expect(migrated[name]).NotTo(Equal(rv), "%s was stored as v1beta1: rewriting it in v1 is a write", name)
		}
		By("a second run finds everything stored as v1 and writes nothing")
		_, err = migrate.Run(ctx, dyn, migrate.Options{CRD: crd.Name, PruneStoredVersions: true})
		Expect(err).NotTo(HaveOccurred())
		Expect(versions()).To(Equal(migrated))
	})
})
