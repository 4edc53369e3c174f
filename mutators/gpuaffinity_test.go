package mutators

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/modelgate/modelgate/api/annotations"
	config "github.com/modelgate/modelgate/api/config/v1alpha1"
	"github.com/modelgate/modelgate/internal/seal"
	"github.com/modelgate/modelgate/test/harnesses/builders"
)

// The resource and node labels of DefaultGPUOptions.
const (
	gpuResource  = corev1.ResourceName("nvidia.com/gpu")
	productLabel = "nvidia.com/gpu.product"
	memoryLabel  = "nvidia.com/gpu.memory"
)

var gpuToleration = corev1.Toleration{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}

func productIn(products ...string) corev1.NodeSelectorRequirement {
	return corev1.NodeSelectorRequirement{Key: productLabel, Operator: corev1.NodeSelectorOpIn, Values: products}
}

func memoryGt(v string) corev1.NodeSelectorRequirement {
	return corev1.NodeSelectorRequirement{Key: memoryLabel, Operator: corev1.NodeSelectorOpGt, Values: []string{v}}
}

var zoneA = corev1.NodeSelectorRequirement{Key: "topology.kubernetes.io/zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"a"}}

func term(reqs ...corev1.NodeSelectorRequirement) corev1.NodeSelectorTerm {
	return corev1.NodeSelectorTerm{MatchExpressions: reqs}
}

// requireTerms sets the pod's required node affinity to the terms.
func requireTerms(s *corev1.PodSpec, terms ...corev1.NodeSelectorTerm) {
	if s.Affinity == nil {
		s.Affinity = &corev1.Affinity{}
	}
	if s.Affinity.NodeAffinity == nil {
		s.Affinity.NodeAffinity = &corev1.NodeAffinity{}
	}
	s.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution = &corev1.NodeSelector{NodeSelectorTerms: terms}
}

// setGPUs sets the container's GPU limit and request.
func setGPUs(c *corev1.Container, n int64) {
	q := *resource.NewQuantity(n, resource.DecimalSI)
	if c.Resources.Limits == nil {
		c.Resources.Limits = corev1.ResourceList{}
	}
	if c.Resources.Requests == nil {
		c.Resources.Requests = corev1.ResourceList{}
	}
	c.Resources.Limits[gpuResource] = q
	c.Resources.Requests[gpuResource] = q
}

// placed is what GPUPlacement does to a bare pod asking for n GPUs.
func placed(n int64) func(*corev1.PodSpec) {
	return func(s *corev1.PodSpec) {
		setGPUs(&s.Containers[0], n)
		s.Tolerations = append(s.Tolerations, gpuToleration)
	}
}

// twoContainers gives the pod a sidecar before the server.
func twoContainers(s *corev1.PodSpec) {
	s.Containers = append([]corev1.Container{{Name: "proxy", Image: "registry.example.com/proxy:1"}}, s.Containers...)
}

// testOptions are the platform options the mutator tests run with.
func testOptions() *Options {
	return &Options{
		Loader: LoaderOptions{
			Image:     testLoaderImage,
			Command:   []string{"/modelgate", "load"},
			Resources: testLoaderResources(),
		},
		GPU:    DefaultGPUOptions(),
		Probes: ProbeOptions{Presets: DefaultProbePresets(), PeriodSeconds: config.DefaultProbePeriodSeconds},
		Seal:   seal.Ephemeral(),
	}
}

func TestGPUPlacement(t *testing.T) {
	preferred := []corev1.PreferredSchedulingTerm{{Weight: 10, Preference: term(zoneA)}}
	antiAffinity := &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
		TopologyKey: "kubernetes.io/hostname",
	}}}
	hostField := corev1.NodeSelectorRequirement{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"node-1"}}

	cases := map[string]struct {
		gpu       annotations.GPUSettings
		container int // index of the serving container; 0 unless set
		// before prepares the pod spec; want turns a copy of the prepared
		// spec into the expected one (nil: unchanged).
		before, want func(*corev1.PodSpec)
		wantChanged  bool
	}{
		"no GPUs: unchanged": {},
		"no GPUs with products: unchanged": {
			gpu: annotations.GPUSettings{Products: []string{"NVIDIA-H100-80GB-HBM3"}},
		},
		"no serving container: unchanged": {
			gpu: annotations.GPUSettings{Count: 1}, container: NoContainer,
		},
		"count only: resources and toleration, no affinity": {
			gpu: annotations.GPUSettings{Count: 2}, want: placed(2), wantChanged: true,
		},
		"products: required affinity with one term": {
			gpu: annotations.GPUSettings{Count: 1, Products: []string{"NVIDIA-A100-SXM4-80GB", "NVIDIA-H100-80GB-HBM3"}},
			want: func(s *corev1.PodSpec) {
				placed(1)(s)
				requireTerms(s, term(productIn("NVIDIA-A100-SXM4-80GB", "NVIDIA-H100-80GB-HBM3")))
			},
			wantChanged: true,
		},
		"memory: Gt one less than the minimum": {
			gpu: annotations.GPUSettings{Count: 1, MinMemoryMiB: 40960},
			want: func(s *corev1.PodSpec) {
				placed(1)(s)
				requireTerms(s, term(memoryGt("40959")))
			},
			wantChanged: true,
		},
		"products and memory: both in the term, product first": {
			gpu: annotations.GPUSettings{Count: 1, Products: []string{"NVIDIA-L40S"}, MinMemoryMiB: 1},
			want: func(s *corev1.PodSpec) {
				placed(1)(s)
				requireTerms(s, term(productIn("NVIDIA-L40S"), memoryGt("0")))
			},
			wantChanged: true,
		},
		"existing terms each get the requirement; preferred and anti-affinity untouched": {
			gpu: annotations.GPUSettings{Count: 1, Products: []string{"NVIDIA-H100-80GB-HBM3"}},
			before: func(s *corev1.PodSpec) {
				requireTerms(s, term(zoneA), corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{hostField}})
				s.Affinity.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution = preferred
				s.Affinity.PodAntiAffinity = antiAffinity
			},
			want: func(s *corev1.PodSpec) {
				placed(1)(s)
				requireTerms(s,
					term(zoneA, productIn("NVIDIA-H100-80GB-HBM3")),
					corev1.NodeSelectorTerm{
						MatchExpressions: []corev1.NodeSelectorRequirement{productIn("NVIDIA-H100-80GB-HBM3")},
						MatchFields:      []corev1.NodeSelectorRequirement{hostField},
					})
			},
			wantChanged: true,
		},
		"an empty term matches no node and stays empty": {
			gpu:    annotations.GPUSettings{Count: 1, MinMemoryMiB: 24576},
			before: func(s *corev1.PodSpec) { requireTerms(s, term(), term(zoneA)) },
			want: func(s *corev1.PodSpec) {
				placed(1)(s)
				requireTerms(s, term(), term(zoneA, memoryGt("24575")))
			},
			wantChanged: true,
		},
		"node affinity with only preferred terms gets a required term": {
			gpu: annotations.GPUSettings{Count: 1, Products: []string{"NVIDIA-L4"}},
			before: func(s *corev1.PodSpec) {
				s.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: preferred}}
			},
			want: func(s *corev1.PodSpec) {
				placed(1)(s)
				requireTerms(s, term(productIn("NVIDIA-L4")))
			},
			wantChanged: true,
		},
		"a user requirement on the product label with another operator is kept": {
			gpu: annotations.GPUSettings{Count: 1, Products: []string{"NVIDIA-L4"}},
			before: func(s *corev1.PodSpec) {
				requireTerms(s, term(corev1.NodeSelectorRequirement{
					Key: productLabel, Operator: corev1.NodeSelectorOpNotIn, Values: []string{"Tesla-T4"}}))
			},
			want: func(s *corev1.PodSpec) {
				placed(1)(s)
				terms := s.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
				terms[0].MatchExpressions = append(terms[0].MatchExpressions, productIn("NVIDIA-L4"))
			},
			wantChanged: true,
		},
		"an earlier product requirement is replaced in place, not stacked": {
			gpu: annotations.GPUSettings{Count: 1, Products: []string{"NVIDIA-H100-80GB-HBM3"}, MinMemoryMiB: 81920},
			before: func(s *corev1.PodSpec) {
				placed(1)(s)
				requireTerms(s, term(productIn("NVIDIA-A100-SXM4-40GB"), zoneA, memoryGt("40959")))
			},
			want: func(s *corev1.PodSpec) {
				requireTerms(s, term(productIn("NVIDIA-H100-80GB-HBM3"), zoneA, memoryGt("81919")))
			},
			wantChanged: true,
		},
		"a duplicate product requirement is dropped": {
			gpu: annotations.GPUSettings{Count: 1, Products: []string{"NVIDIA-L4"}},
			before: func(s *corev1.PodSpec) {
				placed(1)(s)
				requireTerms(s, term(productIn("NVIDIA-L4"), zoneA, productIn("NVIDIA-A10")))
			},
			want:        func(s *corev1.PodSpec) { requireTerms(s, term(productIn("NVIDIA-L4"), zoneA)) },
			wantChanged: true,
		},
		"already placed: unchanged": {
			gpu: annotations.GPUSettings{Count: 1, Products: []string{"NVIDIA-L4"}, MinMemoryMiB: 20000},
			before: func(s *corev1.PodSpec) {
				placed(1)(s)
				requireTerms(s, term(zoneA, productIn("NVIDIA-L4"), memoryGt("19999")))
			},
		},
		"a profile's GPU count leaves the count the container declares": {
			gpu:    annotations.GPUSettings{Count: 4},
			before: placed(1),
		},
		"a toleration of everything: no toleration added": {
			gpu: annotations.GPUSettings{Count: 1},
			before: func(s *corev1.PodSpec) {
				s.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
			},
			want:        func(s *corev1.PodSpec) { setGPUs(&s.Containers[0], 1) },
			wantChanged: true,
		},
		"a toleration of the key for every effect: no toleration added": {
			gpu: annotations.GPUSettings{Count: 1},
			before: func(s *corev1.PodSpec) {
				s.Tolerations = []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists}}
			},
			want:        func(s *corev1.PodSpec) { setGPUs(&s.Containers[0], 1) },
			wantChanged: true,
		},
		"a toleration of the key for another effect or by value: ours added": {
			gpu: annotations.GPUSettings{Count: 1},
			before: func(s *corev1.PodSpec) {
				s.Tolerations = []corev1.Toleration{
					{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
					{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpEqual, Value: "present", Effect: corev1.TaintEffectNoSchedule},
				}
			},
			want:        placed(1),
			wantChanged: true,
		},
		"the serving container is the second": {
			gpu: annotations.GPUSettings{Count: 1}, container: 1,
			before: twoContainers,
			want: func(s *corev1.PodSpec) {
				setGPUs(&s.Containers[1], 1)
				s.Tolerations = []corev1.Toleration{gpuToleration}
			},
			wantChanged: true,
		},
	}
	for name, tc := range cases {
		for _, kind := range targetKinds {
			t.Run(name+"/"+kind, func(t *testing.T) {
				tg, want := specTarget(kind, tc.before, tc.want)
				before := tg.PodSpec.DeepCopy()
				in := &Input{Operation: Create, Settings: annotations.Settings{GPU: tc.gpu},
					Container: tc.container, Options: testOptions()}

				changed, err := GPUPlacement{}.Mutate(tg, in)
				if err != nil {
					t.Fatalf("Mutate: %v", err)
				}
				checkSpecChange(t, before, want, tg.PodSpec, changed, tc.wantChanged)
			})
		}
	}
}

