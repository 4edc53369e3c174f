package mutators

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/modelgate/modelgate/api/annotations"
	"github.com/modelgate/modelgate/internal/gpuclaim"
	"github.com/modelgate/modelgate/test/harnesses/builders"
)

// injectionChain is the webhook's chain without owner metadata: the
// mutators that change the pod spec.
var injectionChain = Chain{ModelLoader{}, GPUPlacement{}, ServingProbes{}}

// settingVariants are the settings the re-injection tests move between, on
// a pod with the containers "proxy" and "server".
var settingVariants = map[string]annotations.Settings{
	"nothing": {},
	"everything on server": {
		Container: "server",
		Model:     modelSettings(hfLlama, sized("20Gi")),
		GPU:       annotations.GPUSettings{Count: 2, Products: []string{"NVIDIA-H100-80GB-HBM3"}, MinMemoryMiB: 81920},
		Serving:   serving(annotations.EngineVLLM),
	},
	"everything on proxy, other values": {
		Container: "proxy",
		Model:     modelSettings(s3Llama, cachedIn(annotations.CachePVC, "model-cache")),
		GPU:       annotations.GPUSettings{Count: 4, Products: []string{"NVIDIA-A100-SXM4-80GB", "NVIDIA-L40S"}},
		Serving:   annotations.ServingSettings{Engine: annotations.EngineTGI, Port: 9000, WarmupTimeoutSeconds: 900},
	},
	"a pvc model only": {Container: "server", Model: modelSettings("pvc://models/llama/v3")},
	"an hf model in memory at another mount": {
		Container: "server",
		Model: modelSettings(hfLlama, sized("8Gi"), cachedIn(annotations.CacheMemory, ""),
			func(m *annotations.ModelSettings) { m.MountPath = "/mnt/m" }),
	},
	"GPUs with memory only": {
		Container: "server", GPU: annotations.GPUSettings{Count: 1, MinMemoryMiB: 40960},
	},
	"DRA GPUs on server": {
		Container: "server",
		GPU:       annotations.GPUSettings{Count: 2, Products: []string{"NVIDIA-H100-80GB-HBM3"}, MinMemoryMiB: 81920, Allocation: annotations.AllocationDRA},
	},
	"DRA GPUs on proxy, other values": {
		Container: "proxy",
		GPU:       annotations.GPUSettings{Count: 1, Products: []string{"NVIDIA-L4"}, Allocation: annotations.AllocationDRA},
	},
	"an engine only, another port": {
		Container: "server", Serving: annotations.ServingSettings{Engine: annotations.EngineVLLM, Port: 8080, WarmupTimeoutSeconds: 60},
	},
}

// reinjectionBase is the pod the re-injection tests start from: a proxy
// and a server, the user's own zone affinity, toleration and volume.
func reinjectionBase(s *corev1.PodSpec) {
	twoContainers(s)
	requireTerms(s, term(zoneA))
	s.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "ml", Effect: corev1.TaintEffectNoSchedule}}
	s.Volumes = []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
}

// pass runs the chain as the webhook does: the serving container resolved
// from the pod and the settings, the previous record read by Apply.
func pass(t *testing.T, tg *Target, s annotations.Settings) Result {
	t.Helper()
	idx, ferr := ResolveContainer(tg.PodSpec, s, gpuResource, field.NewPath("metadata", "annotations"))
	if ferr != nil {
		t.Fatalf("ResolveContainer: %v", ferr)
	}
	res, err := injectionChain.Apply(tg, &Input{Operation: Update, Settings: explicit(s), Container: idx, Options: testOptions()})
	if err != nil {
		t.Fatalf("Apply: %v", err)
	}
	return res
}

// anyRequirementOrder compares node selector requirements as the sets they
// are: a term ANDs them. modelgate updates its requirements in place, so an
// object injected in steps may list them in another order than a fresh one.
var anyRequirementOrder = cmpopts.SortSlices(func(a, b corev1.NodeSelectorRequirement) bool {
	return a.Key+"\x00"+string(a.Operator) < b.Key+"\x00"+string(b.Operator)
})

