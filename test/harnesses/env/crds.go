package env

import (
	"errors"
	"fmt"
	"slices"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/modelgate/modelgate/webhook"
)

// ConvertPath is where `modelgate serve` answers ConversionReviews.
const ConvertPath = "/convert"

// ErrNoConversionWebhook is returned for a CRD that serves several versions
// without a conversion webhook: the API server would only rewrite
// apiVersion and lose every field that moved.
var ErrNoConversionWebhook = errors.New("serves several versions but its conversion is not a webhook on " + ConvertPath)

// Scheme returns the scheme `modelgate serve` uses: the Kubernetes types
// and every modelgate API version.
func Scheme() (*runtime.Scheme, error) { return webhook.NewScheme() }

// CRDs renders a kustomization (config/crd) and returns its
// CustomResourceDefinitions, strictly decoded. A CRD serving more than one
// version must convert through the webhook's ConvertPath with
// ConversionReview v1, as a cluster install would: envtest then points
// that webhook at the local server (a CRD rendered without it is an
// error, never silently fixed).
func CRDs(kustomizeDir string) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	crds, err := rendered[apiextensionsv1.CustomResourceDefinition](kustomizeDir, "CustomResourceDefinition")
	if err != nil {
		return nil, err
	}
	for _, crd := range crds {
		if err := CheckConversion(crd); err != nil {
			return nil, err
		}
	}
	return crds, nil
}

// CheckConversion returns ErrNoConversionWebhook for a CRD with several
// versions whose conversion is not modelgate's webhook.
func CheckConversion(crd *apiextensionsv1.CustomResourceDefinition) error {
	if len(crd.Spec.Versions) < 2 {
		return nil
	}
	c := crd.Spec.Conversion
	ok := c != nil && c.Strategy == apiextensionsv1.WebhookConverter && c.Webhook != nil &&
		c.Webhook.ClientConfig != nil && c.Webhook.ClientConfig.Service != nil &&
		c.Webhook.ClientConfig.Service.Path != nil && *c.Webhook.ClientConfig.Service.Path == ConvertPath &&
		slices.Contains(c.Webhook.ConversionReviewVersions, "v1")
	if !ok {
		return fmt.Errorf("CRD %s: %w", crd.Name, ErrNoConversionWebhook)
	}
	return nil
}
