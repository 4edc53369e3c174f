package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/modelgate/modelgate/api/annotations"
	"github.com/modelgate/modelgate/test/harnesses/builders"
	"github.com/modelgate/modelgate/test/harnesses/cluster"
)

// The benchmark's workload and nodes.
const (
	// gpuProduct is the GPU the pods ask for; the nodes are copies of
	// config/dev/nodes.yaml's first node of it.
	gpuProduct = "NVIDIA-H100-80GB-HBM3"
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

// benchNodes returns enough fake nodes for pods pods of 1 GPU each, plus
// spareNodes: copies of the first gpuProduct node of devNodes (the nodes of
// config/dev/nodes.yaml, as cluster.LoadNodes read them), renamed and
// spread over devNodes' zones, so the benchmark's nodes are make run's.
// It also returns the GPUs each node has.
func benchNodes(devNodes []*corev1.Node, pods int) ([]*corev1.Node, int64, error) {
	i := slices.IndexFunc(devNodes, func(n *corev1.Node) bool { return n.Labels[cluster.LabelGPUProduct] == gpuProduct })
	if i < 0 {
		return nil, 0, fmt.Errorf("no %s node to copy among the development nodes", gpuProduct)
	}
	proto := devNodes[i]
	q := proto.Status.Allocatable[cluster.ResourceGPU]
	perNode := q.Value()
	if perNode < 1 {
		return nil, 0, fmt.Errorf("node %s: no %s to copy", proto.Name, cluster.ResourceGPU)
	}
	var zones []string
	for _, n := range devNodes {
		if z := n.Labels[zoneLabel]; z != "" && !slices.Contains(zones, z) {
			zones = append(zones, z)
		}
	}
	count := int((int64(pods)+perNode-1)/perNode) + spareNodes
	out := make([]*corev1.Node, count)
	for i := range out {
		n := proto.DeepCopy()
		n.Name = fmt.Sprintf("bench-h100-%03d", i)
		n.Labels[hostnameLabel] = n.Name
		if len(zones) > 0 {
			n.Labels[zoneLabel] = zones[i%len(zones)]
		}
		out[i] = n
	}
	return out, perNode, nil
}

// The well-known node labels benchNodes sets per copy.
const (
	hostnameLabel = "kubernetes.io/hostname"
	zoneLabel     = "topology.kubernetes.io/zone"
)

// nodesYAML renders nodes as the YAML stream cluster.LoadNodes reads.
func nodesYAML(nodes []*corev1.Node) ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteString("# The fake GPU nodes of bench-e2e (test/perf/benche2e).\n")
	for _, n := range nodes {
		b, err := yaml.Marshal(n)
		if err != nil {
			return nil, fmt.Errorf("encoding node %s: %w", n.Name, err)
		}
		buf.WriteString("---\n")
		buf.Write(b)
	}
	return buf.Bytes(), nil
}

// writeNodes writes the nodes file for pods pods into dir, copied from
// the development nodes in devNodesPath, and returns its path, the number
// of nodes and the GPUs each has.
func writeNodes(dir, devNodesPath string, pods int) (string, int, int64, error) {
	devNodes, err := cluster.LoadNodes(devNodesPath)
	if err != nil {
		return "", 0, 0, err
	}
	nodes, perNode, err := benchNodes(devNodes, pods)
	if err != nil {
		return "", 0, 0, fmt.Errorf("%s: %w", devNodesPath, err)
	}
	b, err := nodesYAML(nodes)
	if err != nil {
		return "", 0, 0, err
	}
	path := filepath.Join(dir, "nodes.yaml")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		return "", 0, 0, fmt.Errorf("writing %s: %w", path, err)
	}
	return path, len(nodes), perNode, nil
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
					Labels:      labels,
					Annotations: builders.SampleServingAnnotations(gpuProduct),
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

// isInjected reports whether modelgate injected a pod or pod template: it
// records what it did in the modelgate.io/injected annotation.
func isInjected(obj metav1.Object) bool {
	_, ok := obj.GetAnnotations()[annotations.Injected]
	return ok
}
