package cluster

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// The node labels NVIDIA GPU Feature Discovery sets, which the default
// nodes carry and the node table shows.
const (
	LabelGPUProduct = "nvidia.com/gpu.product"
	LabelGPUMemory  = "nvidia.com/gpu.memory"
	LabelGPUCount   = "nvidia.com/gpu.count"
	LabelGPUPresent = "nvidia.com/gpu.present"
	// ResourceGPU is the extended resource the NVIDIA device plugin
	// advertises.
	ResourceGPU corev1.ResourceName = "nvidia.com/gpu"
)

// LoadNodes reads the fake nodes to register from a file of v1 Node
// documents (config/dev/nodes.yaml), strictly: an unknown field, a
// duplicate name, or an nvidia.com/gpu.count label that disagrees with the
// nvidia.com/gpu capacity is an error naming the document and the field.
// Each node is returned ready to create: annotated for kwok, its
// allocatable defaulting to its capacity.
func LoadNodes(path string) ([]*corev1.Node, error) {
	b, err := os.ReadFile(filepath.Clean(path))
	if err != nil {
		return nil, fmt.Errorf("reading nodes: %w", err)
	}
	return ParseNodes(path, b)
}

// ParseNodes is LoadNodes on a file's contents; path names it in errors.
func ParseNodes(path string, data []byte) ([]*corev1.Node, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var nodes []*corev1.Node
	seen := map[string]bool{}
	for doc := 1; ; doc++ {
		raw, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", path, doc, err)
		}
		if len(bytes.TrimSpace(stripComments(raw))) == 0 {
			continue
		}
		n := &corev1.Node{}
		if err := yaml.UnmarshalStrict(raw, n); err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", path, doc, err)
		}
		where := fmt.Sprintf("%s: document %d (node %q)", path, doc, n.Name)
		if err := checkNode(n); err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		if seen[n.Name] {
			return nil, fmt.Errorf("%s: metadata.name: duplicate node name", where)
		}
		seen[n.Name] = true
		prepareNode(n)
		nodes = append(nodes, n)
	}
	if len(nodes) == 0 {
		return nil, fmt.Errorf("%s: no nodes: the file must hold at least one v1 Node", path)
	}
	return nodes, nil
}

func stripComments(b []byte) []byte {
	var out []byte
	for line := range bytes.Lines(b) {
		if t := bytes.TrimSpace(line); len(t) > 0 && t[0] != '#' {
			out = append(out, line...)
		}
	}
	return out
}

func checkNode(n *corev1.Node) error {
	if n.APIVersion != "v1" || n.Kind != "Node" {
		return fmt.Errorf("apiVersion/kind: %q/%q: must be v1/Node", n.APIVersion, n.Kind)
	}
	if n.Name == "" {
		return errors.New("metadata.name: required")
	}
	if v, ok := n.Labels[LabelGPUCount]; ok {
		// A GPU node without the device plugin's capacity offers its GPUs
		// through DRA only: the count label says how many.
		c, has := n.Status.Capacity[ResourceGPU]
		if !has {
			if q, err := resource.ParseQuantity(v); err != nil || q.Sign() <= 0 || q.Value() > 64 {
				return fmt.Errorf("metadata.labels[%s]: %q: must be a GPU count from 1 to 64", LabelGPUCount, v)
			}
			return nil
		}
		if c.String() != v {
			return fmt.Errorf("metadata.labels[%s]: %q: must equal status.capacity[%s] (%s)", LabelGPUCount, v, ResourceGPU, c.String())
		}
	}
	return nil
}

// prepareNode marks the node for kwok and defaults its allocatable to its
// capacity (kwok would otherwise fill in its own large defaults).
func prepareNode(n *corev1.Node) {
	if n.Annotations == nil {
		n.Annotations = map[string]string{}
	}
	n.Annotations[FakeNodeAnnotation] = "fake"
	if n.Status.Allocatable == nil && n.Status.Capacity != nil {
		n.Status.Allocatable = n.Status.Capacity.DeepCopy()
	}
}

