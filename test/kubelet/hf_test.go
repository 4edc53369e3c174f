package kubelet

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestResolveHF(t *testing.T) {
	const commit = "0123456789abcdef0123456789abcdef01234567"
	// The model volume on the host, as modelgate's loader lays it out.
	host := t.TempDir()
	repo := filepath.Join(host, ".cache", "huggingface", "hub", "models--acme--tiny-llm")
	mustMkdir(t, filepath.Join(repo, "snapshots", commit))
	mustWrite(t, filepath.Join(repo, "refs", "main"), commit)
	mustWrite(t, filepath.Join(repo, "refs", "newline"), commit+"\n")
	r := &Result{Volumes: map[string]string{"model-store": host}}
	want := filepath.Join(repo, "snapshots", commit)

	for name, c := range map[string]struct {
		env     []corev1.EnvVar
		repo    string
		want    string
		wantErr error
	}{
		"HF_HUB_CACHE": {
			env:  env("HF_HUB_CACHE", "/models/.cache/huggingface/hub", "HF_HUB_OFFLINE", "1"),
			repo: "acme/tiny-llm", want: want,
		},
		"HF_HOME, offline spelt TRUE": {
			env:  env("HF_HOME", "/models/.cache/huggingface", "HF_HUB_OFFLINE", "True"),
			repo: "acme/tiny-llm", want: want,
		},
		"HF_HUB_CACHE from $(VAR)": {
			env:  env("ROOT", "/models", "HF_HUB_CACHE", "$(ROOT)/.cache/huggingface/hub", "HF_HUB_OFFLINE", "1"),
			repo: "acme/tiny-llm", want: want,
		},
		"XDG_CACHE_HOME": {
			env:  env("XDG_CACHE_HOME", "/models/.cache", "HF_HUB_OFFLINE", "yes"),
			repo: "acme/tiny-llm", want: want,
		},
		"online": {
			env:  env("HF_HUB_CACHE", "/models/.cache/huggingface/hub"),
			repo: "acme/tiny-llm", wantErr: ErrHFLookup,
		},
		"no cache variable: the image's home": {
			env:  env("HF_HUB_OFFLINE", "1"),
			repo: "acme/tiny-llm", wantErr: ErrHFLookup,
		},
		"another repository": {
			env:  env("HF_HUB_CACHE", "/models/.cache/huggingface/hub", "HF_HUB_OFFLINE", "1"),
			repo: "acme/other", wantErr: ErrHFLookup,
		},
		"a cache outside the mounts": {
			env:  env("HF_HUB_CACHE", "/root/.cache/huggingface/hub", "HF_HUB_OFFLINE", "1"),
			repo: "acme/tiny-llm", wantErr: ErrNotMounted,
		},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := ResolveHF(hfPod(c.env), "server", c.repo, r)
			if c.wantErr != nil {
				if !errors.Is(err, c.wantErr) {
					t.Fatalf("got %q, %v; want %v", got, err, c.wantErr)
				}
				return
			}
			if err != nil || got != c.want {
				t.Fatalf("got %q, %v; want %q", got, err, c.want)
			}
		})
	}

	t.Run("refs/main is read as it is", func(t *testing.T) {
		mustWrite(t, filepath.Join(repo, "refs", "main"), commit+"\n")
		defer mustWrite(t, filepath.Join(repo, "refs", "main"), commit)
		_, err := ResolveHF(hfPod(env("HF_HUB_CACHE", "/models/.cache/huggingface/hub", "HF_HUB_OFFLINE", "1")), "server", "acme/tiny-llm", r)
		if !errors.Is(err, ErrHFLookup) {
			t.Fatalf("a commit with a newline: %v, want %v", err, ErrHFLookup)
		}
	})
	t.Run("the snapshot must exist", func(t *testing.T) {
		other := "fedcba9876543210fedcba9876543210fedcba98"
		mustWrite(t, filepath.Join(repo, "refs", "main"), other)
		defer mustWrite(t, filepath.Join(repo, "refs", "main"), commit)
		_, err := ResolveHF(hfPod(env("HF_HUB_CACHE", "/models/.cache/huggingface/hub", "HF_HUB_OFFLINE", "1")), "server", "acme/tiny-llm", r)
		if !errors.Is(err, ErrHFLookup) {
			t.Fatalf("a commit without a snapshot: %v, want %v", err, ErrHFLookup)
		}
	})
}

func hfPod(e []corev1.EnvVar) *corev1.Pod {
	p := testPod(corev1.Container{Name: "server", Env: e,
		VolumeMounts: []corev1.VolumeMount{{Name: "model-store", MountPath: "/models", ReadOnly: true}}})
	p.Spec.Volumes = []corev1.Volume{{Name: "model-store", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	return p
}

func env(kv ...string) []corev1.EnvVar {
	var out []corev1.EnvVar
	for i := 0; i+1 < len(kv); i += 2 {
		out = append(out, corev1.EnvVar{Name: kv[i], Value: kv[i+1]})
	}
	return out
}

func mustMkdir(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o750); err != nil {
		t.Fatal(err)
	}
}

func mustWrite(t *testing.T, name, content string) {
	t.Helper()
	mustMkdir(t, filepath.Dir(name))
	if err := os.WriteFile(name, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}
