package mutators

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/modelgate/modelgate/api/annotations"
	config "github.com/modelgate/modelgate/api/config/v1alpha1"
)

// credentialKeys sets the model's modelgate.io/model-credentials-keys
// pairs.
func credentialKeys(keys ...annotations.CredentialKey) func(*annotations.ModelSettings) {
	return func(m *annotations.ModelSettings) { m.CredentialKeys = keys }
}

// secretKeyEnv is the loader variable name taking key of secret.
func secretKeyEnv(name, secret, key string) corev1.EnvVar {
	return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: secret}, Key: key,
	}}}
}

// withLoaderEnv appends variables to the loader's env.
func withLoaderEnv(vars ...corev1.EnvVar) func(*corev1.Container) {
	return func(c *corev1.Container) { c.Env = append(c.Env, vars...) }
}

func TestModelLoaderCredentialKeys(t *testing.T) {
	cases := map[string]struct {
		model  *annotations.ModelSettings
		before func(*corev1.PodSpec)
		// container is the serving container's index.
		container  int
		wantLoader *corev1.Container
	}{
		"a Secret without keys: envFrom only": {
			model:      modelSettings(s3Llama, credentials("s3-reader")),
			wantLoader: wantLoader(s3Llama, "/models", "", envFromSecret("s3-reader")),
		},
		"one key mapped: env after the Pod UID, besides envFrom": {
			model: modelSettings(s3Llama, credentials("hf-secret"),
				credentialKeys(annotations.CredentialKey{Env: "HF_TOKEN", Key: "hf_api_token"})),
			wantLoader: wantLoader(s3Llama, "/models", "", envFromSecret("hf-secret"),
				withLoaderEnv(secretKeyEnv("HF_TOKEN", "hf-secret", "hf_api_token"))),
		},
		"a pair of S3 keys, in the order written, after the Pod UID; not for the serving containers": {
			model: modelSettings(s3Llama, credentials("minio"), credentialKeys(
				annotations.CredentialKey{Env: "AWS_SECRET_ACCESS_KEY", Key: "secretKey"},
				annotations.CredentialKey{Env: "AWS_ACCESS_KEY_ID", Key: "accessKey"})),
			before: twoContainers, container: 1,
			wantLoader: wantLoader(s3Llama, "/models", "", envFromSecret("minio"), withLoaderEnv(
				secretKeyEnv("AWS_SECRET_ACCESS_KEY", "minio", "secretKey"),
				secretKeyEnv("AWS_ACCESS_KEY_ID", "minio", "accessKey"))),
		},
	}
	for name, tc := range cases {
		for _, kind := range targetKinds {
			t.Run(name+"/"+kind, func(t *testing.T) {
				tg, want := specTarget(kind, tc.before, modelInjected(tc.container, tc.wantLoader, emptyDir("", ""), "/models", ""))
				in := &Input{Operation: Create, Settings: annotations.Settings{Model: tc.model}, Container: tc.container, Options: testOptions()}
				chain := Chain{ModelLoader{}}
				if _, err := chain.Apply(tg, in); err != nil {
					t.Fatalf("Apply: %v", err)
				}
				if diff := cmp.Diff(want, tg.PodSpec); diff != "" {
					t.Errorf("pod spec (-want +got):\n%s", diff)
				}
				if env := tg.PodSpec.InitContainers[0].Env; env[0].Name != config.LoaderPodUIDEnv {
					t.Errorf("the loader's first variable is %s, want %s", env[0].Name, config.LoaderPodUIDEnv)
				}
				for _, c := range tg.PodSpec.Containers {
					if len(c.EnvFrom) > 0 || slices.ContainsFunc(c.Env, func(v corev1.EnvVar) bool { return v.ValueFrom != nil }) {
						t.Errorf("serving container %q got credentials: envFrom %v, env %v", c.Name, c.EnvFrom, c.Env)
					}
				}
				applyAgain(t, chain, tg, in)
			})
		}
	}
}

// Keys named later (or no longer) change the recorded loader in place.
func TestModelLoaderCredentialKeysChange(t *testing.T) {
	tg, _ := specTarget("Pod", nil, nil)
	hfKey := credentialKeys(annotations.CredentialKey{Env: "HF_TOKEN", Key: "token"})
	for i, step := range []struct {
		model *annotations.ModelSettings
		want  *corev1.Container
	}{
		{modelSettings(s3Llama, credentials("s")), wantLoader(s3Llama, "/models", "", envFromSecret("s"))},
		{modelSettings(s3Llama, credentials("s"), hfKey),
			wantLoader(s3Llama, "/models", "", envFromSecret("s"), withLoaderEnv(secretKeyEnv("HF_TOKEN", "s", "token")))},
		{modelSettings(s3Llama), wantLoader(s3Llama, "/models", "")},
	} {
		in := &Input{Operation: Update, Settings: annotations.Settings{Model: step.model}, Options: testOptions()}
		if _, err := (Chain{ModelLoader{}}).Apply(tg, in); err != nil {
			t.Fatalf("step %d: Apply: %v", i, err)
		}
		if n := len(tg.PodSpec.InitContainers); n != 1 {
			t.Fatalf("step %d: %d init containers, want 1", i, n)
		}
		if diff := cmp.Diff(*step.want, tg.PodSpec.InitContainers[0]); diff != "" {
			t.Errorf("step %d: loader (-want +got):\n%s", i, diff)
		}
	}
}
