// Package env starts modelgate's test and development control plane: a
// real etcd and kube-apiserver (controller-runtime's envtest), with
// modelgate's webhook configurations rendered from config/ by kustomize and
// installed pointing at a local webhook server with generated certificates.
//
// The Ginkgo suites under test/ and `make run` (test/harnesses/devcluster) both use it,
// so what the tests prove is what a developer runs.
package env

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	config "github.com/modelgate/modelgate/api/config/v1alpha1"
	"github.com/modelgate/modelgate/hack/render"
)

// KubernetesVersion is the version of the kube-apiserver and etcd the
// Makefile builds (hack/envtest/go.mod) into bin/k8s/<version>.
const KubernetesVersion = "1.36.3"

// ErrNoBinaries is returned when neither KUBEBUILDER_ASSETS nor the
// Makefile-built binaries are available.
var ErrNoBinaries = errors.New("kube-apiserver and etcd not found: run `make envtest` or set KUBEBUILDER_ASSETS")

// RepoRoot walks up from the working directory to the folder holding the
// module's go.mod.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("finding repository root: %w", err)
	}
	for {
		//nolint:gosec // walking up from the working directory is the point.
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && isModelgateModule(b) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("finding repository root: no modelgate go.mod above the working directory")
		}
		dir = parent
	}
}

func isModelgateModule(gomod []byte) bool {
	const want = "module github.com/modelgate/modelgate\n"
	return len(gomod) >= len(want) && string(gomod[:len(want)]) == want
}

// AssetsDir returns the folder holding kube-apiserver and etcd: the
// KUBEBUILDER_ASSETS the user set, else the Makefile's bin/k8s/<version>.
func AssetsDir(root string) (string, error) {
	dir := os.Getenv("KUBEBUILDER_ASSETS")
	if dir == "" {
		dir = filepath.Join(root, "bin", "k8s", KubernetesVersion)
	}
	for _, b := range []string{"kube-apiserver", "etcd"} {
		//nolint:gosec // KUBEBUILDER_ASSETS is the developer's own setting.
		if _, err := os.Stat(filepath.Join(dir, b)); err != nil {
			return "", fmt.Errorf("%w (looked in %s)", ErrNoBinaries, dir)
		}
	}
	return dir, nil
}

// MutatingWebhooks renders a kustomization (config/webhook) and returns
// its MutatingWebhookConfigurations, strictly decoded.
func MutatingWebhooks(kustomizeDir string) ([]*admissionregistrationv1.MutatingWebhookConfiguration, error) {
	return rendered[admissionregistrationv1.MutatingWebhookConfiguration](kustomizeDir, "MutatingWebhookConfiguration")
}

// ValidatingWebhooks renders a kustomization (config/webhook) and returns
// its ValidatingWebhookConfigurations, strictly decoded.
func ValidatingWebhooks(kustomizeDir string) ([]*admissionregistrationv1.ValidatingWebhookConfiguration, error) {
	return rendered[admissionregistrationv1.ValidatingWebhookConfiguration](kustomizeDir, "ValidatingWebhookConfiguration")
}

// rendered renders a kustomization and strictly decodes its objects of the
// kind; it is an error when there are none.
func rendered[T any, PT interface {
	*T
	runtime.Object
}](kustomizeDir, kind string) ([]*T, error) {
	objs, err := render.Render(kustomizeDir)
	if err != nil {
		return nil, err
	}
	scheme := runtime.NewScheme()
	if err := admissionregistrationv1.AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("building scheme: %w", err)
	}
	if err := apiextensionsv1.AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("building scheme: %w", err)
	}
	decoder := serializer.NewCodecFactory(scheme, serializer.EnableStrict).UniversalDeserializer()
	var out []*T
	for _, u := range objs {
		if u.GetKind() != kind {
			continue
		}
		b, err := u.MarshalJSON()
		if err != nil {
			return nil, fmt.Errorf("encoding %s: %w", u.GetName(), err)
		}
		obj := PT(new(T))
		if _, _, err := decoder.Decode(b, nil, obj); err != nil {
			return nil, fmt.Errorf("decoding %s: %w", u.GetName(), err)
		}
		out = append(out, obj)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("rendering %s: no %s", kustomizeDir, kind)
	}
	return out, nil
}

// New returns an envtest environment with modelgate's CRDs (rendered from
// config/crd, conversion webhooks wired to the local server) and webhook
// configurations, not yet started. Start it, then serve the webhooks on
// WebhookInstallOptions.LocalServingHost/Port with the certificates in
// LocalServingCertDir.
func New(root string) (*envtest.Environment, error) {
	assets, err := AssetsDir(root)
	if err != nil {
		return nil, err
	}
	hooks, err := MutatingWebhooks(filepath.Join(root, "config", "webhook"))
	if err != nil {
		return nil, err
	}
	validating, err := ValidatingWebhooks(filepath.Join(root, "config", "webhook"))
	if err != nil {
		return nil, err
	}
	crds, err := CRDs(filepath.Join(root, "config", "crd"))
	if err != nil {
		return nil, err
	}
	scheme, err := Scheme()
	if err != nil {
		return nil, err
	}
	return &envtest.Environment{
		BinaryAssetsDirectory: assets,
		// The CRDs as config/crd renders them, conversion webhook included;
		// envtest points the webhook at the local server for the kinds
		// Scheme knows to be convertible.
		CRDs:   crds,
		Scheme: scheme,
		WebhookInstallOptions: envtest.WebhookInstallOptions{
			MutatingWebhooks:   hooks,
			ValidatingWebhooks: validating,
		},
	}, nil
}

// Configuration returns modelgate's Configuration for serving the webhooks
// an environment from New installed: the host, port and certificates
// envtest generated, with metrics and health off (set them to serve them).
func Configuration(te *envtest.Environment) *config.Configuration {
	w := te.WebhookInstallOptions
	c := config.New()
	c.Webhook.Host = w.LocalServingHost
	c.Webhook.Port = int32(w.LocalServingPort) //nolint:gosec // a local port number.
	c.Webhook.CertDir = w.LocalServingCertDir
	c.Metrics.BindAddress = "0"
	c.Health.BindAddress = "0"
	// One replica: there is no other to drain to, so it stops at once.
	c.DrainPeriod.Duration = 0
	return c
}

// FailOpen sets the failurePolicy of the named webhooks of an environment
// from New to Ignore, as an install with the backstop has them
// (webhook.FailOpenWithBackstop); each must be there.
func FailOpen(te *envtest.Environment, names []string) error {
	found := map[string]bool{}
	ignore := admissionregistrationv1.Ignore
	for _, c := range te.WebhookInstallOptions.MutatingWebhooks {
		for i := range c.Webhooks {
			if slices.Contains(names, c.Webhooks[i].Name) {
				c.Webhooks[i].FailurePolicy = &ignore
				found[c.Webhooks[i].Name] = true
			}
		}
	}
	for _, c := range te.WebhookInstallOptions.ValidatingWebhooks {
		for i := range c.Webhooks {
			if slices.Contains(names, c.Webhooks[i].Name) {
				c.Webhooks[i].FailurePolicy = &ignore
				found[c.Webhooks[i].Name] = true
			}
		}
	}
	for _, n := range names {
		if !found[n] {
			return fmt.Errorf("no webhook %s in config/webhook to fail open", n)
		}
	}
	return nil
}
