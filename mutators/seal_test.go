package mutators

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/modelgate/modelgate/api/annotations"
	"github.com/modelgate/modelgate/test/harnesses/builders"
)

// forgedOwns claims, as modelgate's, three parts the user wrote.
var forgedOwns = []string{
	"limits/server/memory=1Gi",
	"requests/server/cpu=500m",
	"nodeAffinity/In/tenant.example.com/pool",
}

// userPinnedPod is a Pod whose serving container sets a memory limit and a
// CPU request and which is pinned to a tenant's node pool.
func userPinnedPod(t *testing.T) (*Target, int) {
	t.Helper()
	tg := newTarget("Pod", builders.Options{})
	i := slices.IndexFunc(tg.PodSpec.Containers, func(c corev1.Container) bool { return c.Name == "server" })
	if i < 0 {
		t.Fatal("builder pod has no container server")
	}
	c := &tg.PodSpec.Containers[i]
	c.Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}
	c.Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")}
	tg.PodSpec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "tenant.example.com/pool", Operator: corev1.NodeSelectorOpIn, Values: []string{"a"}}},
		}}},
	}}
	return tg, i
}

// A record modelgate did not write names parts modelgate would then take
// out; unsealed, it is ignored and the user's fields stay. The same record
// sealed by modelgate (the control) does take them out, so the test tells
// the two apart.
func TestForgedRecordRemovesNothing(t *testing.T) {
	forged := Record{Mutators: []string{OwnerMetadataName, "gpu-placement"}, Settings: "0", Owns: forgedOwns}
	for name, tc := range map[string]struct {
		record    string
		sealed    bool
		wantKept  bool
		wantOwner string
	}{
		"forged record":           {record: forged.String(), wantKept: true},
		"unparsable record":       {record: "yes", wantKept: true},
		"record sealed elsewhere": {record: forged.String(), sealed: true, wantKept: false},
	} {
		t.Run(name, func(t *testing.T) {
			tg, i := userPinnedPod(t)
			tg.Object.Annotations = map[string]string{annotations.Injected: tc.record}
			in := freshInput()
			in.Settings.Model = nil
			in.Container = i
			if tc.sealed {
				SealMetadata(tg, in)
			}
			if _, err := (Chain(allMutators)).Apply(tg, in); err != nil {
				t.Fatalf("Apply: %v", err)
			}
			c := tg.PodSpec.Containers[i]
			kept := map[string]bool{
				"memory limit": c.Resources.Limits.Memory().String() == "1Gi",
				"cpu request":  c.Resources.Requests.Cpu().String() == "500m",
				"tenant pin": slices.ContainsFunc(tg.PodSpec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchExpressions,
					func(r corev1.NodeSelectorRequirement) bool { return r.Key == "tenant.example.com/pool" }),
			}
			for field, ok := range kept {
				if ok != tc.wantKept {
					t.Errorf("%s kept = %v, want %v", field, ok, tc.wantKept)
				}
			}
			rec, ok := ParseRecord(tg.Object.Annotations[annotations.Injected])
			if !ok {
				t.Fatalf("no record after Apply: %q", tg.Object.Annotations[annotations.Injected])
			}
			for _, part := range forgedOwns {
				if rec.Owned(part) {
					t.Errorf("record after Apply owns %s, which modelgate did not create", part)
				}
			}
			if !Sealed(tg.Object, in) {
				t.Error("metadata after Apply is not sealed")
			}
		})
	}
}

// A record is sealed for its namespace and its exact values: moved to
// another namespace or edited by hand, it is not trusted.
func TestSealBindsNamespaceAndValues(t *testing.T) {
	tg := newTarget("Pod", builders.Options{})
	in := freshInput()
	if _, err := (Chain(allMutators)).Apply(tg, in); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	if !HasRecord(tg, in) {
		t.Fatal("modelgate's own sealed record is not trusted")
	}
	other := *in
	other.Namespace = "team-b"
	if HasRecord(tg, &other) {
		t.Error("record sealed in team-a trusted in team-b")
	}
	edited := tg.Object.DeepCopy()
	r, _ := ParseRecord(edited.Annotations[annotations.Injected])
	r.Owns = append(r.Owns, "limits/server/memory=1Gi")
	edited.Annotations[annotations.Injected] = r.String()
	if HasRecord(&Target{Kind: "Pod", Object: edited, PodSpec: tg.PodSpec}, in) {
		t.Error("record edited after sealing is trusted")
	}
	noKey := *in
	noKey.Options = &Options{}
	if HasRecord(tg, &noKey) {
		t.Error("record trusted without a key")
	}
}

// ForgedMetadata strips what modelgate did not seal and keeps what it did.
func TestForgedMetadata(t *testing.T) {
	in := freshInput()
	sealedTg := newTarget("CronJob", builders.Options{})
	if _, err := (Chain{OwnerMetadata{}}).Apply(sealedTg, in); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	want := sealedTg.Object.DeepCopy()
	if changed, _ := (ForgedMetadata{}).Mutate(sealedTg, in); changed {
		t.Error("ForgedMetadata changed sealed metadata")
	}
	if diff := cmp.Diff(want, sealedTg.Object); diff != "" {
		t.Errorf("sealed metadata (-want +got):\n%s", diff)
	}

	forgedTg := newTarget("CronJob", builders.Options{})
	for _, m := range forgedTg.Metas() {
		m.Labels = map[string]string{"app": "x", annotations.OwnerLabel: "ceo", annotations.TeamLabel: "finance"}
		m.Annotations = map[string]string{annotations.Injected: "yes", annotations.Seal: "v1.AAAAAAAAAAAAAAAAAAAAAA", "keep": "me"}
	}
	if changed, _ := (ForgedMetadata{}).Mutate(forgedTg, in); !changed {
		t.Error("ForgedMetadata changed nothing on forged metadata")
	}
	for i, m := range forgedTg.Metas() {
		if diff := cmp.Diff(map[string]string{"app": "x"}, m.Labels); diff != "" {
			t.Errorf("metadata %d labels (-want +got):\n%s", i, diff)
		}
		if diff := cmp.Diff(map[string]string{"keep": "me"}, m.Annotations); diff != "" {
			t.Errorf("metadata %d annotations (-want +got):\n%s", i, diff)
		}
	}
}
