package mutators

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/modelgate/modelgate/api/annotations"
	"github.com/modelgate/modelgate/test/harnesses/builders"
)

// getProbe is the probe the tests expect: HTTP GET of path on port.
func getProbe(path string, port, period, failureThreshold int32) *corev1.Probe {
	return &corev1.Probe{
		ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
			Path: path, Port: intstr.FromInt32(port), Scheme: corev1.URISchemeHTTP,
		}},
		TimeoutSeconds: 2, PeriodSeconds: period, SuccessThreshold: 1, FailureThreshold: failureThreshold,
	}
}

// probed is what ServingProbes does to a bare serving container (index i):
// readiness and startup probes on path and port with the given period and
// startup threshold, and the port declared as "http".
func probed(i int, path string, port, period, startupThreshold int32) func(*corev1.PodSpec) {
	return func(s *corev1.PodSpec) {
		c := &s.Containers[i]
		c.ReadinessProbe = getProbe(path, port, period, 3)
		c.StartupProbe = getProbe(path, port, period, startupThreshold)
		c.Ports = append(c.Ports, corev1.ContainerPort{Name: "http", ContainerPort: port, Protocol: corev1.ProtocolTCP})
	}
}

// serving are the settings of an engine with the default warm-up.
func serving(engine annotations.EngineName) annotations.ServingSettings {
	return annotations.ServingSettings{Engine: engine, WarmupTimeoutSeconds: annotations.DefaultWarmupTimeoutSeconds}
}