// RegisterNodes creates the nodes, keeping the status they were written
// with (capacity, allocatable), as a kubelet registers itself.
func RegisterNodes(ctx context.Context, c client.Client, nodes []*corev1.Node) error {
	for _, want := range nodes {
		n := want.DeepCopy()
		if err := c.Create(ctx, n); err != nil {
			return fmt.Errorf("registering node %s: %w", want.Name, err)
		}
		if equality.Semantic.DeepEqual(n.Status.Capacity, want.Status.Capacity) &&
			equality.Semantic.DeepEqual(n.Status.Allocatable, want.Status.Allocatable) {
			continue
		}
		n.Status.Capacity, n.Status.Allocatable = want.Status.Capacity, want.Status.Allocatable
		if err := c.Status().Update(ctx, n); err != nil {
			return fmt.Errorf("setting node %s's capacity: %w", want.Name, err)
		}
	}
	return nil
}

// WaitNodesReady waits until every named node reports Ready, which kwok
// sets once it manages the node.
func WaitNodesReady(ctx context.Context, c client.Client, names []string, timeout time.Duration) error {
	var notReady []string
	err := wait.PollUntilContextTimeout(ctx, pollInterval, timeout, true, func(ctx context.Context) (bool, error) {
		notReady = notReady[:0]
		for _, name := range names {
			n := &corev1.Node{}
			if err := c.Get(ctx, client.ObjectKey{Name: name}, n); err != nil || !NodeReady(n) {
				notReady = append(notReady, name)
			}
		}
		return len(notReady) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("nodes not Ready after %s: %s (is kwok running? see its log): %w", timeout, strings.Join(notReady, ", "), err)
	}
	return nil
}

// NodeReady reports whether the node's Ready condition is True.
func NodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// NodeTable renders nodes as kubectl-like columns: name, GPU product,
// GPU memory (MiB), GPUs, CPU, memory, readiness.
func NodeTable(nodes []corev1.Node) string {
	nodes = slices.Clone(nodes)
	slices.SortFunc(nodes, func(a, b corev1.Node) int { return strings.Compare(a.Name, b.Name) })
	var buf bytes.Buffer
	w := tabwriter.NewWriter(&buf, 0, 4, 2, ' ', 0)
	_, _ = fmt.Fprintln(w, "NODE\tGPU PRODUCT\tGPU MEMORY (MiB)\tGPUS\tCPU\tMEMORY\tREADY")
	for i := range nodes {
		n := &nodes[i]
		gpus := quantity(n.Status.Allocatable[ResourceGPU])
		if _, plugin := n.Status.Allocatable[ResourceGPU]; !plugin && n.Labels[LabelGPUCount] != "" {
			gpus = n.Labels[LabelGPUCount] + " (DRA)"
		}
		ready := "False"
		if NodeReady(n) {
			ready = "True"
		}
		_, _ = fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", n.Name,
			orDash(n.Labels[LabelGPUProduct]), orDash(n.Labels[LabelGPUMemory]), gpus,
			quantity(n.Status.Allocatable[corev1.ResourceCPU]), memory(n.Status.Allocatable[corev1.ResourceMemory]), ready)
	}
	_ = w.Flush()
	return buf.String()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// memory is a node's memory as a person reads it: a whole number of
// units as written (128Gi), or else GiB with one decimal (a real
// machine's 24581256Ki is 23.4Gi).
func memory(q resource.Quantity) string {
	if q.IsZero() {
		return "-"
	}
	if s := q.String(); !strings.HasSuffix(s, "Ki") || q.Value() < 1<<30 {
		return s
	}
	return strconv.FormatFloat(float64(q.Value())/(1<<30), 'f', 1, 64) + "Gi"
}

func quantity(q resource.Quantity) string {
	if q.IsZero() {
		return "-"
	}
	return q.String()
}