// Moving an injected object from any settings to any others leaves it as
// a fresh injection of the new settings would: nothing stacked, nothing
// left behind, the same parts owned.
func TestReinjectionConverges(t *testing.T) {
	for from, first := range settingVariants {
		for to, second := range settingVariants {
			for _, kind := range targetKinds {
				t.Run(from+" -> "+to+"/"+kind, func(t *testing.T) {
					fresh, _ := specTarget(kind, reinjectionBase, nil)
					want := pass(t, fresh, second)

					tg, _ := specTarget(kind, reinjectionBase, nil)
					pass(t, tg, first)
					got := pass(t, tg, second)
					if diff := cmp.Diff(fresh.PodSpec, tg.PodSpec, anyRequirementOrder); diff != "" {
						t.Errorf("pod spec differs from a fresh injection (-fresh +got):\n%s", diff)
					}
					if f, g := fresh.PodMeta().Labels[gpuclaim.TemplateLabel], tg.PodMeta().Labels[gpuclaim.TemplateLabel]; f != g {
						t.Errorf("pod label %s = %q, a fresh injection has %q", gpuclaim.TemplateLabel, g, f)
					}
					if diff := cmp.Diff(want.Record.Owns, got.Record.Owns); diff != "" {
						t.Errorf("owned parts differ from a fresh injection (-fresh +got):\n%s", diff)
					}
					if again := pass(t, tg, second); len(again.Changed) != 0 {
						t.Errorf("a third pass changed %v", again.Changed)
					}
				})
			}
		}
	}
}

// What the user wrote stays theirs when modelgate's settings go, even where
// it equals what modelgate would have set.
func TestReleaseKeepsTheUsers(t *testing.T) {
	gpus := annotations.Settings{GPU: annotations.GPUSettings{Count: 2}}
	cases := map[string]struct {
		before func(*corev1.PodSpec)
		// edit changes the spec between the injecting pass and the one
		// without settings, as a user's update would.
		edit func(*corev1.PodSpec)
		want func(*corev1.PodSpec)
	}{
		"GPU quantities and toleration the user wrote before": {
			before: func(s *corev1.PodSpec) {
				setGPUs(&s.Containers[0], 2)
				s.Tolerations = []corev1.Toleration{gpuToleration}
			},
		},
		"a GPU quantity the user changed after injection": {
			edit: func(s *corev1.PodSpec) { setGPUs(&s.Containers[0], 3) },
			want: func(s *corev1.PodSpec) { setGPUs(&s.Containers[0], 3) },
		},
		"a toleration that covers the taint, written by the user": {
			before: func(s *corev1.PodSpec) { s.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}} },
		},
	}
	for name, tc := range cases {
		for _, kind := range targetKinds {
			t.Run(name+"/"+kind, func(t *testing.T) {
				tg, want := specTarget(kind, tc.before, tc.want)
				pass(t, tg, gpus)
				if tc.edit != nil {
					tc.edit(tg.PodSpec)
				}
				res := pass(t, tg, annotations.Settings{})
				if diff := cmp.Diff(want, tg.PodSpec); diff != "" {
					t.Errorf("pod spec (-want +got):\n%s", diff)
				}
				if len(res.Record.Owns) != 0 {
					t.Errorf("Record.Owns = %v, want none", res.Record.Owns)
				}
			})
		}
	}
}

// A model with no serving container to mount it into is our fault (the
// webhook resolves the container first), never a silent no-op.
func TestModelLoaderNeedsContainer(t *testing.T) {
	tg := newTarget("Pod", builders.Options{})
	in := &Input{Settings: annotations.Settings{Model: modelSettings(hfLlama)}, Container: NoContainer, Options: testOptions()}
	if _, err := (ModelLoader{}).Mutate(tg, in); !errors.Is(err, errNoContainer) {
		t.Errorf("Mutate error = %v, want errNoContainer", err)
	}
}