func TestServingProbes(t *testing.T) {
	execProbe := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"ready"}}}}
	withWarmup := func(e annotations.EngineName, seconds int32) annotations.ServingSettings {
		s := serving(e)
		s.WarmupTimeoutSeconds = seconds
		return s
	}
	cases := map[string]struct {
		serving   annotations.ServingSettings
		period    int32 // ProbeOptions.PeriodSeconds; 5 unless set, -1 for 0
		container int   // index of the serving container; 0 unless set
		// before prepares the pod spec; want turns a copy of the prepared
		// spec into the expected one (nil: unchanged).
		before, want func(*corev1.PodSpec)
		wantChanged  bool
	}{
		"no engine: unchanged": {
			serving: annotations.ServingSettings{Port: 8000, WarmupTimeoutSeconds: 300},
		},
		"no serving container: unchanged": {
			serving: serving(annotations.EngineVLLM), container: NoContainer,
		},
		"vllm preset: warm-up 300s at 5s is 60 periods": {
			serving: serving(annotations.EngineVLLM), want: probed(0, "/health", 8000, 5, 60), wantChanged: true,
		},
		"warm-up 301s at 5s rounds up to 61 periods": {
			serving: withWarmup(annotations.EngineVLLM, 301), want: probed(0, "/health", 8000, 5, 61), wantChanged: true,
		},
		"warm-up shorter than a period is one period": {
			serving: withWarmup(annotations.EngineVLLM, 3), want: probed(0, "/health", 8000, 5, 1), wantChanged: true,
		},
		"no warm-up falls back to the default": {
			serving: withWarmup(annotations.EngineVLLM, 0), want: probed(0, "/health", 8000, 5, 60), wantChanged: true,
		},
		"period from the options": {
			serving: withWarmup(annotations.EngineVLLM, 600), period: 20,
			want: probed(0, "/health", 8000, 20, 30), wantChanged: true,
		},
		"no period in the options is 5s": {
			serving: serving(annotations.EngineVLLM), period: -1,
			want: probed(0, "/health", 8000, 5, 60), wantChanged: true,
		},
		"sglang preset": {
			serving: serving(annotations.EngineSGLang), want: probed(0, "/health", 30000, 5, 60), wantChanged: true,
		},
		"tgi preset": {
			serving: serving(annotations.EngineTGI), want: probed(0, "/health", 80, 5, 60), wantChanged: true,
		},
		"triton preset": {
			serving: serving(annotations.EngineTriton), want: probed(0, "/v2/health/ready", 8000, 5, 60), wantChanged: true,
		},
		"port and path override the preset": {
			serving: annotations.ServingSettings{Engine: annotations.EngineVLLM, Port: 9000, HealthPath: "/ready", WarmupTimeoutSeconds: 120},
			want:    probed(0, "/ready", 9000, 5, 24), wantChanged: true,
		},
		"port alone overrides the preset's": {
			serving: annotations.ServingSettings{Engine: annotations.EngineTGI, Port: 3000, WarmupTimeoutSeconds: 300},
			want:    probed(0, "/health", 3000, 5, 60), wantChanged: true,
		},
		"custom engine takes port and path from the settings": {
			serving: annotations.ServingSettings{Engine: annotations.EngineCustom, Port: 7000, HealthPath: "/healthz", WarmupTimeoutSeconds: 900},
			want:    probed(0, "/healthz", 7000, 5, 180), wantChanged: true,
		},
		"a user readiness probe is kept while the startup probe is added": {
			serving: serving(annotations.EngineVLLM),
			before:  func(s *corev1.PodSpec) { s.Containers[0].ReadinessProbe = execProbe.DeepCopy() },
			want: func(s *corev1.PodSpec) {
				probed(0, "/health", 8000, 5, 60)(s)
				s.Containers[0].ReadinessProbe = execProbe.DeepCopy()
			},
			wantChanged: true,
		},
		"a user startup probe is kept while the readiness probe is added": {
			serving: serving(annotations.EngineVLLM),
			before:  func(s *corev1.PodSpec) { s.Containers[0].StartupProbe = execProbe.DeepCopy() },
			want: func(s *corev1.PodSpec) {
				probed(0, "/health", 8000, 5, 60)(s)
				s.Containers[0].StartupProbe = execProbe.DeepCopy()
			},
			wantChanged: true,
		},
		"the port declared under another name is not declared again": {
			serving: serving(annotations.EngineVLLM),
			before: func(s *corev1.PodSpec) {
				s.Containers[0].Ports = []corev1.ContainerPort{{Name: "openai", ContainerPort: 8000}}
			},
			want: func(s *corev1.PodSpec) {
				c := &s.Containers[0]
				c.ReadinessProbe = getProbe("/health", 8000, 5, 3)
				c.StartupProbe = getProbe("/health", 8000, 5, 60)
			},
			wantChanged: true,
		},
		"http names another port: the serving port is named serving": {
			serving: annotations.ServingSettings{Engine: annotations.EngineVLLM, Port: 8000, WarmupTimeoutSeconds: 300}, // the annotation's port
			before: func(s *corev1.PodSpec) {
				s.Containers[0].Ports = []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}
			},
			want: func(s *corev1.PodSpec) {
				c := &s.Containers[0]
				c.ReadinessProbe = getProbe("/health", 8000, 5, 3)
				c.StartupProbe = getProbe("/health", 8000, 5, 60)
				c.Ports = append(c.Ports, corev1.ContainerPort{Name: "serving", ContainerPort: 8000, Protocol: corev1.ProtocolTCP})
			},
			wantChanged: true,
		},
		"http and serving both taken: the port has no name": {
			serving: annotations.ServingSettings{Engine: annotations.EngineVLLM, Port: 8000, WarmupTimeoutSeconds: 300}, // the annotation's port
			before: func(s *corev1.PodSpec) {
				s.Containers[0].Ports = []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}, {Name: "serving", ContainerPort: 8081}}
			},
			want: func(s *corev1.PodSpec) {
				c := &s.Containers[0]
				c.ReadinessProbe = getProbe("/health", 8000, 5, 3)
				c.StartupProbe = getProbe("/health", 8000, 5, 60)
				c.Ports = append(c.Ports, corev1.ContainerPort{ContainerPort: 8000, Protocol: corev1.ProtocolTCP})
			},
			wantChanged: true,
		},
		"a UDP port with the number does not declare the TCP one": {
			serving: serving(annotations.EngineVLLM),
			before: func(s *corev1.PodSpec) {
				s.Containers[0].Ports = []corev1.ContainerPort{{Name: "metrics", ContainerPort: 8000, Protocol: corev1.ProtocolUDP}}
			},
			want:        probed(0, "/health", 8000, 5, 60),
			wantChanged: true,
		},
		"probes and port already there: unchanged": {
			serving: serving(annotations.EngineVLLM),
			before:  probed(0, "/health", 8000, 5, 60),
		},
		"the serving container is the second": {
			serving: serving(annotations.EngineVLLM), container: 1,
			before: twoContainers, want: probed(1, "/health", 8000, 5, 60), wantChanged: true,
		},
	}
	for name, tc := range cases {
		for _, kind := range targetKinds {
			t.Run(name+"/"+kind, func(t *testing.T) {
				tg, want := specTarget(kind, tc.before, tc.want)
				before := tg.PodSpec.DeepCopy()
				opts := testOptions()
				switch {
				case tc.period < 0:
					opts.Probes.PeriodSeconds = 0
				case tc.period > 0:
					opts.Probes.PeriodSeconds = tc.period
				}
				in := &Input{Operation: Create, Settings: explicit(annotations.Settings{Serving: tc.serving}),
					Container: tc.container, Options: opts}

				changed, err := ServingProbes{}.Mutate(tg, in)
				if err != nil {
					t.Fatalf("Mutate: %v", err)
				}
				checkSpecChange(t, before, want, tg.PodSpec, changed, tc.wantChanged)
			})
		}
	}
}

