package kubelet

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

func TestTranslateArg(t *testing.T) {
	mounts := []Mount{{Path: "/models"}, {Path: "/models/.cache", Host: "/h/cache"}, {Path: "/data", Host: "/h/data"}}
	mounts[0].Host = "/h/models"
	sortMounts(mounts)
	for name, c := range map[string]struct{ in, want string }{
		"the mount path":               {"/models", "/h/models"},
		"under it":                     {"/models/config.json", "/h/models/config.json"},
		"a nested mount wins":          {"/models/.cache/hub", "/h/cache/hub"},
		"a flag's value":               {"--dest=/models", "--dest=/h/models"},
		"a short flag's value":         {"-d=/data/x", "-d=/h/data/x"},
		"a sibling is not under it":    {"/models2", "/models2"},
		"a sibling flag value":         {"--dest=/models2/x", "--dest=/models2/x"},
		"a relative path is not":       {"models/x", "models/x"},
		"not a flag: the whole arg":    {"dest=/models", "dest=/models"},
		"a flag without a path":        {"--uri=s3://models/x", "--uri=s3://models/x"},
		"a path under no mount":        {"/dev/termination-log", "/dev/termination-log"},
		"a mount path as a substring":  {"/x/models", "/x/models"},
		"only the first '=' separates": {"--opt=a=/models", "--opt=a=/models"},
	} {
		t.Run(name, func(t *testing.T) {
			if got := translateArg(c.in, mounts); got != c.want {
				t.Errorf("translateArg(%q) = %q, want %q", c.in, got, c.want)
			}
		})
	}
}

func TestEnvStringsTranslate(t *testing.T) {
	mounts := []Mount{{Path: "/models", Host: "/h/m"}}
	got := envStrings([]envVar{{"HF_HUB_CACHE", "/models/.cache/huggingface/hub"}, {"URL", "http://x/models"}, {"FLAG", "--dest=/models"}}, mounts)
	// Environment values are translated when they are paths, not flags.
	want := []string{"HF_HUB_CACHE=/h/m/.cache/huggingface/hub", "URL=http://x/models", "FLAG=--dest=/models"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("environment (-want +got):\n%s", diff)
	}
}

func volumePod(uid types.UID, vols []corev1.Volume, mounts ...corev1.VolumeMount) *corev1.Pod {
	p := testPod(corev1.Container{Name: "c", VolumeMounts: mounts})
	p.UID = uid
	p.Spec.Volumes = vols
	return p
}

func TestVolumeDirs(t *testing.T) {
	vols := []corev1.Volume{
		{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		{Name: "cache", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "shared"}}},
		{Name: "ca", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "ca"}}}},
		{Name: "host", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/etc"}}},
	}
	a := volumeDirs("/d", volumePod("uid-a", vols))
	b := volumeDirs("/d", volumePod("uid-b", vols))
	want := map[string]string{
		"scratch": "/d/pods/uid-a/volumes/kubernetes.io~empty-dir/scratch",
		"cache":   "/d/claims/team/shared",
		"ca":      "/d/pods/uid-a/volumes/kubernetes.io~configmap/ca",
	}
	if diff := cmp.Diff(want, a.host); diff != "" {
		t.Errorf("volumes of pod a (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]string{"host": "hostPath"}, a.unsupported); diff != "" {
		t.Errorf("unsupported volumes (-want +got):\n%s", diff)
	}
	if a.host["cache"] != b.host["cache"] {
		t.Errorf("two pods on one claim have different directories: %s and %s", a.host["cache"], b.host["cache"])
	}
	if a.host["scratch"] == b.host["scratch"] {
		t.Errorf("two pods share the emptyDir %s", a.host["scratch"])
	}
}

