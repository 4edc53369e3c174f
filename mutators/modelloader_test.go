package mutators

import (
	"errors"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	"github.com/modelgate/modelgate/api/annotations"
	"github.com/modelgate/modelgate/test/harnesses/builders"
)

// testLoaderImage is the default loader image of testOptions.
const testLoaderImage = "ghcr.io/modelgate/modelgate:test"

// testLoaderResources are the loader resources of testOptions.
func testLoaderResources() corev1.ResourceRequirements {
	return corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("512Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("2Gi")},
	}
}

func quantity(s string) *resource.Quantity {
	q := resource.MustParse(s)
	return &q
}

// modelSettings is the model raw (a URI the test spells right) at the
// default mount on a disk cache, as the parser defaults it, then edited.
func modelSettings(raw string, edits ...func(*annotations.ModelSettings)) *annotations.ModelSettings {
	u, err := annotations.ParseModelURI(raw)
	if err != nil {
		panic("modelSettings: " + err.Error())
	}
	m := &annotations.ModelSettings{URI: u, MountPath: annotations.DefaultModelMount, Cache: annotations.Cache{Medium: annotations.CacheDisk}}
	for _, e := range edits {
		e(m)
	}
	return m
}

func sized(s string) func(*annotations.ModelSettings) {
	return func(m *annotations.ModelSettings) { m.Size = quantity(s) }
}

func cachedIn(medium annotations.CacheMedium, claim string) func(*annotations.ModelSettings) {
	return func(m *annotations.ModelSettings) { m.Cache = annotations.Cache{Medium: medium, Claim: claim} }
}

func credentials(secret string) func(*annotations.ModelSettings) {
	return func(m *annotations.ModelSettings) { m.Credentials = secret }
}

// wantLoader is the model-loader the tests expect with testOptions: the
// default image fetching uri into dest, then edited.
func wantLoader(uri, dest, subPath string, edits ...func(*corev1.Container)) *corev1.Container {
	c := &corev1.Container{
		Name:            "model-loader",
		Image:           testLoaderImage,
		ImagePullPolicy: corev1.PullIfNotPresent,
		Command:         []string{"/modelgate", "load"},
		Args:            []string{"--uri=" + uri, "--dest=" + dest},
		Resources:       testLoaderResources(),
		VolumeMounts:    []corev1.VolumeMount{{Name: "model-store", MountPath: dest, SubPath: subPath}},
		SecurityContext: &corev1.SecurityContext{
			RunAsNonRoot:             ptr.To(true),
			AllowPrivilegeEscalation: ptr.To(false),
			ReadOnlyRootFilesystem:   ptr.To(true),
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
			SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		},
		TerminationMessagePath:   "/dev/termination-log",
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
		Env: []corev1.EnvVar{{Name: "MODELGATE_POD_UID", ValueFrom: &corev1.EnvVarSource{
			FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.uid"}}}},
	}
	for _, e := range edits {
		e(c)
	}
	return c
}

func ephemeral(size string) func(*corev1.Container) {
	return func(c *corev1.Container) {
		c.Resources.Requests[corev1.ResourceEphemeralStorage] = resource.MustParse(size)
	}
}

func envFromSecret(name string) func(*corev1.Container) {
	return func(c *corev1.Container) {
		c.EnvFrom = []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: name}}}}
	}
}

func emptyDir(medium corev1.StorageMedium, size string) corev1.Volume {
	v := corev1.Volume{Name: "model-store", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: medium}}}
	if size != "" {
		v.EmptyDir.SizeLimit = quantity(size)
	}
	return v
}

func claimVolume(claim string, readOnly bool) corev1.Volume {
	return corev1.Volume{Name: "model-store", VolumeSource: corev1.VolumeSource{
		PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim, ReadOnly: readOnly}}}
}

func imageVolumeOf(ref string, policy corev1.PullPolicy) corev1.Volume {
	return corev1.Volume{Name: "model-store", VolumeSource: corev1.VolumeSource{
		Image: &corev1.ImageVolumeSource{Reference: ref, PullPolicy: policy}}}
}

