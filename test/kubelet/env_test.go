package kubelet

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// TestExpand runs the cases of the kubelet's own expansion tests
// (third_party/forked/golang/expansion/expand_test.go, Kubernetes 1.36).
func TestExpand(t *testing.T) {
	vars := []envVar{{"VAR_A", "A"}, {"VAR_B", "B"}, {"VAR_C", "C"}, {"VAR_REF", "$(VAR_A)"}, {"VAR_EMPTY", ""}}
	for name, c := range map[string]struct{ in, want string }{
		"whole string":                  {"$(VAR_A)", "A"},
		"repeat":                        {"$(VAR_A)-$(VAR_A)", "A-A"},
		"beginning":                     {"$(VAR_A)-1", "A-1"},
		"middle":                        {"___$(VAR_B)___", "___B___"},
		"end":                           {"___$(VAR_C)", "___C"},
		"compound":                      {"$(VAR_A)_$(VAR_B)_$(VAR_C)", "A_B_C"},
		"escape and expansion":          {"$$(VAR_B)_$(VAR_A)", "$(VAR_B)_A"},
		"compound escape":               {"$$(VAR_A)_$$(VAR_B)", "$(VAR_A)_$(VAR_B)"},
		"mixed in escapes":              {"f000-$$VAR_A", "f000-$VAR_A"},
		"backslash escape ignored":      {"foo\\$(VAR_C)bar", "foo\\Cbar"},
		"backslash escape ignored 2":    {"foo\\\\$(VAR_C)bar", "foo\\\\Cbar"},
		"lots of backslashes":           {"foo\\\\\\\\$(VAR_A)bar", "foo\\\\\\\\Abar"},
		"nested var references":         {"$(VAR_A$(VAR_B))", "$(VAR_A$(VAR_B))"},
		"nested var references 2":       {"$(VAR_A$(VAR_B)", "$(VAR_A$(VAR_B)"},
		"value is a reference":          {"$(VAR_REF)", "$(VAR_A)"},
		"value is a reference x2":       {"%%$(VAR_REF)--$(VAR_REF)%%", "%%$(VAR_A)--$(VAR_A)%%"},
		"empty var":                     {"foo$(VAR_EMPTY)bar", "foobar"},
		"unterminated expression":       {"foo$(VAR_Awhoops!", "foo$(VAR_Awhoops!"},
		"expression without operator":   {"f00__(VAR_A)__", "f00__(VAR_A)__"},
		"shell special vars pass":       {"$?_boo_$!", "$?_boo_$!"},
		"bare operators are ignored":    {"$VAR_A", "$VAR_A"},
		"undefined vars are ignored":    {"$(VAR_DNE)", "$(VAR_DNE)"},
		"multiple escapes":              {"$$$$$$(BIG_MONEY)", "$$$(BIG_MONEY)"},
		"multiple escapes 2":            {"$$$$$$(VAR_A)", "$$$(VAR_A)"},
		"multiple odd escapes":          {"$$$$$$$(GOOD_ODDS)", "$$$$(GOOD_ODDS)"},
		"multiple odd escapes 2":        {"$$$$$$$(VAR_A)", "$$$A"},
		"missing open expression":       {"$VAR_A)", "$VAR_A)"},
		"shell syntax ignored":          {"${VAR_A}", "${VAR_A}"},
		"trailing incomplete":           {"$(VAR_B)_______$(A", "B_______$(A"},
		"trailing incomplete 2":         {"$(VAR_C)_______$(", "C_______$("},
		"trailing incomplete 3":         {"$(VAR_A)foobarzab$", "Afoobarzab$"},
		"trailing incomplete 4":         {"foo-\\$(VAR_A", "foo-\\$(VAR_A"},
		"lots of $( in middle":          {"--$($($($($--", "--$($($($($--"},
		"lots of $( in beginning":       {"$($($($($--foo$(", "$($($($($--foo$("},
		"lots of $( at end":             {"foo0--$($($($(", "foo0--$($($($("},
		"escaped operators in variable": {"$(foo$$var)", "$(foo$$var)"},
		"newline not expanded":          {"\n", "\n"},
		"utf8 after operator":           {"$£FOO", "$£FOO"},
		"utf8 in the middle":            {"prefix-$€-suffix", "prefix-$€-suffix"},
		"utf8 multi-byte":               {"$中文", "$中文"},
	} {
		t.Run(name, func(t *testing.T) {
			if got := expand(c.in, mappingOf(vars)); got != c.want {
				t.Errorf("expand(%q) = %q, want %q", c.in, got, c.want)
			}
		})
	}
}

func testPod(containers ...corev1.Container) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "llm-0", Namespace: "team", UID: "uid-1", Labels: map[string]string{"app": "llm"}},
		Spec:       corev1.PodSpec{NodeName: "gpu-0", ServiceAccountName: "runner", Containers: containers},
		Status:     corev1.PodStatus{PodIP: "10.0.0.7", PodIPs: []corev1.PodIP{{IP: "10.0.0.7"}, {IP: "fd00::7"}}},
	}
}

