package offline

import (
	"encoding/json"
	"fmt"

	resourcev1 "k8s.io/api/resource/v1"

	policyview "github.com/modelgate/modelgate/policies/workload"
)

// ClaimsIn are the ResourceClaimTemplates and ResourceClaims
// (resource.k8s.io/v1) among the documents, in namespace defaultNS when
// they name none: the policies count the GPUs of Pods' claims from them as
// the webhook does from its cache. A document of those kinds that does not
// decode is an error naming it.
func ClaimsIn(docs []Document, defaultNS string) (*policyview.ClaimSet, error) {
	set := &policyview.ClaimSet{}
	for i := range docs {
		d := &docs[i]
		ti, err := ReadTypeInfo(d.JSON)
		if err != nil || ti.APIVersion != resourcev1.SchemeGroupVersion.String() {
			continue
		}
		switch ti.Kind {
		case "ResourceClaimTemplate":
			var t resourcev1.ResourceClaimTemplate
			if err := json.Unmarshal(d.JSON, &t); err != nil {
				return nil, &DocumentError{Doc: d, Err: fmt.Errorf("reading the ResourceClaimTemplate: %w", err)}
			}
			if t.Namespace == "" {
				t.Namespace = defaultNS
			}
			set.AddTemplate(&t)
		case "ResourceClaim":
			var c resourcev1.ResourceClaim
			if err := json.Unmarshal(d.JSON, &c); err != nil {
				return nil, &DocumentError{Doc: d, Err: fmt.Errorf("reading the ResourceClaim: %w", err)}
			}
			if c.Namespace == "" {
				c.Namespace = defaultNS
			}
			set.AddClaim(&c)
		}
	}
	return set, nil
}
