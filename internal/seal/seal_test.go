package seal

import (
	"errors"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/modelgate/modelgate/api/annotations"
)

func sealedMeta(t *testing.T, k *Key) *metav1.ObjectMeta {
	t.Helper()
	m := &metav1.ObjectMeta{
		Labels:      map[string]string{annotations.OwnerLabel: "alice", annotations.TeamLabel: "nlp", "app": "x"},
		Annotations: map[string]string{annotations.OwnerFull: "alice@example.com", annotations.Injected: `{"mutators":["owner-metadata"]}`},
	}
	m.Annotations[annotations.Seal] = k.Sign("team-a", m)
	if !k.Verify("team-a", m) {
		t.Fatal("a fresh seal does not verify")
	}
	return m
}

func TestVerifyRejectsEveryChange(t *testing.T) {
	k, err := New([]byte("0123456789abcdef0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	other, _ := New([]byte("fedcba9876543210fedcba9876543210"))
	for name, tc := range map[string]struct {
		edit func(m *metav1.ObjectMeta)
		ns   string
		key  *Key
	}{
		"owner changed":      {edit: func(m *metav1.ObjectMeta) { m.Labels[annotations.OwnerLabel] = "ceo" }},
		"team removed":       {edit: func(m *metav1.ObjectMeta) { delete(m.Labels, annotations.TeamLabel) }},
		"owner-full changed": {edit: func(m *metav1.ObjectMeta) { m.Annotations[annotations.OwnerFull] = "ceo" }},
		"record changed":     {edit: func(m *metav1.ObjectMeta) { m.Annotations[annotations.Injected] = "yes" }},
		"values shifted": {edit: func(m *metav1.ObjectMeta) {
			m.Labels[annotations.OwnerLabel], m.Labels[annotations.TeamLabel] = "alicenlp", ""
		}},
		"other namespace": {ns: "team-b"},
		"other key":       {key: other},
		"nil key":         {key: (*Key)(nil)},
		"seal removed":    {edit: func(m *metav1.ObjectMeta) { delete(m.Annotations, annotations.Seal) }},
		"seal truncated":  {edit: func(m *metav1.ObjectMeta) { m.Annotations[annotations.Seal] = m.Annotations[annotations.Seal][:10] }},
		"seal of another scheme": {edit: func(m *metav1.ObjectMeta) {
			m.Annotations[annotations.Seal] = "v2" + m.Annotations[annotations.Seal][2:]
		}},
		"seal not base64": {edit: func(m *metav1.ObjectMeta) { m.Annotations[annotations.Seal] = "v1.!!!!!!!!!!!!!!!!!!!!!!" }},
	} {
		t.Run(name, func(t *testing.T) {
			m := sealedMeta(t, k)
			if tc.edit != nil {
				tc.edit(m)
			}
			ns, key := "team-a", k
			if tc.ns != "" {
				ns = tc.ns
			}
			if tc.key != nil || name == "nil key" {
				key = tc.key
			}
			if key.Verify(ns, m) {
				t.Error("Verify = true, want false")
			}
		})
	}
	// Keys other than the sealed ones may change freely.
	m := sealedMeta(t, k)
	m.Labels["app"], m.Annotations["note"] = "y", "z"
	if !k.Verify("team-a", m) {
		t.Error("a change to a key the seal does not cover broke it")
	}
}

func TestNewRejectsShortKeys(t *testing.T) {
	if _, err := New(make([]byte, KeySize-1)); !errors.Is(err, ErrShortKey) {
		t.Errorf("New(31 bytes) error = %v, want ErrShortKey", err)
	}
	if len(Generate()) != KeySize {
		t.Errorf("Generate() gave %d bytes, want %d", len(Generate()), KeySize)
	}
}

func FuzzVerify(f *testing.F) {
	k, _ := New([]byte("0123456789abcdef0123456789abcdef"))
	f.Add("alice", "nlp", `{"mutators":["owner-metadata"]}`, "v1.AAAAAAAAAAAAAAAAAAAAAA")
	f.Add("", "", "yes", "")
	f.Fuzz(func(t *testing.T, owner, team, record, s string) {
		m := &metav1.ObjectMeta{
			Labels:      map[string]string{annotations.OwnerLabel: owner, annotations.TeamLabel: team},
			Annotations: map[string]string{annotations.Injected: record, annotations.Seal: s},
		}
		if s != k.Sign("ns", m) && k.Verify("ns", m) {
			t.Fatalf("a seal %q that is not the signature verified", s)
		}
	})
}

func BenchmarkSignVerify(b *testing.B) {
	k, _ := New([]byte("0123456789abcdef0123456789abcdef"))
	m := &metav1.ObjectMeta{
		Labels: map[string]string{annotations.OwnerLabel: "alice_example.com", annotations.TeamLabel: "nlp"},
		Annotations: map[string]string{annotations.OwnerFull: "alice@example.com",
			annotations.Injected: `{"mutators":["owner-metadata","model-loader","gpu-placement","serving-probes"],"settings":"95df6e68e228","owns":["containerPort/vllm/8000/http","env/vllm/HF_HUB_CACHE=/models/.cache/huggingface/hub","initContainer/model-loader","limits/vllm/nvidia.com/gpu=1"]}`},
	}
	m.Annotations[annotations.Seal] = k.Sign("team-a", m)
	b.ReportAllocs()
	for b.Loop() {
		if !k.Verify("team-a", m) || k.Sign("team-a", m) == "" {
			b.Fatal("seal")
		}
	}
}