func TestServingProbesErrors(t *testing.T) {
	cases := map[string]struct {
		serving   annotations.ServingSettings
		container int
		options   *Options
		want      error
	}{
		"no options": {serving: serving(annotations.EngineVLLM), want: errNoOptions},
		"no preset for the engine": {
			serving: serving(annotations.EngineVLLM), options: &Options{}, want: errNoEndpoint,
		},
		"custom engine without a port": {
			serving: annotations.ServingSettings{Engine: annotations.EngineCustom, HealthPath: "/healthz"},
			options: testOptions(), want: errNoEndpoint,
		},
		"custom engine without a path": {
			serving: annotations.ServingSettings{Engine: annotations.EngineCustom, Port: 7000},
			options: testOptions(), want: errNoEndpoint,
		},
		"container index out of range": {
			serving: serving(annotations.EngineVLLM), container: 3, options: testOptions(), want: errNoContainer,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tg := newTarget("Pod", builders.Options{})
			_, err := ServingProbes{}.Mutate(tg, &Input{Settings: explicit(annotations.Settings{Serving: tc.serving}), Container: tc.container, Options: tc.options})
			if !errors.Is(err, tc.want) {
				t.Errorf("Mutate error = %v, want one wrapping %v", err, tc.want)
			}
		})
	}
}

// Every engine but custom has a preset, and custom has none: its port and
// path always come from the annotations.
func TestDefaultProbePresets(t *testing.T) {
	presets := DefaultProbePresets()
	for _, e := range annotations.Engines {
		p, ok := presets[e]
		switch {
		case e == annotations.EngineCustom && ok:
			t.Errorf("custom engine has a preset %+v", p)
		case e != annotations.EngineCustom && (p.Port <= 0 || len(p.Path) == 0 || p.Path[0] != '/'):
			t.Errorf("engine %s preset = %+v, want a port and an absolute path", e, p)
		}
	}
	if len(presets) != len(annotations.Engines)-1 {
		t.Errorf("presets for %d engines, want %d", len(presets), len(annotations.Engines)-1)
	}
}

