package install

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	"github.com/modelgate/modelgate/test/harnesses/env"
)

// TestCRDsConvertThroughTheWebhook guards against shipping conversion code
// the API server never calls: the installed AIInference CRD (config/crd
// rendered) converts through modelgate's /convert, stores v1 and marks
// v1alpha1 deprecated, while the bare generated base (no patch) is refused.
func TestCRDsConvertThroughTheWebhook(t *testing.T) {
	root, err := env.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	crds, err := env.CRDs(filepath.Join(root, "config", "crd"))
	if err != nil {
		t.Fatal(err)
	}
	var crd *apiextensionsv1.CustomResourceDefinition
	for _, c := range crds {
		if c.Name == "aiinferences.serving.modelgate.io" {
			crd = c
		}
	}
	if crd == nil {
		t.Fatal("config/crd does not render the AIInference CRD")
	}
	svc := crd.Spec.Conversion.Webhook.ClientConfig.Service
	if svc.Name != "modelgate-webhook" || svc.Namespace != "modelgate-system" {
		t.Errorf("conversion service = %s/%s, want modelgate-system/modelgate-webhook", svc.Namespace, svc.Name)
	}
	if got := crd.Spec.Conversion.Webhook.ConversionReviewVersions; len(got) != 1 || got[0] != "v1" {
		t.Errorf("conversionReviewVersions = %v, want [v1]", got)
	}
	want := map[string]struct{ storage, deprecated bool }{
		"v1": {storage: true}, "v1beta1": {}, "v1alpha1": {deprecated: true},
	}
	for _, v := range crd.Spec.Versions {
		w, ok := want[v.Name]
		if !ok || !v.Served || v.Storage != w.storage || v.Deprecated != w.deprecated {
			t.Errorf("version %s: served %t storage %t deprecated %t, want served, %+v", v.Name, v.Served, v.Storage, v.Deprecated, w)
		}
		if v.Deprecated && (v.DeprecationWarning == nil || !strings.Contains(*v.DeprecationWarning, "serving.modelgate.io/v1 ")) {
			t.Errorf("version %s: the deprecation warning does not name v1: %v", v.Name, v.DeprecationWarning)
		}
	}

	b, err := os.ReadFile(filepath.Join(root, "config", "crd", "bases", "serving.modelgate.io_aiinferences.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	base := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(b, base); err != nil {
		t.Fatal(err)
	}
	if err := env.CheckConversion(base); !errors.Is(err, env.ErrNoConversionWebhook) {
		t.Errorf("CheckConversion(base without the patch) = %v, want ErrNoConversionWebhook", err)
	}
}
