package mutators

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/modelgate/modelgate/api/annotations"
	"github.com/modelgate/modelgate/test/harnesses/builders"
)

// allMutators is every mutator modelgate ships. Add each new mutator here:
// TestMutatorsIdempotent proves it converges.
var allMutators = []Mutator{
	OwnerMetadata{},
	ModelLoader{},
	GPUPlacement{},
	ServingProbes{},
}

// freshSettings ask every mutator for something: a sized Hugging Face
// model, GPUs of a product with a minimum memory, and a vLLM server.
func freshSettings() annotations.Settings {
	return annotations.Settings{
		Model: modelSettings("hf://org/repo", func(m *annotations.ModelSettings) { m.Size = quantity("10Gi") }),
		GPU:   annotations.GPUSettings{Count: 1, Products: []string{"NVIDIA-H100-80GB-HBM3"}, MinMemoryMiB: 40960},
		Serving: annotations.ServingSettings{
			Engine: annotations.EngineVLLM, WarmupTimeoutSeconds: annotations.DefaultWarmupTimeoutSeconds,
		},
	}
}

// freshOwns are the parts of the pod spec the mutators record as theirs
// after a pass with freshInput.
var freshOwns = []string{
	"containerPort/server/8000/http",
	"env/server/HF_HUB_CACHE=/models/.cache/huggingface/hub", "env/server/HF_HUB_OFFLINE=1",
	"env/server/HUGGINGFACE_HUB_CACHE=/models/.cache/huggingface/hub",
	"initContainer/model-loader",
	"limits/server/nvidia.com/gpu=1", "nodeAffinity/Gt/nvidia.com/gpu.memory", "nodeAffinity/In/nvidia.com/gpu.product",
	"readinessProbe/server", "requests/server/nvidia.com/gpu=1", "startupProbe/server",
	"toleration/NoSchedule/nvidia.com/gpu", "volume/model-store", "volumeMount/server/model-store",
}

// freshInput is a CREATE by an ordinary user in a namespace with a team,
// with settings for every mutator: a request every mutator acts on.
func freshInput() *Input {
	return &Input{Operation: Create, Namespace: "team-a", NamespaceLabels: teamNS, Requester: untrusted,
		Settings: freshSettings(), Container: 0, Options: testOptions()}
}

// targetState is everything a mutator may change: the metadata and the pod
// spec.
type targetState struct {
	Metas []metav1.ObjectMeta
	Spec  corev1.PodSpec
}

func state(t *Target) targetState {
	return targetState{Metas: metas(t), Spec: *t.PodSpec.DeepCopy()}
}

func TestMutatorsIdempotent(t *testing.T) {
	for _, m := range allMutators {
		for _, kind := range targetKinds {
			t.Run(m.Name()+"/"+kind, func(t *testing.T) {
				tg := newTarget(kind, builders.Options{Annotations: map[string]string{annotations.Inject: "true"}})
				in := freshInput()
				changed, err := m.Mutate(tg, in)
				if err != nil {
					t.Fatalf("first Mutate: %v", err)
				}
				if !changed {
					t.Fatal("first Mutate on a fresh target reported no change")
				}
				once := state(tg)
				// The second pass reads back what the first owned, as
				// Chain.Apply does from the Injected record: without it, a
				// part modelgate created looks like the user's.
				in.Previous = Record{Owns: slices.Clone(tg.owns)}
				changed, err = m.Mutate(tg, in)
				if err != nil {
					t.Fatalf("second Mutate: %v", err)
				}
				if changed {
					t.Error("second Mutate reported a change")
				}
				if diff := cmp.Diff(once, state(tg)); diff != "" {
					t.Errorf("second Mutate changed the target (-first +second):\n%s", diff)
				}
			})
		}
	}
}

func TestMutatorNamesUnique(t *testing.T) {
	seen := map[string]bool{}
	for _, m := range allMutators {
		if m.Name() == "" || seen[m.Name()] {
			t.Errorf("mutator name %q is empty or duplicated", m.Name())
		}
		seen[m.Name()] = true
	}
	if diff := cmp.Diff([]string{OwnerMetadataName}, Chain{OwnerMetadata{}}.Names()); diff != "" {
		t.Errorf("Names() (-want +got):\n%s", diff)
	}
}

