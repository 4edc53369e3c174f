package mutators

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/modelgate/modelgate/api/annotations"
	"github.com/modelgate/modelgate/test/harnesses/builders"
)

// A Hub model asked as an image volume mounts the image `modelgate pack`
// pushed to the hub mirror, with the Hub cache environment the loader's
// layout gets, and no loader, ephemeral storage or second copy.
func TestImageVolumeHubModel(t *testing.T) {
	const rev = "0e9e39f249a16976918f6564b8830bc894c89659"
	mountPath := field.NewPath("metadata", "annotations").Key(annotations.ModelMount)
	cases := map[string]struct {
		uri, mirror string
		want        *corev1.ImageVolumeSource
		wantErr     string
	}{
		"a commit: pulled if not present": {
			uri: "hf://meta-llama/Llama-3.1-8B-Instruct@" + rev, mirror: "registry.example.com/hf",
			want: &corev1.ImageVolumeSource{Reference: "registry.example.com/hf/meta-llama/llama-3.1-8b-instruct:" + rev, PullPolicy: corev1.PullIfNotPresent},
		},
		"no revision: main, pulled Always": {
			uri: "hf://Qwen/Qwen2.5-0.5B", mirror: "registry.example.com/hf/",
			want: &corev1.ImageVolumeSource{Reference: "registry.example.com/hf/qwen/qwen2.5-0.5b:main", PullPolicy: corev1.PullAlways},
		},
		"no mirror": {uri: "hf://Qwen/Qwen2.5-0.5B", wantErr: "injection.imageVolumes.hubMirror, which is not set"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tg := newTarget("Pod", builders.Options{})
			before := tg.PodSpec.DeepCopy()
			opts := testOptions()
			opts.Loader.ImageVolumes.HubMirror = tc.mirror
			m := modelSettings(tc.uri, sized("20Gi"), func(m *annotations.ModelSettings) { m.Delivery = annotations.DeliveryImageVolume })
			s := explicit(annotations.Settings{Model: m})
			s.Origins[annotations.ModelMount] = annotations.Origin{Path: mountPath}
			_, err := ModelLoader{}.Mutate(tg, &Input{Settings: s, Options: opts})
			if tc.wantErr != "" {
				var ie *InvalidError
				if !errors.As(err, &ie) || ie.Errs[0].Field != mountPath.String() || !strings.Contains(ie.Errs[0].Detail, tc.wantErr) {
					t.Fatalf("err = %v, want an invalid %s saying %q", err, mountPath, tc.wantErr)
				}
				if diff := cmp.Diff(before, tg.PodSpec); diff != "" {
					t.Errorf("a refused pod was changed (-before +after):\n%s", diff)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			spec := tg.PodSpec
			if len(spec.InitContainers) != 0 || len(spec.Volumes) != 1 {
				t.Fatalf("init containers %v, volumes %v: want no loader and one volume", spec.InitContainers, spec.Volumes)
			}
			if diff := cmp.Diff(tc.want, spec.Volumes[0].Image); diff != "" {
				t.Errorf("image volume (-want +got):\n%s", diff)
			}
			c := spec.Containers[0]
			if diff := cmp.Diff([]corev1.EnvVar{{Name: EnvHFHubCache, Value: "/models/.cache/huggingface/hub"},
				{Name: EnvHuggingFaceHubCache, Value: "/models/.cache/huggingface/hub"}, {Name: EnvHFHubOffline, Value: "1"}}, c.Env); diff != "" {
				t.Errorf("serving env (-want +got):\n%s", diff)
			}
			if _, ok := c.Resources.Requests[corev1.ResourceEphemeralStorage]; ok {
				t.Error("the serving container asks for ephemeral storage for a model it does not copy")
			}
		})
	}
}