// modelInjected is what ModelLoader does to a pod spec: the loader (when
// not nil) first among the init containers, the volume last among the
// volumes, and the read-only model mount last among container i's mounts.
func modelInjected(i int, loader *corev1.Container, v corev1.Volume, mountPath, subPath string) func(*corev1.PodSpec) {
	return func(s *corev1.PodSpec) {
		if loader != nil {
			s.InitContainers = slices.Insert(s.InitContainers, 0, *loader.DeepCopy())
		}
		s.Volumes = append(s.Volumes, v)
		c := &s.Containers[i]
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "model-store", MountPath: mountPath, SubPath: subPath, ReadOnly: true})
	}
}

// withSetup gives the pod an init container of its own.
func withSetup(s *corev1.PodSpec) {
	s.InitContainers = append(s.InitContainers, corev1.Container{Name: "setup", Image: "busybox:1.36", Command: []string{"true"}})
}

// userLoader is a model-loader init container the user wrote.
var userLoader = corev1.Container{Name: "model-loader", Image: "registry.example.com/team/fetch:3",
	Args: []string{"--from=s3://team-bucket/weights"}, Env: []corev1.EnvVar{{Name: "AWS_REGION", Value: "eu-west-1"}}}

const (
	ociDigest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	// s3CacheSubPath is "models/" and the first 8 bytes of the SHA-256 of
	// "s3://models-bucket/llama-3.1-8b", in hex.
	s3CacheSubPath = "models/481d0ddb7278bcc7"
	s3Llama        = "s3://models-bucket/llama-3.1-8b"
	hfLlama        = "hf://meta-llama/Llama-3.1-8B-Instruct"
)

var (
	// owned and volumeOnly are the Record.Owns of a pass with and without
	// modelgate's loader, serving from the container "server"; hfOwned
	// adds the Hugging Face environment of an hf:// model at /models.
	owned   = []string{"initContainer/model-loader", "volume/model-store", "volumeMount/server/model-store"}
	hfOwned = []string{
		"env/server/HF_HUB_CACHE=/models/.cache/huggingface/hub", "env/server/HF_HUB_OFFLINE=1",
		"env/server/HUGGINGFACE_HUB_CACHE=/models/.cache/huggingface/hub",
		"initContainer/model-loader", "volume/model-store", "volumeMount/server/model-store",
	}
	volumeOnly  = []string{"volume/model-store", "volumeMount/server/model-store"}
	llamaLoader = wantLoader(hfLlama, "/models", "", ephemeral("20Gi"))
)

// hfInjected is modelInjected for an hf:// model that modelgate's loader
// fetches into the first container, mounted at /models: the Hugging Face
// environment goes ahead of the container's own.
func hfInjected(loader *corev1.Container, v corev1.Volume) func(*corev1.PodSpec) {
	return func(s *corev1.PodSpec) {
		modelInjected(0, loader, v, "/models", "")(s)
		c := &s.Containers[0]
		c.Env = append([]corev1.EnvVar{
			{Name: "HF_HUB_CACHE", Value: "/models/.cache/huggingface/hub"},
			{Name: "HUGGINGFACE_HUB_CACHE", Value: "/models/.cache/huggingface/hub"},
			{Name: "HF_HUB_OFFLINE", Value: "1"},
		}, c.Env...)
	}
}

// memoryFor raises the loader's memory request and limit by size, as a
// memory cache does with testLoaderResources.
func memoryFor(request, limit string) func(*corev1.Container) {
	return func(c *corev1.Container) {
		c.Resources.Requests[corev1.ResourceMemory] = resource.MustParse(request)
		c.Resources.Limits[corev1.ResourceMemory] = resource.MustParse(limit)
	}
}