// Re-injecting with other products and memory replaces modelgate's
// requirements in every term instead of adding a second set, and a third
// pass changes nothing.
func TestGPUPlacementReinjection(t *testing.T) {
	tg := newTarget("Pod", builders.Options{})
	requireTerms(tg.PodSpec, term(zoneA), term(corev1.NodeSelectorRequirement{Key: "pool", Operator: corev1.NodeSelectorOpExists}))
	var prev Record
	pass := func(g annotations.GPUSettings) bool {
		t.Helper()
		tg.owns = nil
		changed, err := GPUPlacement{}.Mutate(tg, &Input{Settings: annotations.Settings{GPU: g}, Options: testOptions(), Previous: prev})
		if err != nil {
			t.Fatalf("Mutate: %v", err)
		}
		prev = Record{Owns: slices.Clone(tg.owns)}
		return changed
	}
	if !pass(annotations.GPUSettings{Count: 1, Products: []string{"NVIDIA-A100-SXM4-40GB"}, MinMemoryMiB: 40960}) {
		t.Fatal("first pass reported no change")
	}
	h100 := annotations.GPUSettings{Count: 2, Products: []string{"NVIDIA-H100-80GB-HBM3", "NVIDIA-H200"}, MinMemoryMiB: 81920}
	if !pass(h100) {
		t.Fatal("second pass with other products reported no change")
	}
	if pass(h100) {
		t.Error("third pass reported a change")
	}

	want := newTarget("Pod", builders.Options{}).PodSpec
	placed(2)(want)
	products, memory := productIn("NVIDIA-H100-80GB-HBM3", "NVIDIA-H200"), memoryGt("81919")
	requireTerms(want,
		term(zoneA, products, memory),
		term(corev1.NodeSelectorRequirement{Key: "pool", Operator: corev1.NodeSelectorOpExists}, products, memory))
	if diff := cmp.Diff(want, tg.PodSpec); diff != "" {
		t.Errorf("pod spec (-want +got):\n%s", diff)
	}
}

