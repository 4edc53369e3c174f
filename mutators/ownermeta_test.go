package mutators

import (
	"maps"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/modelgate/modelgate/api/annotations"
	"github.com/modelgate/modelgate/test/harnesses/builders"
)

const (
	owner    = annotations.OwnerLabel
	team     = annotations.TeamLabel
	fullName = annotations.OwnerFull
)

// oldMeta is the previous object's metadata on an UPDATE.
func oldMeta(labels, annos map[string]string) *metav1.ObjectMeta {
	return &metav1.ObjectMeta{Name: "server", Namespace: "team-a", Labels: labels, Annotations: annos}
}

// expect returns the maps a metadata should end with: what it had before,
// with modelgate's owner keys replaced by want (an empty value: absent).
func expect(before map[string]string, want map[string]string) map[string]string {
	out := maps.Clone(before)
	if out == nil {
		out = map[string]string{}
	}
	for _, k := range []string{owner, team, fullName} {
		delete(out, k)
	}
	for k, v := range want {
		if v != "" {
			out[k] = v
		}
	}
	return out
}

func TestOwnerMetadata(t *testing.T) {
	aliceOwned := map[string]string{owner: aliceLabel, team: "ml-platform"}
	aliceFull := map[string]string{fullName: alice}
	cases := map[string]struct {
		op        Operation
		requester Requester
		nsLabels  map[string]string
		old       *metav1.ObjectMeta
		// labels and annos are set on every metadata before the mutator
		// runs; with podOnly, on the pod (template) metadata only.
		labels, annos map[string]string
		podOnly       bool
		// sealed seals what labels and annos set, as modelgate does when
		// it writes them (SealMetadata).
		sealed bool
		// wantLabels and wantAnnos are modelgate's keys every metadata
		// must end with.
		wantLabels, wantAnnos map[string]string
		wantChanged           bool
	}{
		"create by user stamps owner, full name and team": {
			op: Create, requester: untrusted, nsLabels: teamNS,
			wantLabels: aliceOwned, wantAnnos: aliceFull, wantChanged: true,
		},
		"create by user whose name is a label value sets no full name": {
			op: Create, requester: Requester{Username: bob}, nsLabels: teamNS,
			wantLabels: map[string]string{owner: bob, team: "ml-platform"}, wantChanged: true,
		},
		"create by user overwrites forged owner and team": {
			op: Create, requester: untrusted, nsLabels: teamNS,
			labels:     map[string]string{owner: "mallory", team: "admins"},
			annos:      map[string]string{fullName: "mallory@evil.example"},
			wantLabels: aliceOwned, wantAnnos: aliceFull, wantChanged: true,
		},
		"create by user removes forged full name": {
			op: Create, requester: Requester{Username: bob}, nsLabels: teamNS,
			labels:     map[string]string{owner: bob, team: "ml-platform"},
			annos:      map[string]string{fullName: "bob@evil.example"},
			wantLabels: map[string]string{owner: bob, team: "ml-platform"}, wantChanged: true,
		},
		"namespace without team removes forged team": {
			op: Create, requester: untrusted, nsLabels: map[string]string{"other": "x"},
			labels:     map[string]string{team: "admins"},
			wantLabels: map[string]string{owner: aliceLabel}, wantAnnos: aliceFull, wantChanged: true,
		},
		"namespace team that is not a label value is ignored": {
			op: Create, requester: untrusted, nsLabels: map[string]string{annotations.NamespaceTeam: "not a label"},
			wantLabels: map[string]string{owner: aliceLabel}, wantAnnos: aliceFull, wantChanged: true,
		},
		"create by trusted requester keeps the carried owner": {
			op: Create, requester: trusted, nsLabels: teamNS,
			labels: aliceOwned, annos: aliceFull, sealed: true,
			wantLabels: aliceOwned, wantAnnos: aliceFull, wantChanged: false,
		},
		"create by trusted requester keeps the owner carried by the pod template": {
			op: Create, requester: trusted, nsLabels: teamNS,
			labels: map[string]string{owner: aliceLabel}, annos: aliceFull, podOnly: true, sealed: true,
			wantLabels: aliceOwned, wantAnnos: aliceFull, wantChanged: true,
		},
		// A template modelgate never admitted (a ReplicaSet a user wrote)
		// passes no owner on through the controller that copies it.
		"create by trusted requester drops an unsealed carried owner": {
			op: Create, requester: trusted, nsLabels: teamNS,
			labels: map[string]string{owner: "ceo", team: "finance"}, annos: map[string]string{fullName: "ceo@example.com"},
			wantLabels: map[string]string{team: "ml-platform"}, wantChanged: true,
		},
		"create by trusted requester sets no owner when none is carried": {
			op: Create, requester: trusted, nsLabels: teamNS,
			wantLabels: map[string]string{team: "ml-platform"}, wantChanged: true,
		},
		"update keeps the old owner": {
			op: Update, requester: Requester{Username: bob}, nsLabels: teamNS,
			old:    oldMeta(aliceOwned, aliceFull),
			labels: aliceOwned, annos: aliceFull,
			wantLabels: aliceOwned, wantAnnos: aliceFull, wantChanged: false,
		},
		"update restores a changed owner": {
			op: Update, requester: Requester{Username: bob}, nsLabels: teamNS,
			old:    oldMeta(aliceOwned, aliceFull),
			labels: map[string]string{owner: bob, team: "ml-platform"}, annos: map[string]string{fullName: "bob"},
			wantLabels: aliceOwned, wantAnnos: aliceFull, wantChanged: true,
		},
		"update restores a removed owner": {
			op: Update, requester: Requester{Username: bob}, nsLabels: teamNS,
			old:        oldMeta(aliceOwned, aliceFull),
			wantLabels: aliceOwned, wantAnnos: aliceFull, wantChanged: true,
		},
		"update by trusted requester keeps the old owner over the carried one": {
			op: Update, requester: trusted, nsLabels: teamNS,
			old:        oldMeta(aliceOwned, aliceFull),
			labels:     map[string]string{owner: "carol"},
			wantLabels: aliceOwned, wantAnnos: aliceFull, wantChanged: true,
		},
		"update with no old owner by user stamps the updater": {
			op: Update, requester: untrusted, nsLabels: teamNS,
			old:        oldMeta(map[string]string{"app": "server"}, nil),
			wantLabels: aliceOwned, wantAnnos: aliceFull, wantChanged: true,
		},
	}
	for name, tc := range cases {
		for _, kind := range targetKinds {
			t.Run(name+"/"+kind, func(t *testing.T) {
				tg := newTarget(kind, builders.Options{Labels: map[string]string{"app": "server"}})
				if tc.podOnly {
					setOnEvery(&Target{Object: tg.PodMeta()}, tc.labels, tc.annos)
				} else {
					setOnEvery(tg, tc.labels, tc.annos)
				}
				in := &Input{Operation: tc.op, Namespace: "team-a", NamespaceLabels: tc.nsLabels,
					Requester: tc.requester, Old: tc.old, Options: testOptions()}
				if tc.sealed {
					SealMetadata(tg, in)
				}
				before := metas(tg)

				changed, err := OwnerMetadata{}.Mutate(tg, in)
				if err != nil {
					t.Fatalf("Mutate: %v", err)
				}
				if changed != tc.wantChanged {
					t.Errorf("changed = %v, want %v", changed, tc.wantChanged)
				}
				after := metas(tg)
				if same := cmp.Equal(before, after); changed == same {
					t.Errorf("changed = %v, but metadata equal before and after = %v", changed, same)
				}
				for i, m := range tg.Metas() {
					if diff := cmp.Diff(expect(before[i].Labels, tc.wantLabels), m.Labels, cmpopts.EquateEmpty()); diff != "" {
						t.Errorf("metadata %d labels (-want +got):\n%s", i, diff)
					}
					if diff := cmp.Diff(expect(before[i].Annotations, tc.wantAnnos), m.Annotations, cmpopts.EquateEmpty()); diff != "" {
						t.Errorf("metadata %d annotations (-want +got):\n%s", i, diff)
					}
				}
			})
		}
	}
}

