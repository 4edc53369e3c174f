package mutators

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// setLabel sets (or, for an empty value, removes) a label and reports
// whether the metadata changed.
func setLabel(m *metav1.ObjectMeta, key, value string) bool {
	return setKey(&m.Labels, key, value)
}

// setAnnotation sets (or, for an empty value, removes) an annotation and
// reports whether the metadata changed.
func setAnnotation(m *metav1.ObjectMeta, key, value string) bool {
	return setKey(&m.Annotations, key, value)
}

func setKey(mp *map[string]string, key, value string) bool {
	cur, ok := (*mp)[key]
	if value == "" {
		if !ok {
			return false
		}
		delete(*mp, key)
		return true
	}
	if ok && cur == value {
		return false
	}
	if *mp == nil {
		*mp = make(map[string]string, 1)
	}
	(*mp)[key] = value
	return true
}
