package aiinference

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// comparedPaths are what the controller holds its children to: a dry run
// that leaves them as they are means there is nothing to write.
var comparedPaths = [][]string{{"spec"}, {"metadata", "labels"}, {"metadata", "annotations"}, {"metadata", "ownerReferences"}}

// settledChildren remembers, for each child, the fingerprint of the
// object the controller would apply and of the live object's compared
// fields when a dry run last found nothing to write. While neither
// changes, the next reconcile needs no dry run: Pod and ReplicaSet events
// (most reconciles) then cost the API server and the webhooks nothing.
// Another writer changing a compared field, or the AIInference changing,
// changes the fingerprint, and the dry run happens again.
type settledChildren struct {
	mu sync.Mutex
	m  map[settledKey]string
}

type settledKey struct {
	kind string
	key  types.NamespacedName
}

// is reports whether the child was found settled with this fingerprint.
func (s *settledChildren) is(kind string, key types.NamespacedName, fp string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return fp != "" && s.m[settledKey{kind, key}] == fp
}

// remember records that the child is settled with this fingerprint.
func (s *settledChildren) remember(kind string, key types.NamespacedName, fp string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[settledKey]string{}
	}
	s.m[settledKey{kind, key}] = fp
}

// forget drops an AIInference's children (they share its name).
func (s *settledChildren) forget(key types.NamespacedName) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k := range s.m {
		if k.key == key {
			delete(s.m, k)
		}
	}
}

// fingerprint hashes the object to apply and the live object's compared
// fields; "" when either cannot be encoded (never settled).
func fingerprint(applied *unstructured.Unstructured, live client.Object) string {
	l, err := runtime.DefaultUnstructuredConverter.ToUnstructured(live)
	if err != nil {
		return ""
	}
	h := sha256.New()
	enc := json.NewEncoder(h) // maps encode with sorted keys
	if enc.Encode(applied.Object) != nil {
		return ""
	}
	for _, path := range comparedPaths {
		v, _, _ := unstructured.NestedFieldNoCopy(l, path...)
		if enc.Encode(v) != nil {
			return ""
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}