func TestChainApplyWritesRecord(t *testing.T) {
	for _, kind := range targetKinds {
		t.Run(kind, func(t *testing.T) {
			tg := newTarget(kind, builders.Options{})
			in := freshInput()
			chain := Chain(allMutators)

			res, err := chain.Apply(tg, in)
			if err != nil {
				t.Fatalf("Apply: %v", err)
			}
			want := Record{Mutators: chain.Names(), Settings: in.Settings.Hash(), Owns: freshOwns}
			if diff := cmp.Diff(want, res.Record); diff != "" {
				t.Errorf("Result.Record (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(chain.Names(), res.Changed); diff != "" {
				t.Errorf("Result.Changed (-want +got):\n%s", diff)
			}
			for i, m := range tg.Metas() {
				got, ok := ParseRecord(m.Annotations[annotations.Injected])
				if !ok {
					t.Fatalf("metadata %d: no record in %q", i, m.Annotations[annotations.Injected])
				}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("metadata %d record (-want +got):\n%s", i, diff)
				}
			}

			once := state(tg)
			res2, err := chain.Apply(tg, in)
			if err != nil {
				t.Fatalf("second Apply: %v", err)
			}
			if len(res2.Changed) != 0 {
				t.Errorf("second Apply changed %v", res2.Changed)
			}
			if diff := cmp.Diff(res.Record, res2.Record); diff != "" {
				t.Errorf("second Apply record (-first +second):\n%s", diff)
			}
			if diff := cmp.Diff(once, state(tg)); diff != "" {
				t.Errorf("second Apply changed the target (-first +second):\n%s", diff)
			}
		})
	}
}

// A controller stamping a Pod out of an injected template copies its labels
// and annotations, record included: admitting that Pod changes nothing.
func TestChainApplyPodFromInjectedTemplate(t *testing.T) {
	chain := Chain(allMutators)
	workload := newTarget("CronJob", builders.Options{TemplateAnnotations: map[string]string{annotations.Inject: "true"}})
	if _, err := chain.Apply(workload, freshInput()); err != nil {
		t.Fatalf("Apply to the workload: %v", err)
	}
	tpl := workload.PodMeta()

	pod := newTarget("Pod", builders.Options{Name: "server-28391-abcde", Labels: tpl.Labels, Annotations: tpl.Annotations})
	*pod.PodSpec = *workload.PodSpec.DeepCopy()
	before := state(pod)
	in := freshInput()
	in.Requester = trusted
	res, err := chain.Apply(pod, in)
	if err != nil {
		t.Fatalf("Apply to the pod: %v", err)
	}
	if len(res.Changed) != 0 {
		t.Errorf("Changed = %v, want none", res.Changed)
	}
	if diff := cmp.Diff(before, state(pod)); diff != "" {
		t.Errorf("pod (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(tpl.Annotations, pod.Object.Annotations); diff != "" {
		t.Errorf("pod annotations differ from the template's (-template +pod):\n%s", diff)
	}
}

// The record is informational: a forged one saves no work.
func TestChainApplyForgedRecord(t *testing.T) {
	forged := Record{Mutators: []string{OwnerMetadataName}, Settings: "000000000000"}.String()
	tg := newTarget("Pod", builders.Options{Annotations: map[string]string{annotations.Injected: forged}})
	in := freshInput()
	chain := Chain(allMutators)
	res, err := chain.Apply(tg, in)
	if err != nil {
		t.Fatalf("Apply: %v", err)
	}
	if diff := cmp.Diff(chain.Names(), res.Changed); diff != "" {
		t.Errorf("Changed (-want +got):\n%s", diff)
	}
	if got := tg.Object.Labels[annotations.OwnerLabel]; got != aliceLabel {
		t.Errorf("owner label = %q, want %q", got, aliceLabel)
	}
	want := Record{Mutators: chain.Names(), Settings: in.Settings.Hash(), Owns: freshOwns}.String()
	if got := tg.Object.Annotations[annotations.Injected]; got != want {
		t.Errorf("record = %s, want %s", got, want)
	}
}

// noop is a mutator that never changes anything.
type noop struct{}

func (noop) Name() string                         { return "noop" }
func (noop) Mutate(*Target, *Input) (bool, error) { return false, nil }

func TestChainApplyNothingChanged(t *testing.T) {
	tg := newTarget("CronJob", builders.Options{})
	before := metas(tg)
	res, err := Chain{noop{}}.Apply(tg, freshInput())
	if err != nil {
		t.Fatalf("Apply: %v", err)
	}
	if diff := cmp.Diff(Result{}, res); diff != "" {
		t.Errorf("Result (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(before, metas(tg)); diff != "" {
		t.Errorf("target changed (-before +after):\n%s", diff)
	}
}

var errBoom = errors.New("boom")

// failing is a mutator that always fails.
type failing struct{}

func (failing) Name() string                         { return "failing" }
func (failing) Mutate(*Target, *Input) (bool, error) { return false, errBoom }

func TestChainApplyError(t *testing.T) {
	cases := map[string]Chain{
		"alone":                  {failing{}},
		"after a mutator":        {OwnerMetadata{}, failing{}},
		"before a mutator":       {failing{}, OwnerMetadata{}},
		"between no-op mutators": {noop{}, failing{}, noop{}},
	}
	for name, chain := range cases {
		t.Run(name, func(t *testing.T) {
			res, err := chain.Apply(newTarget("Pod", builders.Options{}), freshInput())
			if !errors.Is(err, errBoom) {
				t.Fatalf("Apply error = %v, want one wrapping %v", err, errBoom)
			}
			if !strings.Contains(err.Error(), "failing") {
				t.Errorf("Apply error %q does not name the mutator", err)
			}
			if diff := cmp.Diff(Result{}, res); diff != "" {
				t.Errorf("Result on error (-want +got):\n%s", diff)
			}
		})
	}
}
