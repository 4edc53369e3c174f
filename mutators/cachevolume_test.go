package mutators

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	"github.com/modelgate/modelgate/api/annotations"
	"github.com/modelgate/modelgate/test/harnesses/builders"
)

const tgi70B = "hf://meta-llama/Llama-3.3-70B-Instruct"

// parsed is what the webhook makes of an object's own annotations.
func parsed(t *testing.T, annos map[string]string) annotations.Settings {
	t.Helper()
	s, errs := annotations.Parse(annotations.Source{Path: field.NewPath("metadata", "annotations"), Annotations: annos})
	if len(errs) > 0 {
		t.Fatalf("Parse: %v", errs)
	}
	return s
}

// tgiWithCache is a TGI server shaped like the published 70B manifests: a
// PVC mounted at /data, TGI's cache directory.
func tgiWithCache(kind string) *Target {
	tg := newTarget(kind, builders.Options{})
	s := tg.PodSpec
	s.Volumes = []corev1.Volume{
		{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "llama-70b-cache"}}},
		{Name: "shm", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}}},
	}
	s.Containers = []corev1.Container{{
		Name: "tgi", Image: "ghcr.io/huggingface/text-generation-inference:3.0",
		Args: []string{"--model-id", "meta-llama/Llama-3.3-70B-Instruct", "--num-shard", "8"},
		Env:  []corev1.EnvVar{{Name: "PORT", Value: "8080"}},
		VolumeMounts: []corev1.VolumeMount{
			{Name: "data", MountPath: "/data"},
			{Name: "shm", MountPath: "/dev/shm"},
		},
	}}
	return tg
}

func applyModel(t *testing.T, tg *Target, s annotations.Settings) (Result, *Input, error) {
	t.Helper()
	idx, ferr := ResolveContainer(tg.PodSpec, s, gpuResource, field.NewPath("metadata", "annotations"))
	if ferr != nil {
		t.Fatalf("ResolveContainer: %v", ferr)
	}
	in := &Input{Settings: s, Container: idx, Options: testOptions()}
	res, err := injectionChain.Apply(tg, in)
	return res, in, err
}

