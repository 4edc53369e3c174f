package gpuclaim

import (
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Served reports whether the cluster m maps serves resource.k8s.io/v1.
func Served(m meta.RESTMapper) bool {
	_, err := m.RESTMapping(schema.GroupKind{Group: resourcev1.GroupName, Kind: "ResourceClaimTemplate"}, resourcev1.SchemeGroupVersion.Version)
	return err == nil
}
