package mutators

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/modelgate/modelgate/api/annotations"
)

var (
	hubCache = corev1.EnvVar{Name: "HF_HUB_CACHE", Value: "/models/.cache/huggingface/hub"}
	// hubCacheTGI is the cache's older name, which TGI reads.
	hubCacheTGI = corev1.EnvVar{Name: "HUGGINGFACE_HUB_CACHE", Value: "/models/.cache/huggingface/hub"}
	offline     = corev1.EnvVar{Name: "HF_HUB_OFFLINE", Value: "1"}
	userFoo     = corev1.EnvVar{Name: "FOO", Value: "bar"}
	// fromSecret is a variable set from a Secret: its value is not known.
	fromSecret = corev1.EnvVar{Name: "HF_HUB_CACHE", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: "hub"}, Key: "cache"}}}
	configEnvFrom = []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{
		LocalObjectReference: corev1.LocalObjectReference{Name: "engine-settings"}}}}
)

// withEnv sets the first container's environment.
func withEnv(env ...corev1.EnvVar) func(*corev1.PodSpec) {
	return func(s *corev1.PodSpec) { s.Containers[0].Env = env }
}

// envOwns are the env parts owned on the container "server".
func envOwns(vars ...corev1.EnvVar) []string {
	out := make([]string, len(vars))
	for i, v := range vars {
		out[i] = "env/server/" + v.Name + "=" + v.Value
	}
	return out
}

