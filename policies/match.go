package policies

import (
	"fmt"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// ClaimKinds are the kinds of dynamic resource allocation that are judged
// themselves (resource.k8s.io/v1): a policy applies to them only when its
// Match names them. A policy written for workloads reads containers,
// owners, models, which a claim has none of; one that means to judge
// claims says so.
var ClaimKinds = []string{"ResourceClaim", "ResourceClaimTemplate"}

// Match selects the reviews a policy applies to. Every non-empty field must
// match; the zero Match matches every workload, and no claim (ClaimKinds).
type Match struct {
	// Kinds are workload kinds such as Deployment or Pod, compared exactly;
	// every workload kind when empty. The ClaimKinds are matched only
	// when listed.
	Kinds []string `json:"kinds,omitempty"`
	// Namespaces are the namespace names the policy applies to.
	Namespaces []string `json:"namespaces,omitempty"`
	// ExcludedNamespaces are namespace names the policy never applies to;
	// they win over Namespaces and NamespaceSelector.
	ExcludedNamespaces []string `json:"excludedNamespaces,omitempty"`
	// NamespaceSelector selects namespaces by their labels; nil selects all.
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`
}

// matcher is a Match compiled once: the label selector converted, the lists
// copied so later changes by the caller cannot reach a compiled policy.
type matcher struct {
	kinds      []string
	namespaces []string
	excluded   []string
	selector   labels.Selector // nil when the Match has none
}

func compileMatch(m Match) (matcher, error) {
	out := matcher{
		kinds:      slices.Clone(m.Kinds),
		namespaces: slices.Clone(m.Namespaces),
		excluded:   slices.Clone(m.ExcludedNamespaces),
	}
	if m.NamespaceSelector != nil {
		sel, err := metav1.LabelSelectorAsSelector(m.NamespaceSelector)
		if err != nil {
			return matcher{}, fmt.Errorf("match.namespaceSelector: %w", err)
		}
		if !sel.Empty() {
			out.selector = sel
		}
	}
	return out, nil
}

func (m *matcher) matches(kind, namespace string, nsLabels map[string]string) bool {
	if len(m.kinds) == 0 && slices.Contains(ClaimKinds, kind) {
		return false
	}
	if len(m.kinds) > 0 && !slices.Contains(m.kinds, kind) {
		return false
	}
	if slices.Contains(m.excluded, namespace) {
		return false
	}
	if len(m.namespaces) > 0 && !slices.Contains(m.namespaces, namespace) {
		return false
	}
	return m.selector == nil || m.selector.Matches(labels.Set(nsLabels))
}
