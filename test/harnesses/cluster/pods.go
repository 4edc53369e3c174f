package cluster

import corev1 "k8s.io/api/core/v1"

// NotScheduled returns the condition in which the scheduler says why it
// has not placed a pod (PodScheduled False, with its reason and message),
// or nil while it has said nothing of the kind.
func NotScheduled(p *corev1.Pod) *corev1.PodCondition {
	for i, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

// PodReady says whether a pod's Ready condition is True.
func PodReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