// The requirement values modelgate writes are its own: changing the
// settings' slice afterwards, or one term's values, changes nothing else.
func TestGPUPlacementCopiesValues(t *testing.T) {
	tg := newTarget("Pod", builders.Options{})
	requireTerms(tg.PodSpec, term(zoneA), term(zoneA))
	products := []string{"NVIDIA-L4"}
	if _, err := (GPUPlacement{}).Mutate(tg, &Input{Settings: annotations.Settings{GPU: annotations.GPUSettings{Count: 1, Products: products}}, Options: testOptions()}); err != nil {
		t.Fatalf("Mutate: %v", err)
	}
	products[0] = "changed"
	terms := tg.PodSpec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	terms[0].MatchExpressions[1].Values[0] = "also changed"
	if got := terms[1].MatchExpressions[1].Values; !cmp.Equal(got, []string{"NVIDIA-L4"}) {
		t.Errorf("second term's product values = %v, want [NVIDIA-L4]", got)
	}
}

func TestGPUPlacementErrors(t *testing.T) {
	one := annotations.GPUSettings{Count: 1}
	cases := map[string]struct {
		gpu       annotations.GPUSettings
		container int
		options   *Options
		want      error
	}{
		"no options":                   {gpu: one, want: errNoOptions},
		"no resource name":             {gpu: one, options: &Options{}, want: errGPUOptions},
		"no product label":             {gpu: annotations.GPUSettings{Count: 1, Products: []string{"x"}}, options: &Options{GPU: GPUOptions{ResourceName: gpuResource}}, want: errGPUOptions},
		"no memory label":              {gpu: annotations.GPUSettings{Count: 1, MinMemoryMiB: 1}, options: &Options{GPU: GPUOptions{ResourceName: gpuResource}}, want: errGPUOptions},
		"container index out of range": {gpu: one, container: 1, options: testOptions(), want: errNoContainer},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tg := newTarget("Pod", builders.Options{})
			_, err := GPUPlacement{}.Mutate(tg, &Input{Settings: annotations.Settings{GPU: tc.gpu}, Container: tc.container, Options: tc.options})
			if !errors.Is(err, tc.want) {
				t.Errorf("Mutate error = %v, want one wrapping %v", err, tc.want)
			}
		})
	}
}

