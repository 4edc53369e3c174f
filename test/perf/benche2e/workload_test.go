package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/modelgate/modelgate/api/annotations"
	"github.com/modelgate/modelgate/test/harnesses/cluster"
	"github.com/modelgate/modelgate/test/harnesses/env"
)

func TestDeploymentSizes(t *testing.T) {
	for name, tc := range map[string]struct {
		pods, replicas int
		want           []int32
	}{
		"make bench-e2e":         {pods: 500, replicas: 25, want: repeat(25, 20)},
		"a remainder":            {pods: 60, replicas: 25, want: []int32{25, 25, 10}},
		"fewer pods than one":    {pods: 3, replicas: 25, want: []int32{3}},
		"one pod per Deployment": {pods: 3, replicas: 1, want: []int32{1, 1, 1}},
	} {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, deploymentSizes(tc.pods, tc.replicas)); diff != "" {
				t.Errorf("deploymentSizes(%d, %d) (-want +got):\n%s", tc.pods, tc.replicas, diff)
			}
		})
	}
}

func repeat(v int32, n int) []int32 {
	out := make([]int32, n)
	for i := range out {
		out[i] = v
	}
	return out
}

// TestNodesYAML proves the nodes file passes the cluster's strict loader
// and holds a GPU for every pod, on tainted H100 nodes.
func TestNodesYAML(t *testing.T) {
	const pods = 500
	root, err := env.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	path, count, perNode, err := writeNodes(t.TempDir(), filepath.Join(root, "config", "dev", "nodes.yaml"), pods)
	if err != nil {
		t.Fatalf("writeNodes: %v", err)
	}
	if perNode != 8 {
		t.Errorf("%d GPUs per node, want config/dev/nodes.yaml's H100 nodes' 8", perNode)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	nodes, err := cluster.ParseNodes("nodes.yaml", b)
	if err != nil {
		t.Fatalf("cluster.ParseNodes: %v", err)
	}
	if len(nodes) != 65 || count != 65 {
		t.Errorf("%d nodes for %d pods, want 65 (63 full, 2 spare)", len(nodes), pods)
	}
	gpus := int64(0)
	for _, n := range nodes {
		q := n.Status.Allocatable[cluster.ResourceGPU]
		gpus += q.Value()
		if n.Labels["kubernetes.io/hostname"] != n.Name {
			t.Errorf("node %s: hostname label %q", n.Name, n.Labels["kubernetes.io/hostname"])
		}
		if n.Labels[cluster.LabelGPUProduct] != gpuProduct {
			t.Errorf("node %s: product %q, want %q", n.Name, n.Labels[cluster.LabelGPUProduct], gpuProduct)
		}
		if len(n.Spec.Taints) != 1 || n.Spec.Taints[0].Key != string(cluster.ResourceGPU) || n.Spec.Taints[0].Effect != corev1.TaintEffectNoSchedule {
			t.Errorf("node %s: taints %v, want the GPU NoSchedule taint", n.Name, n.Spec.Taints)
		}
		if _, ok := n.Status.Allocatable[corev1.ResourceEphemeralStorage]; !ok {
			t.Errorf("node %s: no ephemeral-storage, which the model loader requests", n.Name)
		}
	}
	if gpus < pods {
		t.Errorf("%d GPUs for %d pods", gpus, pods)
	}
}

func TestDeployments(t *testing.T) {
	injected := annotatedDeployment("default", templateName, 1).Spec.Template.DeepCopy()
	injected.Labels[annotations.OwnerLabel] = "bench"
	injected.Annotations[annotations.Injected] = `{"mutators":["owner-metadata"]}`
	injected.Spec.Tolerations = []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists}}

	annotated := annotatedDeployment("ns", "llm-bench-007", 25)
	copied := injectedDeployment("ns", "llm-bench-007", 25, injected)
	for name, d := range map[string]struct {
		labels       map[string]string
		selector     *metav1.LabelSelector
		wantInjected bool
	}{
		"annotated": {annotated.Spec.Template.Labels, annotated.Spec.Selector, false},
		"injected":  {copied.Spec.Template.Labels, copied.Spec.Selector, true},
	} {
		t.Run(name, func(t *testing.T) {
			sel, err := metav1.LabelSelectorAsSelector(d.selector)
			if err != nil {
				t.Fatalf("selector: %v", err)
			}
			if !sel.Matches(labels.Set(d.labels)) {
				t.Errorf("selector %v does not match the template's labels %v", d.selector, d.labels)
			}
			if d.labels[deploymentLabel] != "llm-bench-007" {
				t.Errorf("template labels %v: want %s=llm-bench-007", d.labels, deploymentLabel)
			}
		})
	}
	if isInjected(&annotated.Spec.Template) || !isInjected(&copied.Spec.Template) {
		t.Errorf("isInjected: annotated %t, injected %t; want false, true", isInjected(&annotated.Spec.Template), isInjected(&copied.Spec.Template))
	}
	if diff := cmp.Diff(injected.Spec, copied.Spec.Template.Spec); diff != "" {
		t.Errorf("the injected Deployment's pod spec is not the dry run's (-want +got):\n%s", diff)
	}
	if injected.Labels[deploymentLabel] != templateName {
		t.Errorf("injectedDeployment changed the template it copied: %v", injected.Labels)
	}
}