func TestChainRevert(t *testing.T) {
	for _, kind := range targetKinds {
		t.Run(kind, func(t *testing.T) {
			tg, want := specTarget(kind, reinjectionBase, nil)
			chain := Chain(allMutators)
			in := freshInput()
			in.Settings.Container = "server"
			in.Container = 1
			if _, err := chain.Apply(tg, in); err != nil {
				t.Fatalf("Apply: %v", err)
			}
			owner := tg.Object.Labels[annotations.OwnerLabel]

			changed, err := injectionChain.Revert(tg, &Input{Operation: Update, Namespace: in.Namespace, Options: testOptions()})
			if err != nil {
				t.Fatalf("Revert: %v", err)
			}
			if diff := cmp.Diff(injectionChain.Names(), changed); diff != "" {
				t.Errorf("changed (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(want, tg.PodSpec); diff != "" {
				t.Errorf("pod spec after Revert (-want +got):\n%s", diff)
			}
			for i, m := range tg.Metas() {
				if v, ok := m.Annotations[annotations.Injected]; ok {
					t.Errorf("metadata %d still carries the record %s", i, v)
				}
				if got := m.Labels[annotations.OwnerLabel]; got != owner {
					t.Errorf("metadata %d owner = %q, want %q kept", i, got, owner)
				}
			}

			again, err := injectionChain.Revert(tg, &Input{Operation: Update, Namespace: in.Namespace, Options: testOptions()})
			if err != nil || len(again) != 0 {
				t.Errorf("second Revert changed %v (err %v), want nothing", again, err)
			}
		})
	}
}

// An update that drops the record (kubectl replace of a manifest without
// it) is read with the old object's: the parts stay modelgate's.
func TestPreviousRecordFallsBackToOld(t *testing.T) {
	tg := newTarget("Pod", builders.Options{})
	if _, err := (Chain{ModelLoader{}}).Apply(tg, &Input{Settings: annotations.Settings{Model: modelSettings(hfLlama)}, Options: testOptions()}); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	old := tg.Object.DeepCopy()
	delete(tg.Object.Annotations, annotations.Injected)

	opts := testOptions()
	if got := PreviousRecord(tg, &Input{Options: opts}); len(got.Owns) != 0 {
		t.Errorf("PreviousRecord without old = %v, want empty", got)
	}
	got := PreviousRecord(tg, &Input{Options: opts, Old: old})
	if diff := cmp.Diff(hfOwned, got.Owns); diff != "" {
		t.Errorf("PreviousRecord(old).Owns (-want +got):\n%s", diff)
	}
	withOld, without := HasRecord(tg, &Input{Options: opts, Old: old}), HasRecord(tg, &Input{Options: opts})
	if !withOld || without {
		t.Errorf("HasRecord = %v with old, %v without; want true, false", withOld, without)
	}
	// Re-applying the same model updates the volume instead of calling it
	// the user's name clash.
	in := &Input{Settings: annotations.Settings{Model: modelSettings(hfLlama)}, Options: testOptions(), Old: old}
	if _, err := (Chain{ModelLoader{}}).Apply(tg, in); err != nil {
		t.Errorf("Apply with the record only on old: %v", err)
	}
}

func TestRecordContainers(t *testing.T) {
	r := Record{Owns: []string{
		"containerPort/server/8000/http", "initContainer/model-loader", "limits/proxy/nvidia.com/gpu=1",
		"nodeAffinity/In/nvidia.com/gpu.product", "readinessProbe/server", "volumeMount/proxy/model-store",
	}}
	if diff := cmp.Diff([]string{"server", "proxy"}, r.Containers()); diff != "" {
		t.Errorf("Containers (-want +got):\n%s", diff)
	}
	if got := (Record{}).Containers(); got != nil {
		t.Errorf("empty record Containers = %v, want nil", got)
	}
}
