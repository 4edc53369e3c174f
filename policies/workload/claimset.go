package workload

import (
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
)

// ClaimSet is a ClaimResolver over templates and claims at hand: the
// manifests the CLI reads, or what it listed from a cluster.
type ClaimSet struct {
	Templates map[types.NamespacedName]*resourcev1.ResourceClaimSpec
	Claims    map[types.NamespacedName]*resourcev1.ResourceClaimSpec
}

var _ ClaimResolver = (*ClaimSet)(nil)

// AddTemplate adds a ResourceClaimTemplate.
func (s *ClaimSet) AddTemplate(t *resourcev1.ResourceClaimTemplate) {
	if s.Templates == nil {
		s.Templates = map[types.NamespacedName]*resourcev1.ResourceClaimSpec{}
	}
	s.Templates[types.NamespacedName{Namespace: t.Namespace, Name: t.Name}] = &t.Spec.Spec
}

// AddClaim adds a ResourceClaim.
func (s *ClaimSet) AddClaim(c *resourcev1.ResourceClaim) {
	if s.Claims == nil {
		s.Claims = map[types.NamespacedName]*resourcev1.ResourceClaimSpec{}
	}
	s.Claims[types.NamespacedName{Namespace: c.Namespace, Name: c.Name}] = &c.Spec
}

// ClaimSpec implements ClaimResolver.
func (s *ClaimSet) ClaimSpec(namespace string, c corev1.PodResourceClaim) (*resourcev1.ResourceClaimSpec, bool) {
	if s == nil {
		return nil, false
	}
	var spec *resourcev1.ResourceClaimSpec
	switch {
	case c.ResourceClaimName != nil:
		spec = s.Claims[types.NamespacedName{Namespace: namespace, Name: *c.ResourceClaimName}]
	case c.ResourceClaimTemplateName != nil:
		spec = s.Templates[types.NamespacedName{Namespace: namespace, Name: *c.ResourceClaimTemplateName}]
	}
	return spec, spec != nil
}
