package cluster

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/modelgate/modelgate/test/harnesses/env"
)

func TestDefaultNodes(t *testing.T) {
	root, err := env.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	nodes, err := LoadNodes(filepath.Join(root, "config", "dev", "nodes.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	// The mix the issue asks for: two 8xH100-80GB, two 4xA100-40GB, a 4xT4
	// and a CPU-only node; and a 4xL4 offered through DRA only (no device
	// plugin: its count label says how many).
	want := map[string]int{"NVIDIA-H100-80GB-HBM3/8": 2, "NVIDIA-A100-SXM4-40GB/4": 2, "Tesla-T4/4": 1, "NVIDIA-L4/4 (DRA)": 1, "/0": 1}
	got := map[string]int{}
	for _, n := range nodes {
		gpus := n.Status.Allocatable[ResourceGPU]
		if _, plugin := n.Status.Allocatable[ResourceGPU]; !plugin && n.Labels[LabelGPUCount] != "" {
			gpus = resource.MustParse(n.Labels[LabelGPUCount])
			got[n.Labels[LabelGPUProduct]+"/"+gpus.String()+" (DRA)"]++
		} else {
			got[n.Labels[LabelGPUProduct]+"/"+gpus.String()]++
		}
		if n.Annotations[FakeNodeAnnotation] != "fake" {
			t.Errorf("node %s: not annotated for kwok", n.Name)
		}
		if _, ok := n.Status.Allocatable[corev1.ResourceEphemeralStorage]; !ok {
			t.Errorf("node %s: no ephemeral-storage, so no pod with a model loader fits", n.Name)
		}
		gpuNode := !gpus.IsZero()
		tainted := len(n.Spec.Taints) == 1 && n.Spec.Taints[0].Key == string(ResourceGPU) && n.Spec.Taints[0].Effect == corev1.TaintEffectNoSchedule
		if gpuNode != tainted {
			t.Errorf("node %s: GPUs %s, taints %v: GPU nodes, and only they, carry the nvidia.com/gpu NoSchedule taint", n.Name, gpus.String(), n.Spec.Taints)
		}
		if gpuNode && (n.Labels[LabelGPUPresent] != "true" || n.Labels[LabelGPUMemory] == "") {
			t.Errorf("node %s: GPU node without GFD's present and memory labels: %v", n.Name, n.Labels)
		}
	}
	if len(got) != len(want) {
		t.Errorf("node mix: got %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("node mix: got %v, want %v", got, want)
			break
		}
	}
}

func TestParseNodesErrors(t *testing.T) {
	const node = "apiVersion: v1\nkind: Node\nmetadata:\n  name: n1\n"
	for name, c := range map[string]struct{ in, want string }{
		"empty file":    {"# only a comment\n", "no nodes"},
		"unknown field": {node + "spec:\n  taintz: []\n", `unknown field "taintz"`},
		"not a node":    {"apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n", `apiVersion/kind: "v1"/"Pod": must be v1/Node`},
		"no name":       {"apiVersion: v1\nkind: Node\n", "metadata.name: required"},
		"duplicate":     {node + "---\n" + node, `document 2 (node "n1"): metadata.name: duplicate node name`},
		"a DRA-only node's count that is no count": {
			node + "  labels:\n    nvidia.com/gpu.count: \"many\"\n",
			`metadata.labels[nvidia.com/gpu.count]: "many": must be a GPU count from 1 to 64`,
		},
		"count disagrees": {
			node + "  labels:\n    nvidia.com/gpu.count: \"8\"\nstatus:\n  capacity:\n    nvidia.com/gpu: \"4\"\n",
			`metadata.labels[nvidia.com/gpu.count]: "8": must equal status.capacity[nvidia.com/gpu] (4)`,
		},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := ParseNodes("nodes.yaml", []byte(c.in))
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "nodes.yaml") {
				t.Fatalf("error %v: want one starting with nodes.yaml and containing %q", err, c.want)
			}
		})
	}
}

func TestParseNodesDefaultsAllocatable(t *testing.T) {
	in := "apiVersion: v1\nkind: Node\nmetadata:\n  name: n1\n  annotations:\n    team: a\nstatus:\n  capacity:\n    cpu: \"4\"\n" +
		"---\napiVersion: v1\nkind: Node\nmetadata:\n  name: n2\nstatus:\n  capacity:\n    cpu: \"4\"\n  allocatable:\n    cpu: \"3\"\n"
	nodes, err := ParseNodes("nodes.yaml", []byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes) != 2 {
		t.Fatalf("got %d nodes, want 2", len(nodes))
	}
	for n, want := range map[*corev1.Node]string{nodes[0]: "4", nodes[1]: "3"} {
		if got := n.Status.Allocatable[corev1.ResourceCPU]; got.Cmp(resource.MustParse(want)) != 0 {
			t.Errorf("node %s: allocatable cpu %s, want %s", n.Name, got.String(), want)
		}
		if n.Annotations[FakeNodeAnnotation] != "fake" {
			t.Errorf("node %s: annotations %v, want kwok's", n.Name, n.Annotations)
		}
	}
	if nodes[0].Annotations["team"] != "a" {
		t.Errorf("node n1 lost its own annotation: %v", nodes[0].Annotations)
	}
}

// The kwok version is pinned in three places that must agree: the
// module that builds it, the Makefile's folder, and KwokVersion.
func TestKwokVersionPins(t *testing.T) {
	root, err := env.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	read := func(p string) string {
		b, err := os.ReadFile(filepath.Join(root, p))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	if m := regexp.MustCompile(`(?m)^(?:require\s+|\s+)sigs\.k8s\.io/kwok (v\S+)`).FindStringSubmatch(read("hack/kwok/go.mod")); m == nil || m[1] != KwokVersion {
		t.Errorf("hack/kwok/go.mod pins kwok %v, KwokVersion is %s", m, KwokVersion)
	}
	if m := regexp.MustCompile(`(?m)^KWOK_VERSION \?= (\S+)$`).FindStringSubmatch(read("Makefile")); m == nil || m[1] != KwokVersion {
		t.Errorf("the Makefile's KWOK_VERSION is %v, KwokVersion is %s", m, KwokVersion)
	}
}

// Memory reads as written when it is a whole number of units, and as GiB
// with one decimal when a kubelet reports it in KiB.
func TestMemory(t *testing.T) {
	for in, want := range map[string]string{
		"128Gi": "128Gi", "2000Gi": "2000Gi", "24581256Ki": "23.4Gi", "512Ki": "512Ki", "0": "-",
	} {
		if got := memory(resource.MustParse(in)); got != want {
			t.Errorf("memory(%s) = %q, want %q", in, got, want)
		}
	}
}