func TestModelLoader(t *testing.T) {
	cases := map[string]struct {
		model     *annotations.ModelSettings
		container int                  // index of the serving container; 0 unless set
		options   func(*LoaderOptions) // edits testOptions' loader options
		// before prepares the pod spec; earlier, when set, is the model of
		// a first pass through the chain; want turns a copy of the prepared
		// spec (before the earlier pass) into the expected one (nil:
		// unchanged).
		before      func(*corev1.PodSpec)
		earlier     *annotations.ModelSettings
		want        func(*corev1.PodSpec)
		wantChanged bool
		wantOwns    []string
		// wantInvalid are the fields of the *InvalidError expected instead.
		wantInvalid []string
	}{
		"no model: unchanged": {},
		"hf model on disk: loader first, sized emptyDir, ephemeral storage, HF environment": {
			model: modelSettings(hfLlama, sized("20Gi")), before: withSetup,
			want: hfInjected(llamaLoader, emptyDir("", "20Gi")), wantChanged: true, wantOwns: hfOwned,
		},
		"s3 model on disk": {
			model:       modelSettings(s3Llama, sized("16Gi")),
			want:        modelInjected(0, wantLoader(s3Llama, "/models", "", ephemeral("16Gi")), emptyDir("", "16Gi"), "/models", ""),
			wantChanged: true, wantOwns: owned,
		},
		"gs model without a size: no size limit, no ephemeral-storage request": {
			model: modelSettings("gs://weights/mistral-7b"), before: withSetup,
			want:        modelInjected(0, wantLoader("gs://weights/mistral-7b", "/models", ""), emptyDir("", ""), "/models", ""),
			wantChanged: true, wantOwns: owned,
		},
		"https model at another mount path": {
			model: modelSettings("https://models.example.com/phi-3/model.tar", sized("8Gi"),
				func(m *annotations.ModelSettings) { m.MountPath = "/mnt/weights" }),
			want: modelInjected(0, wantLoader("https://models.example.com/phi-3/model.tar", "/mnt/weights", "", ephemeral("8Gi")),
				emptyDir("", "8Gi"), "/mnt/weights", ""),
			wantChanged: true, wantOwns: owned,
		},
		"memory cache: tmpfs emptyDir, the loader's memory request and limit raised by the size": {
			model: modelSettings(hfLlama, sized("20Gi"), cachedIn(annotations.CacheMemory, "")),
			want: hfInjected(wantLoader(hfLlama, "/models", "", memoryFor("20992Mi", "22Gi")),
				emptyDir(corev1.StorageMediumMemory, "20Gi")),
			wantChanged: true, wantOwns: hfOwned,
		},
		"memory cache without a configured memory limit: the request only": {
			model: modelSettings(s3Llama, sized("16Gi"), cachedIn(annotations.CacheMemory, "")),
			options: func(o *LoaderOptions) {
				o.Resources = corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")}}
			},
			want: modelInjected(0, wantLoader(s3Llama, "/models", "", func(c *corev1.Container) {
				c.Resources = corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("16Gi")}}
			}), emptyDir(corev1.StorageMediumMemory, "16Gi"), "/models", ""),
			wantChanged: true, wantOwns: owned,
		},
		"shared cache claim: the model's own sub path for loader and server": {
			model: modelSettings(s3Llama, sized("16Gi"), cachedIn(annotations.CachePVC, "model-cache")),
			want: modelInjected(0, wantLoader(s3Llama, "/models", s3CacheSubPath), claimVolume("model-cache", false),
				"/models", s3CacheSubPath),
			wantChanged: true, wantOwns: owned,
		},
		"left to the engine: nothing, even where the Configuration mounts images": {
			model:   modelSettings("oci://ghcr.io/org/model@"+ociDigest, func(m *annotations.ModelSettings) { m.Delivery = annotations.DeliveryEngine }),
			options: func(o *LoaderOptions) { o.ImageVolumes.All = true },
		},
		"left to the engine after a loader: the loader, volume and mount go": {
			model:   modelSettings(s3Llama, func(m *annotations.ModelSettings) { m.Delivery = annotations.DeliveryEngine }),
			earlier: modelSettings(s3Llama, sized("16Gi")), before: withSetup, wantChanged: true,
		},
		"pvc model: the claim read-only at its sub path, no loader": {
			model: modelSettings("pvc://models/llama/v3"), before: withSetup,
			want:        modelInjected(0, nil, claimVolume("models", true), "/models", "llama/v3"),
			wantChanged: true, wantOwns: volumeOnly,
		},
		"oci digest with image volumes: an image volume, no loader": {
			model:   modelSettings("oci://ghcr.io/org/model@" + ociDigest),
			options: func(o *LoaderOptions) { o.ImageVolumes.All = true },
			want:    modelInjected(0, nil, imageVolumeOf("ghcr.io/org/model@"+ociDigest, corev1.PullIfNotPresent), "/models", ""), wantChanged: true, wantOwns: volumeOnly,
		},
		"oci tag on a registry port with image volumes: pulled Always, a tag moves": {
			model:       modelSettings("oci://registry.example.com:5000/llm/qwen:2.5"),
			options:     func(o *LoaderOptions) { o.ImageVolumes.All = true },
			want:        modelInjected(0, nil, imageVolumeOf("registry.example.com:5000/llm/qwen:2.5", corev1.PullAlways), "/models", ""),
			wantChanged: true, wantOwns: volumeOnly,
		},
		"oci repository the Configuration mounts as image volumes": {
			model:       modelSettings("oci://registry.example.com/models/llama@" + ociDigest),
			options:     func(o *LoaderOptions) { o.ImageVolumes.Repositories = []string{"registry.example.com/models/*"} },
			want:        modelInjected(0, nil, imageVolumeOf("registry.example.com/models/llama@"+ociDigest, corev1.PullIfNotPresent), "/models", ""),
			wantChanged: true, wantOwns: volumeOnly,
		},
		"oci repository the Configuration mounts, but the object says loader": {
			model:       modelSettings("oci://registry.example.com/models/llama@"+ociDigest, func(m *annotations.ModelSettings) { m.Delivery = annotations.DeliveryLoader }),
			options:     func(o *LoaderOptions) { o.ImageVolumes.Repositories = []string{"registry.example.com/models/*"} },
			want:        modelInjected(0, wantLoader("oci://registry.example.com/models/llama@"+ociDigest, "/models", ""), emptyDir("", ""), "/models", ""),
			wantChanged: true, wantOwns: owned,
		},
		"model-mount image-volume on an oci model, at another path": {
			model: modelSettings("oci://ghcr.io/org/model@"+ociDigest, func(m *annotations.ModelSettings) {
				m.Delivery, m.MountPath = annotations.DeliveryImageVolume, "/mnt/model"
			}),
			want:        modelInjected(0, nil, imageVolumeOf("ghcr.io/org/model@"+ociDigest, corev1.PullIfNotPresent), "/mnt/model", ""),
			wantChanged: true, wantOwns: volumeOnly,
		},
		"oci without image volumes: the loader fetches it": {
			model:       modelSettings("oci://ghcr.io/org/model@" + ociDigest),
			want:        modelInjected(0, wantLoader("oci://ghcr.io/org/model@"+ociDigest, "/models", ""), emptyDir("", ""), "/models", ""),
			wantChanged: true, wantOwns: owned,
		},
		"credentials go to the loader only, never to a serving container": {
			model: modelSettings(s3Llama, credentials("s3-reader")), container: 1, before: twoContainers,
			want:        modelInjected(1, wantLoader(s3Llama, "/models", "", envFromSecret("s3-reader")), emptyDir("", ""), "/models", ""),
			wantChanged: true, wantOwns: []string{"initContainer/model-loader", "volume/model-store", "volumeMount/server/model-store"},
		},
		"the Configuration's environment: defaults after the Pod's UID, before the mapped credentials": {
			model: modelSettings(s3Llama, credentials("s3-reader"), func(m *annotations.ModelSettings) {
				m.CredentialKeys = []annotations.CredentialKey{{Env: "AWS_ENDPOINT_URL_S3", Key: "endpoint"}}
			}),
			options: func(o *LoaderOptions) {
				o.Env = []corev1.EnvVar{{Name: "AWS_ENDPOINT_URL_S3", Value: "http://127.0.0.1:9000"}, {Name: "AWS_REGION", Value: "us-east-1"}}
			},
			want: modelInjected(0, wantLoader(s3Llama, "/models", "", envFromSecret("s3-reader"), func(c *corev1.Container) {
				c.Env = append(c.Env,
					corev1.EnvVar{Name: "MODELGATE_DEFAULT_AWS_ENDPOINT_URL_S3", Value: "http://127.0.0.1:9000"},
					corev1.EnvVar{Name: "MODELGATE_DEFAULT_AWS_REGION", Value: "us-east-1"},
					corev1.EnvVar{Name: "AWS_ENDPOINT_URL_S3", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
						LocalObjectReference: corev1.LocalObjectReference{Name: "s3-reader"}, Key: "endpoint"}}})
			}), emptyDir("", ""), "/models", ""),
			wantChanged: true, wantOwns: owned,
		},
		"the Configuration's environment is the default loader's, not a scheme's": {
			model: modelSettings(s3Llama),
			options: func(o *LoaderOptions) {
				o.Env = []corev1.EnvVar{{Name: "AWS_REGION", Value: "us-east-1"}}
				o.Schemes = map[annotations.Scheme]LoaderImage{annotations.SchemeS3: {Image: "registry.example.com/loaders/s3:2"}}
			},
			want: modelInjected(0, wantLoader(s3Llama, "/models", "", func(c *corev1.Container) {
				c.Image, c.Command = "registry.example.com/loaders/s3:2", nil
			}), emptyDir("", ""), "/models", ""),
			wantChanged: true, wantOwns: owned,
		},
		"the scheme's loader image overrides the default": {
			model: modelSettings(s3Llama),
			options: func(o *LoaderOptions) {
				o.Schemes = map[annotations.Scheme]LoaderImage{annotations.SchemeS3: {Image: "registry.example.com/loaders/s3:2", Command: []string{"s3-fetch"}}}
				o.PullPolicy = corev1.PullAlways
			},
			want: modelInjected(0, wantLoader(s3Llama, "/models", "", func(c *corev1.Container) {
				c.Image, c.Command, c.ImagePullPolicy = "registry.example.com/loaders/s3:2", []string{"s3-fetch"}, corev1.PullAlways
			}), emptyDir("", ""), "/models", ""),
			wantChanged: true, wantOwns: owned,
		},
		"another scheme's override leaves the default": {
			model: modelSettings(hfLlama, sized("20Gi")),
			options: func(o *LoaderOptions) {
				o.Schemes = map[annotations.Scheme]LoaderImage{annotations.SchemeS3: {Image: "registry.example.com/loaders/s3:2"}}
			},
			want: hfInjected(llamaLoader, emptyDir("", "20Gi")), wantChanged: true, wantOwns: hfOwned,
		},
		"the user's model-loader is kept as written; volume and mount still wired": {
			model:  modelSettings(hfLlama, sized("20Gi")),
			before: func(s *corev1.PodSpec) { s.InitContainers = append(s.InitContainers, *userLoader.DeepCopy()) },
			want:   modelInjected(0, nil, emptyDir("", "20Gi"), "/models", ""), wantChanged: true, wantOwns: volumeOnly,
		},
		"a new model replaces the recorded loader in place": {
			model: modelSettings(hfLlama, sized("20Gi")), earlier: modelSettings("hf://org/old-model", sized("4Gi")), before: withSetup,
			want: hfInjected(llamaLoader, emptyDir("", "20Gi")), wantChanged: true, wantOwns: hfOwned,
		},
		"a pvc model after an hf one removes the recorded loader": {
			model: modelSettings("pvc://models/llama/v3"), earlier: modelSettings(hfLlama, sized("20Gi")), before: withSetup,
			want:        modelInjected(0, nil, claimVolume("models", true), "/models", "llama/v3"),
			wantChanged: true, wantOwns: volumeOnly,
		},
		"the model removed: what modelgate created goes": {
			earlier: modelSettings(hfLlama, sized("20Gi")), before: withSetup, wantChanged: true,
		},
		"the model removed: every mount of modelgate's volume goes, the user's loader stays": {
			earlier: modelSettings(hfLlama, sized("20Gi")), container: 1,
			before: func(s *corev1.PodSpec) {
				twoContainers(s)
				s.InitContainers = append(s.InitContainers, *userLoader.DeepCopy())
				// The user's loader and proxy use modelgate's volume too.
				for _, c := range []*corev1.Container{&s.InitContainers[0], &s.Containers[0]} {
					c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "model-store", MountPath: "/data"})
				}
			},
			want: func(s *corev1.PodSpec) {
				s.InitContainers[0].VolumeMounts = nil
				s.Containers[0].VolumeMounts = nil
			},
			wantChanged: true,
		},
		"the user's model-store volume is a name clash": {
			model: modelSettings(hfLlama),
			before: func(s *corev1.PodSpec) {
				s.Volumes = append(s.Volumes, corev1.Volume{Name: "model-store", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
			},
			wantInvalid: []string{"<spec>.volumes[model-store].name"},
		},
		"another mount at the model mount path is a clash": {
			model: modelSettings(hfLlama),
			before: func(s *corev1.PodSpec) {
				s.Volumes = append(s.Volumes, corev1.Volume{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
				s.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "scratch", MountPath: "/models"}}
			},
			// The user's own mount: they never set modelgate.io/model-mount.
			wantInvalid: []string{"<spec>.containers[0].volumeMounts[0].mountPath"},
		},
	}
	for name, tc := range cases {
		for _, kind := range targetKinds {
			t.Run(name+"/"+kind, func(t *testing.T) {
				tg, want := specTarget(kind, tc.before, tc.want)
				opts := testOptions()
				if tc.options != nil {
					tc.options(&opts.Loader)
				}
				input := func(m *annotations.ModelSettings) *Input {
					return &Input{Operation: Create, Settings: annotations.Settings{Model: m}, Container: tc.container, Options: opts}
				}
				chain := Chain{ModelLoader{}}
				if tc.earlier != nil {
					if _, err := chain.Apply(tg, input(tc.earlier)); err != nil {
						t.Fatalf("earlier Apply: %v", err)
					}
				}

				res, err := chain.Apply(tg, input(tc.model))
				if tc.wantInvalid != nil {
					var ie *InvalidError
					if !errors.As(err, &ie) {
						t.Fatalf("Apply error = %v, want an *InvalidError", err)
					}
					var fields []string
					for _, e := range ie.Errs {
						fields = append(fields, strings.Replace(e.Field, tg.specPath().String(), "<spec>", 1))
					}
					if diff := cmp.Diff(tc.wantInvalid, fields); diff != "" {
						t.Errorf("invalid fields (-want +got):\n%s", diff)
					}
					return
				}
				if err != nil {
					t.Fatalf("Apply: %v", err)
				}
				if changed := slices.Contains(res.Changed, ModelLoaderName); changed != tc.wantChanged {
					t.Errorf("changed = %v, want %v", changed, tc.wantChanged)
				}
				if diff := cmp.Diff(want, tg.PodSpec); diff != "" {
					t.Errorf("pod spec (-want +got):\n%s", diff)
				}
				if diff := cmp.Diff(tc.wantOwns, res.Record.Owns); diff != "" {
					t.Errorf("Record.Owns (-want +got):\n%s", diff)
				}
				for _, c := range tg.PodSpec.Containers {
					if len(c.EnvFrom) > 0 {
						t.Errorf("container %q got envFrom %v: credentials are the loader's only", c.Name, c.EnvFrom)
					}
				}

				applyAgain(t, chain, tg, input(tc.model))
			})
		}
	}
}