func TestOwnerMetadataLeavesOtherKeys(t *testing.T) {
	tg := newTarget("CronJob", builders.Options{
		Labels:              map[string]string{"app": "server", "tier": "gpu"},
		Annotations:         map[string]string{annotations.Inject: "true", "note": "keep"},
		TemplateLabels:      map[string]string{"role": "worker"},
		TemplateAnnotations: map[string]string{"prometheus.io/scrape": "true"},
	})
	if _, err := (OwnerMetadata{}).Mutate(tg, &Input{Operation: Create, Requester: untrusted, NamespaceLabels: teamNS}); err != nil {
		t.Fatalf("Mutate: %v", err)
	}
	want := []map[string]string{
		{"app": "server", "tier": "gpu", owner: aliceLabel, team: "ml-platform"},
		{owner: aliceLabel, team: "ml-platform"},
		{"app": "server", "role": "worker", owner: aliceLabel, team: "ml-platform"},
	}
	wantAnnos := []map[string]string{
		{annotations.Inject: "true", "note": "keep", fullName: alice},
		{fullName: alice},
		{"prometheus.io/scrape": "true", fullName: alice},
	}
	for i, m := range tg.Metas() {
		if diff := cmp.Diff(want[i], m.Labels); diff != "" {
			t.Errorf("metadata %d labels (-want +got):\n%s", i, diff)
		}
		if diff := cmp.Diff(wantAnnos[i], m.Annotations); diff != "" {
			t.Errorf("metadata %d annotations (-want +got):\n%s", i, diff)
		}
	}
}
