package dradriver

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NodeDevices are the devices SliceFor publishes for a node named node
// with gpus GPUs and labels (its GPU Feature Discovery labels: product,
// memory, family), in the slice's order: what a kubelet plugin on that
// node publishes itself (test/standins/draplugin). None when gpus is not positive.
func NodeDevices(node string, labels map[string]string, gpus int) []resourcev1.Device {
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: node, Labels: labels},
		Status:     corev1.NodeStatus{Capacity: corev1.ResourceList{resourceGPU: resource.MustParse(fmt.Sprint(gpus))}},
	}
	s := SliceFor(n)
	if s == nil {
		return nil
	}
	return s.Spec.Devices
}
