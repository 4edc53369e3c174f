package audit

import (
	"encoding/json"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/modelgate/modelgate/api/annotations"
	"github.com/modelgate/modelgate/internal/seal"
	"github.com/modelgate/modelgate/offline"
)

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
	var ns string
	if m, ok := obj["metadata"].(map[string]any); ok {
		ns, _ = m["namespace"].(string)
	}
	changed := false
	// A workload carries the metadata modelgate seals on itself and on its
	// pod templates.
	for m := range offline.Metadata(obj) {
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
			return nil, fmt.Errorf("reading metadata: %w", err)
		}
		ann[annotations.Seal] = key.Sign(ns, &meta)
		changed = true
	}
	if !changed {
		return raw, nil
	}
	return json.Marshal(obj)
}