// Without a taint key (a platform whose GPU nodes are not tainted) the pod
// gets no toleration: an empty key with Exists would tolerate every taint.
func TestGPUPlacementNoTaintKey(t *testing.T) {
	tg := newTarget("Pod", builders.Options{})
	opts := testOptions()
	opts.GPU.TaintKey = ""
	if _, err := (GPUPlacement{}).Mutate(tg, &Input{Settings: annotations.Settings{GPU: annotations.GPUSettings{Count: 1}}, Options: opts}); err != nil {
		t.Fatalf("Mutate: %v", err)
	}
	if len(tg.PodSpec.Tolerations) != 0 {
		t.Errorf("tolerations = %v, want none", tg.PodSpec.Tolerations)
	}
}

// A GPU count the serving container declares itself (a NIM Deployment's
// nvidia.com/gpu: 8) wins over a profile's modelgate.io/gpu, is never
// recorded as modelgate's and survives an opt-out; the object's own
// annotation that contradicts it is an invalid object naming both.
func TestGPUPlacementDeclaredCount(t *testing.T) {
	parser := annotations.Parser{Profiles: map[string]map[string]string{"one-gpu": {annotations.GPU: "1"}}}
	annos := field.NewPath("metadata", "annotations")
	settings := func(a map[string]string) annotations.Settings {
		s, errs := parser.Parse(annotations.Source{Path: annos, Annotations: a})
		if len(errs) > 0 {
			t.Fatalf("Parse: %v", errs)
		}
		return s
	}
	nim := func() *Target {
		tg := newTarget("Pod", builders.Options{})
		setGPUs(&tg.PodSpec.Containers[0], 8)
		return tg
	}
	chain := Chain{GPUPlacement{}}
	declaredEight := func(t *testing.T, tg *Target) {
		t.Helper()
		c := tg.PodSpec.Containers[0]
		if l, r := c.Resources.Limits[gpuResource], c.Resources.Requests[gpuResource]; l.Value() != 8 || r.Value() != 8 {
			t.Errorf("limit %s, request %s: want the container's own 8", l.String(), r.String())
		}
	}

	for name, a := range map[string]map[string]string{
		"a profile's other count":      {annotations.Profile: "one-gpu"},
		"the annotation's equal count": {annotations.GPU: "8"},
	} {
		t.Run(name, func(t *testing.T) {
			tg := nim()
			in := &Input{Settings: settings(a), Options: testOptions()}
			res, err := chain.Apply(tg, in)
			if err != nil {
				t.Fatalf("Apply: %v", err)
			}
			declaredEight(t, tg)
			for _, p := range res.Record.Owns {
				if strings.HasPrefix(p, partLimits+"/") || strings.HasPrefix(p, partRequests+"/") {
					t.Errorf("record owns %q, a count the user wrote", p)
				}
			}
			if !slices.Contains(tg.PodSpec.Tolerations, gpuToleration) {
				t.Errorf("no GPU toleration: %v", tg.PodSpec.Tolerations)
			}
			warned := slices.ContainsFunc(Warnings(tg, in), func(w string) bool {
				return strings.Contains(w, `declares nvidia.com/gpu: 8, which wins over profile "one-gpu"`)
			})
			if want := a[annotations.Profile] != ""; warned != want {
				t.Errorf("warned about the profile's count: %v, want %v (%q)", warned, want, Warnings(tg, in))
			}
			if _, err := chain.Revert(tg, &Input{Options: testOptions()}); err != nil {
				t.Fatalf("Revert: %v", err)
			}
			declaredEight(t, tg)
			if len(tg.PodSpec.Tolerations) != 0 {
				t.Errorf("opt-out left modelgate's toleration: %v", tg.PodSpec.Tolerations)
			}
		})
	}

	t.Run("the annotation's other count", func(t *testing.T) {
		tg := nim()
		_, err := chain.Apply(tg, &Input{Settings: settings(map[string]string{annotations.GPU: "1"}), Options: testOptions()})
		ie, ok := errors.AsType[*InvalidError](err)
		if !ok {
			t.Fatalf("Apply: %v, want an InvalidError", err)
		}
		want := field.ErrorList{field.Invalid(annos.Key(annotations.GPU), "1",
			`contradicts container "`+tg.PodSpec.Containers[0].Name+`", which declares nvidia.com/gpu: 8 in its resources; `+
				`set modelgate.io/gpu to 8 or remove it, or remove the container's own nvidia.com/gpu`)}
		if diff := cmp.Diff(want, ie.Errs); diff != "" {
			t.Errorf("errors (-want +got):\n%s", diff)
		}
	})

	// A count modelgate set earlier and the user has not touched is still
	// modelgate's: a new annotation value replaces it.
	t.Run("modelgate's own earlier count follows the annotation", func(t *testing.T) {
		tg := newTarget("Pod", builders.Options{})
		if _, err := chain.Apply(tg, &Input{Settings: settings(map[string]string{annotations.GPU: "1"}), Options: testOptions()}); err != nil {
			t.Fatalf("Apply: %v", err)
		}
		if _, err := chain.Apply(tg, &Input{Settings: settings(map[string]string{annotations.GPU: "4"}), Options: testOptions()}); err != nil {
			t.Fatalf("second Apply: %v", err)
		}
		if l := tg.PodSpec.Containers[0].Resources.Limits[gpuResource]; l.Value() != 4 {
			t.Errorf("limit %s, want 4", l.String())
		}
	})
}
