package env

import (
	"errors"
	"fmt"

	cmv1 "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/modelgate/modelgate/hack/render"
)

// InjectCAFromAnnotation asks cert-manager's cainjector to copy the CA of a
// Certificate, named <namespace>/<name>, into an object's caBundle fields.
const InjectCAFromAnnotation = "cert-manager.io/inject-ca-from"

// ErrUnknownKind is returned for a rendered object whose kind InstallScheme
// does not know, so that it cannot be checked field by field.
var ErrUnknownKind = errors.New("kind is not in the install scheme")

// InstallScheme returns a scheme with every kind an install in config/
// holds: Kubernetes' own kinds, CustomResourceDefinitions, and cert-manager's
// v1 kinds (Issuer, Certificate).
func InstallScheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		clientgoscheme.AddToScheme, apiextensionsv1.AddToScheme, cmv1.AddToScheme,
	} {
		if err := add(s); err != nil {
			return nil, fmt.Errorf("building install scheme: %w", err)
		}
	}
	return s, nil
}

// DecodeInstall renders a kustomization (config/default, config/self-managed)
// and strictly decodes every object into its Go type (see DecodeStrict).
func DecodeInstall(kustomizeDir string) ([]client.Object, error) {
	objs, err := render.Render(kustomizeDir)
	if err != nil {
		return nil, err
	}
	return DecodeStrict(objs)
}

// DecodeStrict decodes rendered objects into their Go types, as the API
// server would with field validation Strict: an unknown or duplicated
// field, a mistyped value, or a kind InstallScheme does not know is an error
// naming the object. A misspelt cert-manager field (renewbefore, dnsName)
// would otherwise be dropped by the API server with a warning, and the
// certificate issued without it.
func DecodeStrict(objs []*unstructured.Unstructured) ([]client.Object, error) {
	scheme, err := InstallScheme()
	if err != nil {
		return nil, err
	}
	decoder := serializer.NewCodecFactory(scheme, serializer.EnableStrict).UniversalDeserializer()
	out := make([]client.Object, 0, len(objs))
	for _, u := range objs {
		gvk := u.GroupVersionKind()
		id := fmt.Sprintf("%s %s/%s", gvk.Kind, u.GetNamespace(), u.GetName())
		if !scheme.Recognizes(gvk) {
			return nil, fmt.Errorf("decoding %s: %s: %w", id, gvk, ErrUnknownKind)
		}
		b, err := u.MarshalJSON()
		if err != nil {
			return nil, fmt.Errorf("encoding %s: %w", id, err)
		}
		obj, _, err := decoder.Decode(b, nil, nil)
		if err != nil {
			return nil, fmt.Errorf("decoding %s: %w", id, err)
		}
		co, ok := obj.(client.Object)
		if !ok {
			return nil, fmt.Errorf("decoding %s: %T is not an object with metadata", id, obj)
		}
		out = append(out, co)
	}
	return out, nil
}
