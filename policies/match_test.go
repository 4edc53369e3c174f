package policies

import "testing"

// Issue 42, item 5: ResourceClaims and ResourceClaimTemplates reach only
// the policies that name their kinds; an empty kinds list means every
// workload kind, as before claims were judged.
func TestMatchClaimKinds(t *testing.T) {
	cases := map[string]struct {
		kinds     []string
		kind      string
		wantMatch bool
	}{
		"empty kinds: a Pod":                         {kind: "Pod", wantMatch: true},
		"empty kinds: an AIInference":                {kind: "AIInference", wantMatch: true},
		"empty kinds: not a ResourceClaim":           {kind: "ResourceClaim"},
		"empty kinds: not a ResourceClaimTemplate":   {kind: "ResourceClaimTemplate"},
		"named: a ResourceClaim":                     {kinds: []string{"Pod", "ResourceClaim"}, kind: "ResourceClaim", wantMatch: true},
		"named: a ResourceClaimTemplate":             {kinds: []string{"ResourceClaimTemplate"}, kind: "ResourceClaimTemplate", wantMatch: true},
		"a ResourceClaim does not name its template": {kinds: []string{"ResourceClaim"}, kind: "ResourceClaimTemplate"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := mustCompile(t, Policy{Name: "p", Module: warnOnly, Match: Match{Kinds: tc.kinds}})
			if got := c.Matches(tc.kind, "team-a", nil); got != tc.wantMatch {
				t.Errorf("Matches(%q) with kinds %v = %v, want %v", tc.kind, tc.kinds, got, tc.wantMatch)
			}
		})
	}
}
