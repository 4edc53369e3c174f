package audit

import (
	"context"
	"testing"

	"github.com/modelgate/modelgate/policies"
)

// FuzzAudit: any object the API server could hand the audit, however
// malformed, is judged or refused with an error; nothing panics.
func FuzzAudit(f *testing.F) {
	for _, raw := range goldens(f) {
		f.Add(raw)
	}
	f.Add([]byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"namespace":"ml-research","ownerReferences":[{"kind":"ReplicaSet","controller":true}]}}`))
	f.Add([]byte(`{"apiVersion":"batch/v1","kind":"CronJob","metadata":{"namespace":"opted-in","annotations":{"modelgate.io/inject":"false"}},"spec":null}`))
	f.Add([]byte(`{"apiVersion":"apps/v1","kind":"Deployment"}`))
	cfg := goldenCfg(f)
	a := New(cfg, policies.NewEngine(policies.Options{}), namespaces)
	f.Fuzz(func(t *testing.T, raw []byte) {
		o, err := a.Audit(context.Background(), raw)
		if err == nil && o.Skipped == "" && o.Object.Namespace == "" {
			t.Errorf("audited an object without a namespace: %+v", o)
		}
	})
}