// TestHFEnv runs ModelLoader over the pod spec (after an earlier pass, when
// the case has one, and an edit by the user in between) and checks the
// serving containers' environment, the env parts owned, and that a second
// pass changes nothing.
func TestHFEnv(t *testing.T) {
	hf := modelSettings(hfLlama, sized("20Gi"))
	cases := map[string]struct {
		model *annotations.ModelSettings
		// container is the serving container's index (0 unless set) in a
		// pod with the containers "proxy" and "server" when twoContainers
		// is set; earlierContainer the one of the earlier pass.
		twoContainers               bool
		container, earlierContainer int
		options                     func(*LoaderOptions)
		before                      func(*corev1.PodSpec)
		earlier                     *annotations.ModelSettings
		edit                        func(*corev1.PodSpec) // between the passes
		// wantEnv is each container's environment afterwards.
		wantEnv  [][]corev1.EnvVar
		wantOwns []string
	}{
		"hf model: both variables": {
			model: hf, wantEnv: [][]corev1.EnvVar{{hubCache, hubCacheTGI, offline}}, wantOwns: envOwns(hubCache, offline, hubCacheTGI),
		},
		"ahead of the container's own variables": {
			model: hf, before: withEnv(userFoo),
			wantEnv: [][]corev1.EnvVar{{hubCache, hubCacheTGI, offline, userFoo}}, wantOwns: envOwns(hubCache, offline, hubCacheTGI),
		},
		"the container's own HF_HUB_OFFLINE stays, whatever its value": {
			model: hf, before: withEnv(userFoo, corev1.EnvVar{Name: "HF_HUB_OFFLINE", Value: "0"}),
			wantEnv:  [][]corev1.EnvVar{{hubCache, hubCacheTGI, userFoo, {Name: "HF_HUB_OFFLINE", Value: "0"}}},
			wantOwns: envOwns(hubCache, hubCacheTGI),
		},
		"the container's own HUGGINGFACE_HUB_CACHE: neither name of the cache is added": {
			model: hf, before: withEnv(corev1.EnvVar{Name: "HUGGINGFACE_HUB_CACHE", Value: "/data"}),
			wantEnv:  [][]corev1.EnvVar{{offline, {Name: "HUGGINGFACE_HUB_CACHE", Value: "/data"}}},
			wantOwns: envOwns(offline),
		},
		"the container's own HF_HUB_CACHE from a Secret stays": {
			model: hf, before: withEnv(fromSecret),
			wantEnv: [][]corev1.EnvVar{{offline, fromSecret}}, wantOwns: envOwns(offline),
		},
		"envFrom is opaque: the variables are added, envFrom stays": {
			model: hf, before: func(s *corev1.PodSpec) { s.Containers[0].EnvFrom = configEnvFrom },
			wantEnv: [][]corev1.EnvVar{{hubCache, hubCacheTGI, offline}}, wantOwns: envOwns(hubCache, offline, hubCacheTGI),
		},
		"another mount path": {
			model:    modelSettings(hfLlama, func(m *annotations.ModelSettings) { m.MountPath = "/mnt/weights" }),
			wantEnv:  [][]corev1.EnvVar{{{Name: "HF_HUB_CACHE", Value: "/mnt/weights/.cache/huggingface/hub"}, {Name: "HUGGINGFACE_HUB_CACHE", Value: "/mnt/weights/.cache/huggingface/hub"}, offline}},
			wantOwns: []string{"env/server/HF_HUB_CACHE=/mnt/weights/.cache/huggingface/hub", "env/server/HF_HUB_OFFLINE=1", "env/server/HUGGINGFACE_HUB_CACHE=/mnt/weights/.cache/huggingface/hub"},
		},
		"a shared cache claim: the same path, the sub path is the mount's": {
			model:   modelSettings(hfLlama, cachedIn(annotations.CachePVC, "model-cache")),
			wantEnv: [][]corev1.EnvVar{{hubCache, hubCacheTGI, offline}}, wantOwns: envOwns(hubCache, offline, hubCacheTGI),
		},
		"the serving container only": {
			model: hf, twoContainers: true, container: 1, before: withEnv(userFoo),
			wantEnv: [][]corev1.EnvVar{{userFoo}, {hubCache, hubCacheTGI, offline}}, wantOwns: envOwns(hubCache, offline, hubCacheTGI),
		},
		"an s3 model: none": {
			model: modelSettings(s3Llama), before: withEnv(userFoo), wantEnv: [][]corev1.EnvVar{{userFoo}},
		},
		"an oci model: none": {
			model: modelSettings("oci://ghcr.io/org/model:v1"), wantEnv: [][]corev1.EnvVar{nil},
		},
		"the user's model-loader: none, its layout is its own": {
			model:   hf,
			before:  func(s *corev1.PodSpec) { s.InitContainers = append(s.InitContainers, *userLoader.DeepCopy()) },
			wantEnv: [][]corev1.EnvVar{nil},
		},
		"hf, then s3: the variables go, the user's stay": {
			earlier: hf, model: modelSettings(s3Llama), before: withEnv(userFoo), wantEnv: [][]corev1.EnvVar{{userFoo}},
		},
		"hf, then no model: the variables go": {
			earlier: hf, wantEnv: [][]corev1.EnvVar{nil},
		},
		"hf, then another mount path: HF_HUB_CACHE follows": {
			earlier: hf, model: modelSettings(hfLlama, func(m *annotations.ModelSettings) { m.MountPath = "/mnt/weights" }),
			before:   withEnv(userFoo),
			wantEnv:  [][]corev1.EnvVar{{{Name: "HF_HUB_CACHE", Value: "/mnt/weights/.cache/huggingface/hub"}, {Name: "HUGGINGFACE_HUB_CACHE", Value: "/mnt/weights/.cache/huggingface/hub"}, offline, userFoo}},
			wantOwns: []string{"env/server/HF_HUB_CACHE=/mnt/weights/.cache/huggingface/hub", "env/server/HF_HUB_OFFLINE=1", "env/server/HUGGINGFACE_HUB_CACHE=/mnt/weights/.cache/huggingface/hub"},
		},
		"hf, then another serving container: the variables move": {
			earlier: hf, model: hf, twoContainers: true, earlierContainer: 1, container: 0,
			wantEnv:  [][]corev1.EnvVar{{hubCache, hubCacheTGI, offline}, nil},
			wantOwns: []string{"env/proxy/HF_HUB_CACHE=/models/.cache/huggingface/hub", "env/proxy/HF_HUB_OFFLINE=1", "env/proxy/HUGGINGFACE_HUB_CACHE=/models/.cache/huggingface/hub"},
		},
		"a value the user changed after injection is theirs": {
			earlier: hf, model: hf,
			edit:     func(s *corev1.PodSpec) { s.Containers[0].Env[2].Value = "0" },
			wantEnv:  [][]corev1.EnvVar{{hubCache, hubCacheTGI, {Name: "HF_HUB_OFFLINE", Value: "0"}}},
			wantOwns: envOwns(hubCache, hubCacheTGI),
		},
		"a value the user changed stays when the model goes": {
			earlier: hf, model: modelSettings(s3Llama),
			edit:    func(s *corev1.PodSpec) { s.Containers[0].Env[0].Value = "/data/hub" },
			wantEnv: [][]corev1.EnvVar{{{Name: "HF_HUB_CACHE", Value: "/data/hub"}}},
		},
	}
	for name, tc := range cases {
		for _, kind := range targetKinds {
			t.Run(name+"/"+kind, func(t *testing.T) {
				before := tc.before
				if tc.twoContainers {
					before = func(s *corev1.PodSpec) {
						twoContainers(s)
						if tc.before != nil {
							tc.before(s)
						}
					}
				}
				tg, _ := specTarget(kind, before, nil)
				opts := testOptions()
				if tc.options != nil {
					tc.options(&opts.Loader)
				}
				input := func(m *annotations.ModelSettings, container int) *Input {
					return &Input{Operation: Update, Settings: annotations.Settings{Model: m}, Container: container, Options: opts}
				}
				chain := Chain{ModelLoader{}}
				if tc.earlier != nil {
					if _, err := chain.Apply(tg, input(tc.earlier, tc.earlierContainer)); err != nil {
						t.Fatalf("earlier Apply: %v", err)
					}
				}
				if tc.edit != nil {
					tc.edit(tg.PodSpec)
				}
				container := tc.container
				if tc.model == nil {
					container = NoContainer
				}
				res, err := chain.Apply(tg, input(tc.model, container))
				if err != nil {
					t.Fatalf("Apply: %v", err)
				}
				var env [][]corev1.EnvVar
				for _, c := range tg.PodSpec.Containers {
					env = append(env, c.Env)
				}
				if diff := cmp.Diff(tc.wantEnv, env); diff != "" {
					t.Errorf("containers' env (-want +got):\n%s", diff)
				}
				var owns []string
				for _, p := range res.Record.Owns {
					if strings.HasPrefix(p, "env/") {
						owns = append(owns, p)
					}
				}
				if diff := cmp.Diff(tc.wantOwns, owns); diff != "" {
					t.Errorf("env parts owned (-want +got):\n%s", diff)
				}

				applyAgain(t, chain, tg, input(tc.model, container))
			})
		}
	}
}

