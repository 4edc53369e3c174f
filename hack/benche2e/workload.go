package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/modelgate/modelgate/api/annotations"
	"github.com/modelgate/modelgate/test/cluster"
)

// The benchmark's workload and nodes.
const (
	gpuProduct  = "NVIDIA-H100-80GB-HBM3"
	gpusPerNode = 8
	// spareNodes are nodes beyond what the pods need, so the scheduler
	// never has to fit the last pods into the last free GPUs.
	spareNodes = 2
	// appName is the app label of every benchmark pod.
	appName = "llm-bench"
	// deploymentLabel tells the Deployments' pods apart.
	deploymentLabel = "bench.modelgate.io/deployment"
	// templateName is the dry-run Deployment the injected template is read
	// from.
	templateName = appName + "-template"
)

// nodeCount is how many 8-GPU nodes the benchmark registers for pods
// pods of 1 GPU each.
func nodeCount(pods int) int { return (pods+gpusPerNode-1)/gpusPerNode + spareNodes }

// benchNode is one fake H100 node, shaped like config/dev/nodes.yaml's:
// the labels GPU Feature Discovery sets, the GPU taint, and capacity for
// the pods' GPUs and the model loader's ephemeral storage.
func benchNode(i int) *corev1.Node {
	name := fmt.Sprintf("bench-h100-%03d", i)
	zones := []string{"zone-a", "zone-b", "zone-c"}
	return &corev1.Node{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Node"},
		ObjectMeta: metav1.ObjectMeta{
			Name: name,
			Labels: map[string]string{
				"kubernetes.io/hostname":           name,
				"kubernetes.io/os":                 "linux",
				"kubernetes.io/arch":               "amd64",
				"node.kubernetes.io/instance-type": "p5.48xlarge",
				"topology.kubernetes.io/zone":      zones[i%len(zones)],
				cluster.LabelGPUPresent:            "true",
				cluster.LabelGPUProduct:            gpuProduct,
				cluster.LabelGPUMemory:             "81559",
				cluster.LabelGPUCount:              strconv.Itoa(gpusPerNode),
				"nvidia.com/gpu.family":            "hopper",
				"nvidia.com/gpu.machine":           "p5.48xlarge",
			},
		},
		Spec: corev1.NodeSpec{
			Taints: []corev1.Taint{{Key: string(cluster.ResourceGPU), Value: "present", Effect: corev1.TaintEffectNoSchedule}},
		},
		Status: corev1.NodeStatus{
			Capacity: corev1.ResourceList{
				corev1.ResourceCPU:              resource.MustParse("192"),
				corev1.ResourceMemory:           resource.MustParse("2000Gi"),
				corev1.ResourceEphemeralStorage: resource.MustParse("3500Gi"),
				corev1.ResourcePods:             resource.MustParse("110"),
				cluster.ResourceGPU:             *resource.NewQuantity(gpusPerNode, resource.DecimalSI),
			},
		},
	}
}

// nodesYAML renders n fake nodes as the YAML stream cluster.LoadNodes
// reads.
func nodesYAML(n int) ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteString("# The fake GPU nodes of bench-e2e (hack/benche2e).\n")
	for i := range n {
		b, err := yaml.Marshal(benchNode(i))
		if err != nil {
			return nil, fmt.Errorf("encoding node %d: %w", i, err)
		}
		buf.WriteString("---\n")
		buf.Write(b)
	}
	return buf.Bytes(), nil
}

// writeNodes writes the nodes file for pods pods into dir and returns its
// path and the number of nodes.
func writeNodes(dir string, pods int) (string, int, error) {
	n := nodeCount(pods)
	b, err := nodesYAML(n)
	if err != nil {
		return "", 0, err
	}
	path := filepath.Join(dir, "nodes.yaml")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		return "", 0, fmt.Errorf("writing %s: %w", path, err)
	}
	return path, n, nil
}

// deploymentSizes splits pods into Deployments of replicas pods, the last
// one taking the remainder.
func deploymentSizes(pods, replicas int) []int32 {
	var out []int32
	for left := pods; left > 0; left -= replicas {
		out = append(out, int32(min(left, replicas))) //nolint:gosec // bounded by the --pods flag, checked positive.
	}
	return out
}

// deploymentName is the i-th Deployment's name.
func deploymentName(i int) string { return fmt.Sprintf("%s-%03d", appName, i) }

// annotatedDeployment is the Deployment the "with" phase creates: the shape
// of config/samples/deployment.yaml (a vLLM server opted in to injection,
// its model on Hugging Face, one GPU), restricted to the nodes' H100s.
// modelgate turns it into what injectedDeployment copies.
func annotatedDeployment(namespace, name string, replicas int32) *appsv1.Deployment {
	labels := map[string]string{"app": appName, deploymentLabel: name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{
					Labels: labels,
					Annotations: map[string]string{
						annotations.Inject:        "true",
						annotations.Model:         "hf://meta-llama/Llama-3.1-8B-Instruct@0e9e39f249a16976918f6564b8830bc894c89659",
						annotations.ModelSize:     "20Gi",
						annotations.Engine:        "vllm",
						annotations.GPU:           "1",
						annotations.GPUProduct:    gpuProduct,
						annotations.WarmupTimeout: "900",
					},
				},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{{
						Name:  "server",
						Image: "vllm/vllm-openai:v0.6.3",
						Args:  []string{"--model", "/models", "--port", "8000"},
					}},
				},
			},
		},
	}
}

// injectedDeployment is the Deployment the "without" phase creates: the
// annotated one with the template modelgate injected (read back from a dry
// run), so that both phases schedule the same pods.
func injectedDeployment(namespace, name string, replicas int32, injected *corev1.PodTemplateSpec) *appsv1.Deployment {
	d := annotatedDeployment(namespace, name, replicas)
	t := injected.DeepCopy()
	if t.Labels == nil {
		t.Labels = map[string]string{}
	}
	t.Labels[deploymentLabel] = name
	d.Spec.Template = *t
	return d
}

// isInjected reports whether modelgate injected a pod template: it records
// what it did in the modelgate.io/injected annotation.
func isInjected(t *corev1.PodTemplateSpec) bool {
	_, ok := t.Annotations[annotations.Injected]
	return ok
}