func secretRef(name string, optional bool) *corev1.SecretEnvSource {
	return &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: name}, Optional: ptr.To(optional)}
}

func configMapRef(name string, optional bool) *corev1.ConfigMapEnvSource {
	return &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: name}, Optional: ptr.To(optional)}
}

func TestContainerEnv(t *testing.T) {
	objs := []client.Object{
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "creds", Namespace: "team"}, Data: map[string][]byte{
			"TOKEN": []byte("s3cr3t"), "ENDPOINT": []byte("https://hub"),
			// Secret keys need not be C identifiers; the kubelet of 1.36
			// passes them on.
			"tls.crt": []byte("PEM"), "1st": []byte("one"), "with-dash": []byte("dash"),
		}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings", Namespace: "team"}, Data: map[string]string{
			"ENDPOINT": "https://mirror", "LEVEL": "debug",
		}},
	}
	c := fake.NewClientBuilder().WithObjects(objs...).Build()
	for name, tc := range map[string]struct {
		ctr     corev1.Container
		want    []envVar
		wantErr bool
	}{
		"envFrom takes every key, sorted, invalid identifiers included": {
			ctr: corev1.Container{EnvFrom: []corev1.EnvFromSource{{SecretRef: secretRef("creds", false)}}},
			want: []envVar{{"1st", "one"}, {"ENDPOINT", "https://hub"}, {"TOKEN", "s3cr3t"},
				{"tls.crt", "PEM"}, {"with-dash", "dash"}},
		},
		"a later envFrom replaces an earlier one's variable, in place": {
			ctr: corev1.Container{EnvFrom: []corev1.EnvFromSource{
				{ConfigMapRef: configMapRef("settings", false)},
				{SecretRef: secretRef("creds", false), Prefix: "X_"},
				{SecretRef: secretRef("creds", false)},
			}},
			want: []envVar{{"ENDPOINT", "https://hub"}, {"LEVEL", "debug"},
				{"X_1st", "one"}, {"X_ENDPOINT", "https://hub"}, {"X_TOKEN", "s3cr3t"}, {"X_tls.crt", "PEM"}, {"X_with-dash", "dash"},
				{"1st", "one"}, {"TOKEN", "s3cr3t"}, {"tls.crt", "PEM"}, {"with-dash", "dash"}},
		},
		"env overrides envFrom": {
			ctr: corev1.Container{
				EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: configMapRef("settings", false)}},
				Env:     []corev1.EnvVar{{Name: "LEVEL", Value: "info"}},
			},
			want: []envVar{{"ENDPOINT", "https://mirror"}, {"LEVEL", "info"}},
		},
		"an optional missing source is skipped": {
			ctr: corev1.Container{EnvFrom: []corev1.EnvFromSource{
				{SecretRef: secretRef("absent", true)}, {ConfigMapRef: configMapRef("absent", true)},
			}},
		},
		"a missing secret is an error": {
			ctr:     corev1.Container{EnvFrom: []corev1.EnvFromSource{{SecretRef: secretRef("absent", false)}}},
			wantErr: true,
		},
		"a missing configMap is an error": {
			ctr:     corev1.Container{EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: configMapRef("absent", false)}}},
			wantErr: true,
		},
		"$(VAR) sees envFrom and earlier env, not later env": {
			ctr: corev1.Container{
				EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: configMapRef("settings", false)}},
				Env: []corev1.EnvVar{
					{Name: "URL", Value: "$(ENDPOINT)/api?level=$(LEVEL)&later=$(LATER)"},
					{Name: "TWICE", Value: "$(URL)$$(URL)"},
					{Name: "LATER", Value: "x"},
				},
			},
			want: []envVar{{"ENDPOINT", "https://mirror"}, {"LEVEL", "debug"},
				{"URL", "https://mirror/api?level=debug&later=$(LATER)"},
				{"TWICE", "https://mirror/api?level=debug&later=$(LATER)$(URL)"}, {"LATER", "x"}},
		},
		"valueFrom is not expanded": {
			ctr: corev1.Container{Env: []corev1.EnvVar{
				{Name: "A", Value: "a"},
				{Name: "B", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
					LocalObjectReference: corev1.LocalObjectReference{Name: "settings"}, Key: "LEVEL"}}},
			}},
			want: []envVar{{"A", "a"}, {"B", "debug"}},
		},
		"fieldRef": {
			ctr: corev1.Container{Env: []corev1.EnvVar{
				{Name: "POD", ValueFrom: fieldRef("metadata.name")},
				{Name: "NS", ValueFrom: fieldRef("metadata.namespace")},
				{Name: "UID", ValueFrom: fieldRef("metadata.uid")},
				{Name: "NODE", ValueFrom: fieldRef("spec.nodeName")},
				{Name: "SA", ValueFrom: fieldRef("spec.serviceAccountName")},
				{Name: "APP", ValueFrom: fieldRef("metadata.labels['app']")},
				{Name: "IPS", ValueFrom: fieldRef("status.podIPs")},
				{Name: "WHERE", Value: "$(POD).$(NS)@$(NODE)"},
			}},
			want: []envVar{{"POD", "llm-0"}, {"NS", "team"}, {"UID", "uid-1"}, {"NODE", "gpu-0"}, {"SA", "runner"},
				{"APP", "llm"}, {"IPS", "10.0.0.7,fd00::7"}, {"WHERE", "llm-0.team@gpu-0"}},
		},
		"an unsupported fieldRef is an error": {
			ctr:     corev1.Container{Env: []corev1.EnvVar{{Name: "X", ValueFrom: fieldRef("metadata.generateName")}}},
			wantErr: true,
		},
		"secretKeyRef, and optional missing keys and secrets left out": {
			ctr: corev1.Container{Env: []corev1.EnvVar{
				{Name: "TOKEN", ValueFrom: secretKey("creds", "TOKEN", false)},
				{Name: "GONE", ValueFrom: secretKey("creds", "absent", true)},
				{Name: "GONE2", ValueFrom: secretKey("absent", "TOKEN", true)},
				{Name: "REF", Value: "[$(GONE)]"},
			}},
			want: []envVar{{"TOKEN", "s3cr3t"}, {"REF", "[$(GONE)]"}},
		},
		"a missing key is an error": {
			ctr:     corev1.Container{Env: []corev1.EnvVar{{Name: "X", ValueFrom: secretKey("creds", "absent", false)}}},
			wantErr: true,
		},
		"a later env entry of the same name wins, in place": {
			ctr:  corev1.Container{Env: []corev1.EnvVar{{Name: "A", Value: "1"}, {Name: "B", Value: "2"}, {Name: "A", Value: "$(A)3"}}},
			want: []envVar{{"A", "13"}, {"B", "2"}},
		},
		"an empty value without valueFrom is set, empty": {
			ctr:  corev1.Container{Env: []corev1.EnvVar{{Name: "EMPTY"}}},
			want: []envVar{{"EMPTY", ""}},
		},
	} {
		t.Run(name, func(t *testing.T) {
			tc.ctr.Name = "c"
			pod := testPod(tc.ctr)
			got, err := containerEnv(context.Background(), c, pod, &pod.Spec.Containers[0])
			if (err != nil) != tc.wantErr {
				t.Fatalf("error %v, want error: %t", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("environment (-want +got):\n%s", diff)
			}
		})
	}
}