// Two models sharing a cache claim never share a directory.
func TestModelLoaderCacheSubPaths(t *testing.T) {
	subPathRE := regexp.MustCompile(`^models/[0-9a-f]{16}$`)
	seen := map[string]string{}
	for _, raw := range []string{s3Llama, s3Llama + "-instruct", hfLlama, hfLlama + "@main", "gs://models-bucket/llama-3.1-8b"} {
		tg := newTarget("Pod", builders.Options{})
		in := &Input{Settings: annotations.Settings{Model: modelSettings(raw, cachedIn(annotations.CachePVC, "model-cache"))}, Options: testOptions()}
		if _, err := (ModelLoader{}).Mutate(tg, in); err != nil {
			t.Fatalf("%s: Mutate: %v", raw, err)
		}
		got := tg.PodSpec.Containers[0].VolumeMounts[0].SubPath
		if !subPathRE.MatchString(got) {
			t.Errorf("%s: sub path %q, want models/<16 hex digits>", raw, got)
		}
		if loader := tg.PodSpec.InitContainers[0].VolumeMounts[0].SubPath; loader != got {
			t.Errorf("%s: loader sub path %q, server's %q", raw, loader, got)
		}
		if other, dup := seen[got]; dup {
			t.Errorf("%s and %s share the sub path %s", raw, other, got)
		}
		seen[got] = raw
	}
}

