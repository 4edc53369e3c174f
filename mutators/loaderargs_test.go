package mutators

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/modelgate/modelgate/api/annotations"
)

func TestLoaderArgs(t *testing.T) {
	m := modelSettings("gs://weights/mistral-7b", func(m *annotations.ModelSettings) { m.MountPath = "/mnt/m" })
	for name, tc := range map[string]struct {
		template, want []string
	}{
		"no template: modelgate load's flags": {want: []string{"--uri=gs://weights/mistral-7b", "--dest=/mnt/m"}},
		"template": {template: []string{"storage", "cp", "-r", "{{uri}}/*", "{{dest}}"},
			want: []string{"storage", "cp", "-r", "gs://weights/mistral-7b/*", "/mnt/m"}},
		"several in one argument": {template: []string{"{{uri}}->{{dest}}:{{uri}}"}, want: []string{"gs://weights/mistral-7b->/mnt/m:gs://weights/mistral-7b"}},
	} {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, loaderArgs(tc.template, m)); diff != "" {
				t.Errorf("loaderArgs (-want +got):\n%s", diff)
			}
		})
	}
	// What a placeholder brings in is not replaced again.
	odd := modelSettings("https://host/{{dest}}.bin")
	if got := loaderArgs([]string{"{{uri}}"}, odd); got[0] != "https://host/{{dest}}.bin" {
		t.Errorf("loaderArgs replaced inside the URI: %q", got)
	}
}

// rootContext is a security context that lets a stock image run as root.
func rootContext() *corev1.SecurityContext {
	return &corev1.SecurityContext{
		RunAsUser: ptr.To[int64](0), RunAsNonRoot: ptr.To(false), AllowPrivilegeEscalation: ptr.To(false),
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}

// A custom loader from the options: its args template replaces --uri and
// --dest, its security context the restricted default; a scheme's loader
// takes neither from the default loader.
func TestModelLoaderCustomLoader(t *testing.T) {
	const gsModel = "gs://weights/mistral-7b"
	gcloud := LoaderImage{
		Image: "google/cloud-sdk:slim", Command: []string{"gcloud"},
		Args:            []string{"storage", "cp", "--recursive", "{{uri}}/*", "{{dest}}"},
		SecurityContext: rootContext(),
	}
	cases := map[string]struct {
		model   *annotations.ModelSettings
		options func(*LoaderOptions)
		want    *corev1.Container
	}{
		"a scheme's loader with args and a security context": {
			model:   modelSettings(gsModel),
			options: func(o *LoaderOptions) { o.Schemes = map[annotations.Scheme]LoaderImage{annotations.SchemeGS: gcloud} },
			want: wantLoader(gsModel, "/models", "", func(c *corev1.Container) {
				c.Image, c.Command = "google/cloud-sdk:slim", []string{"gcloud"}
				c.Args = []string{"storage", "cp", "--recursive", gsModel + "/*", "/models"}
				c.SecurityContext = rootContext()
			}),
		},
		"a scheme's loader without them: --uri and --dest, the restricted default": {
			model: modelSettings(gsModel),
			options: func(o *LoaderOptions) {
				o.Args, o.SecurityContext = []string{"fetch", "{{uri}}"}, rootContext()
				o.Schemes = map[annotations.Scheme]LoaderImage{annotations.SchemeGS: {Image: "registry.example.com/gs-loader:1"}}
			},
			want: wantLoader(gsModel, "/models", "", func(c *corev1.Container) { c.Image, c.Command = "registry.example.com/gs-loader:1", nil }),
		},
		"the default loader's args and security context": {
			model: modelSettings(gsModel, func(m *annotations.ModelSettings) { m.MountPath = "/mnt/w" }),
			options: func(o *LoaderOptions) {
				o.Args, o.SecurityContext = []string{"load", "--from", "{{uri}}", "--into", "{{dest}}"}, rootContext()
			},
			want: wantLoader(gsModel, "/mnt/w", "", func(c *corev1.Container) {
				c.Args, c.SecurityContext = []string{"load", "--from", gsModel, "--into", "/mnt/w"}, rootContext()
			}),
		},
		"an empty security context: none": {
			model:   modelSettings(gsModel),
			options: func(o *LoaderOptions) { o.SecurityContext = &corev1.SecurityContext{} },
			want:    wantLoader(gsModel, "/models", "", func(c *corev1.Container) { c.SecurityContext = nil }),
		},
	}
	for name, tc := range cases {
		for _, kind := range targetKinds {
			t.Run(name+"/"+kind, func(t *testing.T) {
				tg, want := specTarget(kind, nil, modelInjected(0, tc.want, emptyDir("", ""), "/models", ""))
				if tc.model.MountPath != "/models" {
					want.Containers[0].VolumeMounts[len(want.Containers[0].VolumeMounts)-1].MountPath = tc.model.MountPath
				}
				opts := testOptions()
				tc.options(&opts.Loader)
				in := &Input{Operation: Create, Settings: annotations.Settings{Model: tc.model}, Options: opts}
				chain := Chain{ModelLoader{}}
				if _, err := chain.Apply(tg, in); err != nil {
					t.Fatalf("Apply: %v", err)
				}
				if diff := cmp.Diff(want, tg.PodSpec); diff != "" {
					t.Errorf("pod spec (-want +got):\n%s", diff)
				}
				applyAgain(t, chain, tg, in)
			})
		}
	}
	// The options are not changed through the containers built from them.
	opts := testOptions()
	opts.Loader.SecurityContext = rootContext()
	tg, _ := specTarget("Pod", nil, nil)
	if _, err := (Chain{ModelLoader{}}).Apply(tg, &Input{Settings: annotations.Settings{Model: modelSettings(gsModel)}, Options: opts}); err != nil {
		t.Fatal(err)
	}
	*tg.PodSpec.InitContainers[0].SecurityContext.RunAsUser = 7
	if *opts.Loader.SecurityContext.RunAsUser != 0 {
		t.Error("the loader shares its security context with the options")
	}
}