// reinject runs ServingProbes as the webhook does, through a Chain, so the
// Injected record of the previous pass tells it what it added.
func reinject(t *testing.T, tg *Target, s annotations.ServingSettings) []string {
	t.Helper()
	res, err := Chain{ServingProbes{}}.Apply(tg, &Input{Settings: explicit(annotations.Settings{Serving: s}), Options: testOptions()})
	if err != nil {
		t.Fatalf("Apply: %v", err)
	}
	return res.Changed
}

// Changing the port or warm-up of an injected workload moves the probes
// and the port modelgate added; what the user wrote stays theirs.
func TestServingProbesReinjection(t *testing.T) {
	userReadiness := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"ready"}}}}
	moved := annotations.ServingSettings{Engine: annotations.EngineVLLM, Port: 9000, WarmupTimeoutSeconds: 600}

	t.Run("modelgate's probes and port follow the settings", func(t *testing.T) {
		tg := newTarget("Pod", builders.Options{})
		reinject(t, tg, serving(annotations.EngineVLLM))
		if got := reinject(t, tg, moved); len(got) != 1 {
			t.Fatalf("second pass changed %v, want serving-probes", got)
		}
		if got := reinject(t, tg, moved); len(got) != 0 {
			t.Errorf("third pass changed %v", got)
		}
		want := newTarget("Pod", builders.Options{}).PodSpec
		probed(0, "/health", 9000, 5, 120)(want)
		if diff := cmp.Diff(want, tg.PodSpec); diff != "" {
			t.Errorf("pod spec (-want +got):\n%s", diff)
		}
	})

	t.Run("a user probe stays the user's", func(t *testing.T) {
		tg := newTarget("Pod", builders.Options{})
		tg.PodSpec.Containers[0].ReadinessProbe = userReadiness.DeepCopy()
		reinject(t, tg, serving(annotations.EngineVLLM))
		reinject(t, tg, moved)
		want := newTarget("Pod", builders.Options{}).PodSpec
		probed(0, "/health", 9000, 5, 120)(want)
		want.Containers[0].ReadinessProbe = userReadiness.DeepCopy()
		if diff := cmp.Diff(want, tg.PodSpec); diff != "" {
			t.Errorf("pod spec (-want +got):\n%s", diff)
		}
	})

	t.Run("the port modelgate declared goes when the user declares it", func(t *testing.T) {
		tg := newTarget("Pod", builders.Options{})
		reinject(t, tg, serving(annotations.EngineVLLM))
		c := &tg.PodSpec.Containers[0]
		c.Ports = append([]corev1.ContainerPort{{Name: "openai", ContainerPort: 8000}}, c.Ports...)
		if got := reinject(t, tg, serving(annotations.EngineVLLM)); len(got) != 1 {
			t.Fatalf("second pass changed %v, want serving-probes", got)
		}
		if diff := cmp.Diff([]corev1.ContainerPort{{Name: "openai", ContainerPort: 8000}}, c.Ports); diff != "" {
			t.Errorf("ports (-want +got):\n%s", diff)
		}
		if got := reinject(t, tg, serving(annotations.EngineVLLM)); len(got) != 0 {
			t.Errorf("third pass changed %v", got)
		}
	})

	t.Run("probes the user wrote to look like modelgate's are kept", func(t *testing.T) {
		tg := newTarget("Pod", builders.Options{})
		probed(0, "/health", 8000, 5, 60)(tg.PodSpec)
		reinject(t, tg, moved)
		// No record says modelgate added them: only the new port is declared.
		want := newTarget("Pod", builders.Options{}).PodSpec
		probed(0, "/health", 8000, 5, 60)(want)
		want.Containers[0].Ports = append(want.Containers[0].Ports,
			corev1.ContainerPort{Name: "serving", ContainerPort: 9000, Protocol: corev1.ProtocolTCP})
		if diff := cmp.Diff(want, tg.PodSpec); diff != "" {
			t.Errorf("pod spec (-want +got):\n%s", diff)
		}
	})
}
