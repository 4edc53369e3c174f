package install

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	servingv1 "github.com/modelgate/modelgate/api/v1"
	"github.com/modelgate/modelgate/controller/aiinference"
	"github.com/modelgate/modelgate/test/harnesses/env"
	"github.com/modelgate/modelgate/webhook"
)

// TestControllerWaitsForTheCRD: modelgate starts on a cluster without the
// AIInference CRD (its webhooks need none), and the controller starts on
// its own once the CRD is installed, with no restart: the RESTMapper finds
// the API it did not find before.
func TestControllerWaitsForTheCRD(t *testing.T) {
	root, _, cfg := startAPIServer(t)
	s, err := env.Scheme()
	if err != nil {
		t.Fatal(err)
	}
	admin, err := client.New(cfg, client.Options{Scheme: s})
	if err != nil {
		t.Fatal(err)
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Scheme: s, Metrics: metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0", Cache: webhook.CacheOptions()})
	if err != nil {
		t.Fatal(err)
	}
	served := func() (bool, error) { return aiinference.Served(mgr) }
	if ok, err := served(); ok || err != nil {
		t.Fatalf("served before the CRD is installed: %v, %v", ok, err)
	}
	r := aiinference.NewReconciler(mgr, nil, prometheus.NewRegistry())
	if err := r.SetupWhenServed(mgr, served, 200*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("the manager stopped with %v", err)
		}
	})

	crds, err := env.CRDs(filepath.Join(root, "config", "crd"))
	if err != nil {
		t.Fatal(err)
	}
	for _, crd := range crds {
		if err := admin.Create(ctx, crd); err != nil {
			t.Fatal(err)
		}
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}}
	if err := admin.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	ai := &servingv1.AIInference{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "qwen"},
		Spec: servingv1.AIInferenceSpec{
			Model:  servingv1.ModelSpec{URI: "hf://Qwen/Qwen2.5-0.5B-Instruct"},
			Engine: servingv1.EngineSpec{Name: servingv1.EngineVLLM, Port: 8000},
		}}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		established := &apiextensionsv1.CustomResourceDefinition{}
		if err := admin.Get(ctx, client.ObjectKey{Name: "aiinferences.serving.modelgate.io"}, established); err != nil {
			return false, err
		}
		return admin.Create(ctx, ai) == nil, nil
	})
	if err != nil {
		t.Fatalf("creating an AIInference once the CRD is established: %v", err)
	}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		return admin.Get(ctx, client.ObjectKey{Namespace: "team-a", Name: "qwen"}, &appsv1.Deployment{}) == nil, nil
	})
	if err != nil {
		t.Fatalf("the controller did not start once the CRD was installed: no Deployment (%v)", err)
	}
}
