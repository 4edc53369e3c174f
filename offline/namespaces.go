package offline

import (
	"context"
	"fmt"
	"maps"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/modelgate/modelgate/webhook"
)

// Namespaces is a NamespaceLabeler over labels given on the command line or
// in a case file. Every namespace also carries kubernetes.io/metadata.name
// set to its name, as the API server sets it on every namespace.
type Namespaces struct {
	// Default are the labels of every namespace missing from ByName.
	Default map[string]string
	// ByName are the labels of particular namespaces, such as those of
	// Namespace objects among the manifests.
	ByName map[string]map[string]string
}

var _ webhook.NamespaceLabeler = Namespaces{}

// NamespaceLabels implements webhook.NamespaceLabeler. It never fails: a
// namespace it knows nothing about has the Default labels.
func (n Namespaces) NamespaceLabels(_ context.Context, name string) (map[string]string, error) {
	src, ok := n.ByName[name]
	if !ok {
		src = n.Default
	}
	labels := maps.Clone(src)
	if labels == nil {
		labels = map[string]string{}
	}
	labels[corev1.LabelMetadataName] = name
	return labels, nil
}

// ParseLabels parses "k=v,k2=v2" (a value may be empty: "k="), checking
// keys and values as Kubernetes does. An empty string is no labels.
func ParseLabels(s string) (map[string]string, error) {
	out := map[string]string{}
	if strings.TrimSpace(s) == "" {
		return out, nil
	}
	for pair := range strings.SplitSeq(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(pair), "=")
		if !ok {
			return nil, fmt.Errorf("label %q: must be key=value", pair)
		}
		if err := ValidateLabel(k, v); err != nil {
			return nil, err
		}
		out[k] = v
	}
	return out, nil
}

// ValidateLabel checks a label key and value as the API server does.
func ValidateLabel(k, v string) error {
	if errs := validation.IsQualifiedName(k); len(errs) > 0 {
		return fmt.Errorf("label key %q: %s", k, strings.Join(errs, "; "))
	}
	if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
		return fmt.Errorf("label %q value %q: %s", k, v, strings.Join(errs, "; "))
	}
	return nil
}