// A model cache the serving container already mounts is filled in place
// with model-cache volume:<name>, and its absence is warned about.
func TestModelCacheVolume(t *testing.T) {
	annos := map[string]string{annotations.Model: tgi70B, annotations.ModelSize: "150Gi", annotations.Engine: "tgi"}

	t.Run("disk cache beside the pod's own cache: warned", func(t *testing.T) {
		tg := tgiWithCache("Pod")
		_, in, err := applyModel(t, tg, parsed(t, annos))
		if err != nil {
			t.Fatalf("Apply: %v", err)
		}
		want := `container "tgi" already mounts volume "data" at /data as its model cache (TGI's cache directory); ` +
			`modelgate loads a second copy of the model into a disk volume of its own at /models: ` +
			`set modelgate.io/model-cache: "volume:data" to load the model into that volume instead`
		if got := Warnings(tg, in); !slices.Contains(got, want) {
			t.Errorf("warnings %q\nwant among them %q", got, want)
		}
	})

	t.Run("a cache the pod only reads: warned that it goes unused", func(t *testing.T) {
		tg := tgiWithCache("Pod")
		tg.PodSpec.Containers[0].VolumeMounts[0].ReadOnly = true
		_, in, err := applyModel(t, tg, parsed(t, annos))
		if err != nil {
			t.Fatalf("Apply: %v", err)
		}
		want := `container "tgi" mounts volume "data" read-only at /data as its model cache (TGI's cache directory); ` +
			`modelgate loads the model again into a disk volume of its own at /models and points the engine there, so that ` +
			`cache goes unused: if it holds the model, serve the model from it without modelgate.io/model`
		if got := Warnings(tg, in); !slices.Contains(got, want) {
			t.Errorf("warnings %q\nwant among them %q", got, want)
		}
	})

	for _, kind := range targetKinds {
		t.Run("volume cache/"+kind, func(t *testing.T) {
			tg := tgiWithCache(kind)
			before := tg.PodSpec.DeepCopy()
			a := map[string]string{annotations.ModelCache: "volume:data"}
			for k, v := range annos {
				a[k] = v
			}
			s := parsed(t, a)
			res, in, err := applyModel(t, tg, s)
			if err != nil {
				t.Fatalf("Apply: %v", err)
			}
			spec := tg.PodSpec
			if diff := cmp.Diff(before.Volumes, spec.Volumes); diff != "" {
				t.Errorf("volumes changed (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(before.Containers[0].VolumeMounts, spec.Containers[0].VolumeMounts); diff != "" {
				t.Errorf("the serving container's mounts changed (-want +got):\n%s", diff)
			}
			loader := wantLoader(tgi70B, "/data", "")
			loader.VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
			if diff := cmp.Diff([]corev1.Container{*loader}, spec.InitContainers); diff != "" {
				t.Errorf("init containers (-want +got):\n%s", diff)
			}
			wantEnv := []corev1.EnvVar{
				{Name: EnvHFHubCache, Value: "/data/.cache/huggingface/hub"}, {Name: EnvHuggingFaceHubCache, Value: "/data/.cache/huggingface/hub"},
				{Name: EnvHFHubOffline, Value: "1"},
				{Name: "PORT", Value: "8080"},
			}
			if diff := cmp.Diff(wantEnv, spec.Containers[0].Env); diff != "" {
				t.Errorf("serving env (-want +got):\n%s", diff)
			}
			if p := spec.Containers[0].StartupProbe; p == nil || p.HTTPGet.Port.IntVal != 8080 {
				t.Errorf("startup probe %v, want one on PORT 8080", p)
			}
			for _, p := range res.Record.Owns {
				if strings.HasPrefix(p, partVolume+"/") || strings.HasPrefix(p, partVolumeMount+"/") {
					t.Errorf("record owns %q: the volume and its mount are the user's", p)
				}
			}
			warnings := Warnings(tg, in)
			for _, w := range warnings {
				if strings.Contains(w, "second copy") {
					t.Errorf("warned about a second copy: %q", w)
				}
			}
			wantOwner := `volume "data" (modelgate.io/model-cache: "volume:data") keeps its files' owners and the pod sets no fsGroup: ` +
				`the loader runs as a non-root user (65532 in modelgate's image) and cannot write into a claim whose directory is root's ` +
				`(a new claim's, or one a root engine filled); ` +
				`set spec.securityContext.fsGroup (65532), or make the volume group-writable`
			if !slices.Contains(warnings, wantOwner) {
				t.Errorf("warnings %q\nwant among them %q", warnings, wantOwner)
			}
			tg.PodSpec.SecurityContext = &corev1.PodSecurityContext{FSGroup: ptr.To[int64](65532)}
			if slices.Contains(Warnings(tg, in), wantOwner) {
				t.Error("warned about the owner with an fsGroup set")
			}
			tg.PodSpec.SecurityContext = nil
			applyAgain(t, injectionChain, tg, in)
			if _, err := injectionChain.Revert(tg, &Input{Options: testOptions()}); err != nil {
				t.Fatalf("Revert: %v", err)
			}
			if diff := cmp.Diff(before, spec); diff != "" {
				t.Errorf("opt-out did not restore the user's spec (-want +got):\n%s", diff)
			}
		})
	}

	t.Run("a shared cache claim without fsGroup: warned; with fsGroup or on an emptyDir: not", func(t *testing.T) {
		want := `claim "shared" (modelgate.io/model-cache: "pvc:shared") keeps its files' owners and the pod sets no fsGroup: ` +
			`the loader runs as a non-root user (65532 in modelgate's image) and cannot write into a claim whose directory is root's ` +
			`(a new claim's, or one a root engine filled); set spec.securityContext.fsGroup (65532), or make the volume group-writable`
		a := map[string]string{annotations.ModelCache: "pvc:shared"}
		for k, v := range annos {
			a[k] = v
		}
		tg := tgiWithCache("CronJob")
		_, in, err := applyModel(t, tg, parsed(t, a))
		if err != nil {
			t.Fatalf("Apply: %v", err)
		}
		if got := Warnings(tg, in); !slices.Contains(got, want) {
			t.Errorf("warnings %q\nwant among them %q", got, want)
		}
		tg.PodSpec.SecurityContext = &corev1.PodSecurityContext{FSGroup: ptr.To[int64](65532)}
		if got := Warnings(tg, in); slices.ContainsFunc(got, func(w string) bool { return strings.Contains(w, "fsGroup") }) {
			t.Errorf("warned about the owner with an fsGroup set: %q", got)
		}
		disk := tgiWithCache("Pod")
		_, in, err = applyModel(t, disk, parsed(t, annos))
		if err != nil {
			t.Fatalf("Apply: %v", err)
		}
		if got := Warnings(disk, in); slices.ContainsFunc(got, func(w string) bool { return strings.Contains(w, "fsGroup") }) {
			t.Errorf("warned about the owner of modelgate's emptyDir: %q", got)
		}
	})

	t.Run("a directory under the mount", func(t *testing.T) {
		tg := tgiWithCache("Pod")
		s := parsed(t, map[string]string{annotations.Model: tgi70B, annotations.ModelCache: "volume:data", annotations.ModelMount: "/data/llama-70b"})
		if _, _, err := applyModel(t, tg, s); err != nil {
			t.Fatalf("Apply: %v", err)
		}
		l := tg.PodSpec.InitContainers[0]
		if !slices.Contains(l.Args, "--dest=/data/llama-70b") || l.VolumeMounts[0].MountPath != "/data" {
			t.Errorf("loader args %v, mounts %v: want --dest=/data/llama-70b with the volume at /data", l.Args, l.VolumeMounts)
		}
	})

	t.Run("switching from disk to the pod's volume takes modelgate's volume out", func(t *testing.T) {
		tg := tgiWithCache("Pod")
		before := tg.PodSpec.DeepCopy()
		if _, _, err := applyModel(t, tg, parsed(t, map[string]string{annotations.Model: tgi70B})); err != nil {
			t.Fatalf("Apply: %v", err)
		}
		if _, _, err := applyModel(t, tg, parsed(t, map[string]string{annotations.Model: tgi70B, annotations.ModelCache: "volume:data"})); err != nil {
			t.Fatalf("second Apply: %v", err)
		}
		if diff := cmp.Diff(before.Volumes, tg.PodSpec.Volumes); diff != "" {
			t.Errorf("volumes (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(before.Containers[0].VolumeMounts, tg.PodSpec.Containers[0].VolumeMounts); diff != "" {
			t.Errorf("mounts (-want +got):\n%s", diff)
		}
	})

	errCases := map[string]struct {
		annos  map[string]string
		edit   func(*corev1.PodSpec)
		field  string
		detail string
	}{
		"no such volume": {
			annos: map[string]string{annotations.ModelCache: "volume:cache"},
			field: "metadata.annotations[modelgate.io/model-cache]", detail: `the pod has no volume "cache" (volumes: data, shm)`,
		},
		"a volume the serving container does not mount": {
			annos: map[string]string{annotations.ModelCache: "volume:data"},
			edit:  func(s *corev1.PodSpec) { s.Containers[0].VolumeMounts = s.Containers[0].VolumeMounts[1:] },
			field: "metadata.annotations[modelgate.io/model-cache]",
			detail: `container "tgi", which serves the model, does not mount volume "data"; ` +
				`mount it where the engine reads its models`,
		},
		"a read-only claim": {
			annos:  map[string]string{annotations.ModelCache: "volume:data"},
			edit:   func(s *corev1.PodSpec) { s.Volumes[0].PersistentVolumeClaim.ReadOnly = true },
			field:  "metadata.annotations[modelgate.io/model-cache]",
			detail: `volume "data" is a read-only persistentVolumeClaim, which the loader cannot write the model into`,
		},
		"a model mount outside the volume": {
			annos: map[string]string{annotations.ModelCache: "volume:data", annotations.ModelMount: "/models"},
			field: "metadata.annotations[modelgate.io/model-mount]",
			detail: `is not under /data, where container "tgi" mounts volume "data" (modelgate.io/model-cache: "volume:data"); ` +
				`set it to /data or a directory under it`,
		},
		// Issue 14, item 9: the clash is reported on what the user wrote.
		"the default mount path taken by the user's own volume": {
			edit:  func(s *corev1.PodSpec) { s.Containers[0].VolumeMounts[0].MountPath = "/models" },
			field: "spec.containers[0].volumeMounts[0].mountPath",
			detail: `container "tgi" mounts volume "data" at /models, where modelgate mounts the model by default; ` +
				`set modelgate.io/model-mount to another path, or modelgate.io/model-cache: "volume:data" to load the model into that volume`,
		},
		"a model mount the user set taken by their own volume": {
			annos: map[string]string{annotations.ModelMount: "/data"},
			field: "metadata.annotations[modelgate.io/model-mount]",
			detail: `container "tgi" already mounts volume "data" at /data; set modelgate.io/model-mount to another path, ` +
				`or modelgate.io/model-cache: "volume:data" to load the model into that volume`,
		},
	}
	for name, tc := range errCases {
		t.Run(name, func(t *testing.T) {
			tg := tgiWithCache("Pod")
			if tc.edit != nil {
				tc.edit(tg.PodSpec)
			}
			a := map[string]string{annotations.Model: tgi70B}
			for k, v := range tc.annos {
				a[k] = v
			}
			_, _, err := applyModel(t, tg, parsed(t, a))
			ie, ok := errors.AsType[*InvalidError](err)
			if !ok || len(ie.Errs) != 1 {
				t.Fatalf("Apply: %v, want one invalid field", err)
			}
			if got := ie.Errs[0]; got.Field != tc.field || got.Detail != tc.detail {
				t.Errorf("got %s: %s\nwant %s: %s", got.Field, got.Detail, tc.field, tc.detail)
			}
		})
	}
}

// The loader starts after the native sidecars the pod starts first (a
// mesh proxy, gcsfuse) and before every ordinary init container.
func TestModelLoaderOrder(t *testing.T) {
	always := ptr.To(corev1.ContainerRestartPolicyAlways)
	proxy := corev1.Container{Name: "istio-proxy", Image: "istio/proxyv2:1.24", RestartPolicy: always}
	fuse := corev1.Container{Name: "gke-gcsfuse-sidecar", Image: "gke.gcr.io/gcs-fuse-csi-driver-sidecar-mounter:v1", RestartPolicy: always}
	tokenizer := corev1.Container{Name: "fetch-tokenizer", Image: "busybox:1.36"}
	late := corev1.Container{Name: "late-sidecar", Image: "registry.example.com/log-shipper:1", RestartPolicy: always}
	names := func(cs []corev1.Container) []string {
		out := make([]string, len(cs))
		for i, c := range cs {
			out[i] = c.Name
		}
		return out
	}
	s := parsed(t, map[string]string{annotations.Model: hfLlama})

	for name, tc := range map[string]struct {
		init []corev1.Container
		want []string
	}{
		"no init containers":          {want: []string{"model-loader"}},
		"ordinary init containers":    {init: []corev1.Container{tokenizer}, want: []string{"model-loader", "fetch-tokenizer"}},
		"sidecars first, then others": {init: []corev1.Container{proxy, fuse, tokenizer, late}, want: []string{"istio-proxy", "gke-gcsfuse-sidecar", "model-loader", "fetch-tokenizer", "late-sidecar"}},
		"only sidecars":               {init: []corev1.Container{proxy}, want: []string{"istio-proxy", "model-loader"}},
	} {
		t.Run(name, func(t *testing.T) {
			tg := newTarget("Pod", builders.Options{})
			tg.PodSpec.InitContainers = slices.Clone(tc.init)
			_, in, err := applyModel(t, tg, s)
			if err != nil {
				t.Fatalf("Apply: %v", err)
			}
			if diff := cmp.Diff(tc.want, names(tg.PodSpec.InitContainers)); diff != "" {
				t.Errorf("init containers (-want +got):\n%s", diff)
			}
			applyAgain(t, injectionChain, tg, in)
		})
	}

	// An object injected before the loader followed the sidecars gets its
	// loader moved on the next pass, and only once.
	t.Run("a loader of an earlier release ahead of the sidecars moves", func(t *testing.T) {
		tg := newTarget("Pod", builders.Options{})
		tg.PodSpec.InitContainers = []corev1.Container{proxy, tokenizer}
		if _, _, err := applyModel(t, tg, s); err != nil {
			t.Fatalf("Apply: %v", err)
		}
		ic := tg.PodSpec.InitContainers
		ic[0], ic[1] = ic[1], ic[0] // [model-loader, istio-proxy, fetch-tokenizer]
		if res, _, err := applyModel(t, tg, s); err != nil || !slices.Contains(res.Changed, ModelLoaderName) {
			t.Fatalf("pass changed %v (error %v), want %s", res.Changed, err, ModelLoaderName)
		}
		if diff := cmp.Diff([]string{"istio-proxy", "model-loader", "fetch-tokenizer"}, names(tg.PodSpec.InitContainers)); diff != "" {
			t.Errorf("init containers (-want +got):\n%s", diff)
		}
		if res, _, err := applyModel(t, tg, s); err != nil || len(res.Changed) > 0 {
			t.Errorf("third pass changed %v (error %v)", res.Changed, err)
		}
	})
}