func TestContainerMounts(t *testing.T) {
	vols := podVolumes{
		host:        map[string]string{"store": "/h/store", "cache": "/h/claim"},
		unsupported: map[string]string{"host": "hostPath"},
	}
	env := []envVar{{"POD", "llm-0"}}
	for name, c := range map[string]struct {
		mounts  []corev1.VolumeMount
		want    []Mount
		wantErr bool
	}{
		"longest mount path first, cleaned, readOnly kept": {
			mounts: []corev1.VolumeMount{
				{Name: "store", MountPath: "/models/"},
				{Name: "cache", MountPath: "/models/.cache", ReadOnly: true},
			},
			want: []Mount{{Path: "/models/.cache", Host: "/h/claim", ReadOnly: true}, {Path: "/models", Host: "/h/store"}},
		},
		"subPath": {
			mounts: []corev1.VolumeMount{{Name: "cache", MountPath: "/models", SubPath: "models/0123abcd"}},
			want:   []Mount{{Path: "/models", Host: "/h/claim/models/0123abcd"}},
		},
		"subPathExpr": {
			mounts: []corev1.VolumeMount{{Name: "cache", MountPath: "/logs", SubPathExpr: "logs/$(POD)"}},
			want:   []Mount{{Path: "/logs", Host: "/h/claim/logs/llm-0"}},
		},
		"a sub path that climbs out": {
			mounts:  []corev1.VolumeMount{{Name: "cache", MountPath: "/models", SubPath: "a/../../etc"}},
			wantErr: true,
		},
		"an unsupported volume": {
			mounts:  []corev1.VolumeMount{{Name: "host", MountPath: "/etc/host"}},
			wantErr: true,
		},
		"a volume the pod lacks": {
			mounts:  []corev1.VolumeMount{{Name: "absent", MountPath: "/x"}},
			wantErr: true,
		},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := containerMounts(&corev1.Container{VolumeMounts: c.mounts}, vols, env)
			if (err != nil) != c.wantErr {
				t.Fatalf("error %v, want error: %t", err, c.wantErr)
			}
			if diff := cmp.Diff(c.want, got); diff != "" {
				t.Errorf("mounts (-want +got):\n%s", diff)
			}
		})
	}
}

func TestHostPath(t *testing.T) {
	pod := volumePod("uid-a", []corev1.Volume{
		{Name: "store", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "shared"}}},
	}, corev1.VolumeMount{Name: "store", MountPath: "/models", SubPath: "models/abc", ReadOnly: true})
	r := &Result{Volumes: map[string]string{"store": "/d/claims/team/shared"}}
	got, err := HostPath(pod, "c", "/models/.cache/../config.json", r)
	if err != nil || got != "/d/claims/team/shared/models/abc/config.json" {
		t.Errorf("HostPath = %q, %v", got, err)
	}
	if _, err := HostPath(pod, "c", "/etc/passwd", r); !errors.Is(err, ErrNotMounted) {
		t.Errorf("HostPath of a path in the image: %v, want %v", err, ErrNotMounted)
	}
	if _, err := HostPath(pod, "absent", "/models", r); err == nil {
		t.Error("HostPath of a container the pod lacks: no error")
	}
}

func TestSetUpVolumesProjects(t *testing.T) {
	c := fake.NewClientBuilder().WithObjects(
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "ca", Namespace: "team"}, Data: map[string]string{"ca.pem": "PEM", "other": "x"}},
	).Build()
	vols := []corev1.Volume{
		{Name: "ca", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: "ca"},
			Items:                []corev1.KeyToPath{{Key: "ca.pem", Path: "certs/bundle.pem"}},
		}}},
		{Name: "maybe", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "absent", Optional: ptr.To(true)}}},
	}
	dir := t.TempDir()
	v, err := setUpVolumes(context.Background(), c, volumePod("uid-a", vols), dir)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(v.host["ca"], "certs", "bundle.pem"))
	if err != nil || string(b) != "PEM" {
		t.Errorf("projected item: %q, %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(v.host["ca"], "other")); !os.IsNotExist(err) {
		t.Errorf("a key not in items was projected: %v", err)
	}
	if entries, err := os.ReadDir(v.host["maybe"]); err != nil || len(entries) != 0 {
		t.Errorf("an optional missing secret: %v, %v", entries, err)
	}
	vols[1].Secret.Optional = nil
	if _, err := setUpVolumes(context.Background(), c, volumePod("uid-a", vols), dir); err == nil {
		t.Error("a missing secret volume: no error")
	}
}