func fieldRef(p string) *corev1.EnvVarSource {
	return &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: p}}
}

func secretKey(name, key string, optional bool) *corev1.EnvVarSource {
	return &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: name}, Key: key, Optional: ptr.To(optional)}}
}

func TestExpandCommand(t *testing.T) {
	env := []envVar{{"MODEL", "/models/llm"}, {"PORT", "8000"}}
	ctr := &corev1.Container{
		Command: []string{"/bin/$(PROG)", "serve"},
		Args:    []string{"$(MODEL)", "--port=$(PORT)", "$$(PORT)"},
	}
	want := []string{"/bin/$(PROG)", "serve", "/models/llm", "--port=8000", "$(PORT)"}
	if diff := cmp.Diff(want, expandCommand(ctr, env)); diff != "" {
		t.Errorf("command (-want +got):\n%s", diff)
	}
}

func TestLiteralEnv(t *testing.T) {
	ctr := &corev1.Container{Env: []corev1.EnvVar{
		{Name: "CACHE", Value: "/models/.cache"},
		{Name: "HF_HUB_CACHE", Value: "$(CACHE)/hub"},
		{Name: "FROM_SECRET", ValueFrom: secretKey("s", "k", false)},
		{Name: "CACHE", ValueFrom: fieldRef("metadata.name")},
	}}
	env, unknown := literalEnv(ctr)
	if diff := cmp.Diff([]envVar{{"HF_HUB_CACHE", "/models/.cache/hub"}}, env); diff != "" {
		t.Errorf("environment (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]bool{"FROM_SECRET": true, "CACHE": true}, unknown); diff != "" {
		t.Errorf("unknown (-want +got):\n%s", diff)
	}
}

func TestMergeEnv(t *testing.T) {
	got := mergeEnv([]string{"PATH=/bin", "HOSTNAME=image"}, []string{"HOSTNAME=llm-0"}, []string{"A=1", "PATH=/usr/bin"})
	want := []string{"PATH=/usr/bin", "HOSTNAME=llm-0", "A=1"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("environment (-want +got):\n%s", diff)
	}
}