// A model removed and named again (another one) updates what modelgate
// created on the first pass: the volume is not taken for the user's.
func TestModelLoaderModelRemovedAndRenamed(t *testing.T) {
	for _, kind := range targetKinds {
		t.Run(kind, func(t *testing.T) {
			tg := newTarget(kind, builders.Options{})
			want := tg.PodSpec.DeepCopy()
			modelInjected(0, wantLoader(s3Llama, "/models", "", ephemeral("16Gi")), emptyDir("", "16Gi"), "/models", "")(want)
			for i, m := range []*annotations.ModelSettings{modelSettings(hfLlama, sized("20Gi")), nil, modelSettings(s3Llama, sized("16Gi"))} {
				in := &Input{Settings: annotations.Settings{Model: m}, Options: testOptions()}
				if _, err := (Chain{ModelLoader{}}).Apply(tg, in); err != nil {
					t.Fatalf("pass %d: Apply: %v", i+1, err)
				}
			}
			if diff := cmp.Diff(want, tg.PodSpec); diff != "" {
				t.Errorf("pod spec (-want +got):\n%s", diff)
			}
		})
	}
}

// Opting out (Chain.Revert) removes exactly what ModelLoader added, for
// each kind of model and cache: the pod spec is the user's again.
func TestModelLoaderOptOut(t *testing.T) {
	cases := map[string]struct {
		model  *annotations.ModelSettings
		before func(*corev1.PodSpec)
	}{
		"hf on disk":                   {model: modelSettings(hfLlama, sized("20Gi")), before: withSetup},
		"hf in memory, the user's env": {model: modelSettings(hfLlama, sized("20Gi"), cachedIn(annotations.CacheMemory, "")), before: withEnv(userFoo)},
		"s3 in memory":                 {model: modelSettings(s3Llama, sized("16Gi"), cachedIn(annotations.CacheMemory, ""))},
		"a shared cache claim":         {model: modelSettings(hfLlama, cachedIn(annotations.CachePVC, "model-cache"))},
		"a pvc model":                  {model: modelSettings("pvc://models/llama/v3"), before: withSetup},
	}
	for name, tc := range cases {
		for _, kind := range targetKinds {
			t.Run(name+"/"+kind, func(t *testing.T) {
				tg, want := specTarget(kind, tc.before, nil)
				in := &Input{Operation: Update, Settings: annotations.Settings{Model: tc.model}, Container: 0, Options: testOptions()}
				res, err := (Chain{ModelLoader{}}).Apply(tg, in)
				if err != nil || len(res.Changed) == 0 {
					t.Fatalf("Apply changed %v, err %v; want an injection", res.Changed, err)
				}
				changed, err := (Chain{ModelLoader{}}).Revert(tg, &Input{Operation: Update, Options: testOptions()})
				if err != nil || len(changed) == 0 {
					t.Fatalf("Revert changed %v, err %v; want the injection taken out", changed, err)
				}
				if diff := cmp.Diff(want, tg.PodSpec); diff != "" {
					t.Errorf("pod spec after opting out (-before injection +after):\n%s", diff)
				}
			})
		}
	}
}
