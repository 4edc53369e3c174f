package audit

import (
	"encoding/json"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/modelgate/modelgate/api/annotations"
	"github.com/modelgate/modelgate/internal/seal"
)

// sealedMetadata are where a workload carries metadata modelgate seals:
// its own and its pod templates'.
var sealedMetadata = [][]string{
	{"metadata"},
	{"spec", "template", "metadata"},
	{"spec", "jobTemplate", "metadata"},
	{"spec", "jobTemplate", "spec", "template", "metadata"},
}

// Reseal returns the object with every seal it carries replaced by key's
// seal of the same metadata: the records and owners it holds are then
// taken as modelgate's. It is for audits that cannot verify them (the
// record key is not at hand): they judge what the objects say, as if
// modelgate had written it, rather than reporting every sealed owner and
// record as forged. Objects without a seal are returned as they are.
func Reseal(raw []byte, key *seal.Key) ([]byte, error) {
	var obj map[string]any
	if err := json.Unmarshal(raw, &obj); err != nil {
		return nil, fmt.Errorf("reading the object: %w", err)
	}
	ns, _ := lookupString(obj, "metadata", "namespace")
	changed := false
	for _, path := range sealedMetadata {
		m, ok := lookup(obj, path...).(map[string]any)
		if !ok {
			continue
		}
		ann, _ := m["annotations"].(map[string]any)
		if _, sealed := ann[annotations.Seal]; !sealed {
			continue
		}
		b, err := json.Marshal(m)
		if err != nil {
			return nil, err
		}
		var meta metav1.ObjectMeta
		if err := json.Unmarshal(b, &meta); err != nil {
			return nil, fmt.Errorf("reading %v: %w", path, err)
		}
		ann[annotations.Seal] = key.Sign(ns, &meta)
		changed = true
	}
	if !changed {
		return raw, nil
	}
	return json.Marshal(obj)
}

// lookup walks nested objects; nil when a step is missing.
func lookup(v any, path ...string) any {
	for _, k := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

func lookupString(v any, path ...string) (string, bool) {
	s, ok := lookup(v, path...).(string)
	return s, ok
}