// Opting out (Chain.Revert) removes exactly what modelgate added to the
// environment: the container's own variables, envFrom and order are as
// the user wrote them.
func TestHFEnvOptOut(t *testing.T) {
	cases := map[string]func(*corev1.PodSpec){
		"no environment":                                nil,
		"the user's variables":                          withEnv(userFoo, corev1.EnvVar{Name: "BAR", Value: "$(FOO)/x"}),
		"the user's own HF_HUB_OFFLINE":                 withEnv(corev1.EnvVar{Name: "HF_HUB_OFFLINE", Value: "0"}, userFoo),
		"the user's HF_HUB_CACHE, Secret":               withEnv(fromSecret),
		"the user's envFrom":                            func(s *corev1.PodSpec) { s.Containers[0].EnvFrom = configEnvFrom },
		"the user's HF variables, equal to modelgate's": withEnv(hubCache, offline),
	}
	for name, before := range cases {
		for _, kind := range targetKinds {
			t.Run(name+"/"+kind, func(t *testing.T) {
				tg, want := specTarget(kind, before, nil)
				in := &Input{Operation: Update, Settings: annotations.Settings{Model: modelSettings(hfLlama)}, Container: 0, Options: testOptions()}
				res, err := (Chain{ModelLoader{}}).Apply(tg, in)
				if err != nil {
					t.Fatalf("Apply: %v", err)
				}
				if !slices.Contains(res.Record.Owns, "initContainer/model-loader") {
					t.Fatalf("Apply did not inject: %v", res.Record.Owns)
				}
				if _, err := (Chain{ModelLoader{}}).Revert(tg, &Input{Operation: Update, Options: testOptions()}); err != nil {
					t.Fatalf("Revert: %v", err)
				}
				if diff := cmp.Diff(want, tg.PodSpec); diff != "" {
					t.Errorf("pod spec after opting out (-before injection +after):\n%s", diff)
				}
			})
		}
	}
}
