package policies

import (
	"crypto/sha256"
	"encoding/binary"
	"slices"
	"sync"
)

// RawReview is a review as the request's bytes give it, before the object
// is decoded or its view built: what the DecisionCache needs to find a
// repeat without either (Engine.Recall). The caller vouches for Content:
// two reviews of one Kind and Namespace whose Content and Name are the same
// bytes build the same view, every key of it but the name equal, and the
// name equal when Name is. webhook/decode.AppendViewKey writes such a
// Content from the fields the view is built from, located in the raw
// object in one pass.
type RawReview struct {
	// Kind, Namespace and NamespaceLabels select the policies, as in Review.
	Kind, Namespace string
	NamespaceLabels map[string]string
	// Content encodes everything the view is built from but the object's
	// name: the object's fields, the operation, the requester when a
	// policy reads it, and whatever else of the caller's makes the view
	// (its configuration).
	Content []byte
	// Name is the object's metadata.name as the request holds it.
	Name []byte
}

// key is the review's cacheKey under set, in a space of its own: a view's
// key (reviewKey) begins with a kind, valid UTF-8, and this one with a byte
// that UTF-8 never holds. The name is left out when no policy of the set
// reads it, kept apart from the base when every read of it is guarded, as
// reviewKey does with the view's.
func (r *RawReview) key(set *Set) cacheKey {
	kb := keyBuffers.Get().(*keyBuffer)
	defer keyBuffers.Put(kb)
	buf := kb.buf[:0]
	add := func(s string) {
		buf = binary.AppendUvarint(buf, uint64(len(s)))
		buf = append(buf, s...)
	}
	buf = append(buf, 0xff)
	add(r.Kind)
	add(r.Namespace)
	buf = binary.AppendUvarint(buf, uint64(len(r.NamespaceLabels)))
	kb.labels = kb.labels[:0]
	for k := range r.NamespaceLabels {
		kb.labels = append(kb.labels, k)
	}
	slices.Sort(kb.labels)
	for _, k := range kb.labels {
		add(k)
		add(r.NamespaceLabels[k])
	}
	buf = binary.AppendUvarint(buf, uint64(len(r.Content)))
	buf = append(buf, r.Content...)
	guarded := slices.Contains(set.guarded, "name")
	if set.reads.has("name") && !guarded {
		buf = append(buf, 'n')
		buf = binary.AppendUvarint(buf, uint64(len(r.Name)))
		buf = append(buf, r.Name...)
	}
	k := cacheKey{base: sha256.Sum256(buf)}
	k.full = k.base
	if guarded {
		// The full key hashes the base's digest and the name, not the
		// content again: two full keys are alike only if their bases and
		// their names are.
		buf = append(append(buf[:0], k.base[:]...), 'g')
		buf = binary.AppendUvarint(buf, uint64(len(r.Name)))
		buf = append(buf, r.Name...)
		k.full = sha256.Sum256(buf)
	}
	if cap(buf) <= 64<<10 {
		kb.buf = buf
	}
	return k
}

// keyBuffer is the scratch space of one raw key.
type keyBuffer struct {
	buf    []byte
	labels []string
}

var keyBuffers = sync.Pool{New: func() any { return &keyBuffer{buf: make([]byte, 0, 4096)} }}

// Recall answers a review from the cache by its bytes alone, when the
// cache holds a decision for a review the same in everything the policies
// of set can read, and set is the engine's current one: the decision
// Evaluate would return, told to the Observer as cached. It reports false
// when there is no cache, the set is another, a policy that applies may
// read the raw objects, or no decision is cached (a first review, or one
// whose decision was made before its raw key was known), and for a
// decision with a denial; nothing is counted then. The caller then
// takes the plain path, whose Evaluate remembers the decision under the
// raw key too when Review.Raw is set.
func (e *Engine) Recall(set *Set, r *RawReview) (Decision, bool) {
	if e.cache == nil || set != e.set.Load() {
		return Decision{}, false
	}
	for _, c := range set.all() {
		if !c.cacheable() && c.match.matches(r.Kind, r.Namespace, r.NamespaceLabels) {
			return Decision{}, false
		}
	}
	// Only an allowed decision is given: the caller applies exceptions and
	// ratcheting to a denial with the decoded object, so a denial takes the
	// plain path (and finds the decision under its view's key).
	d, _, ok := e.cache.find(set, r.key(set))
	if !ok || !d.Allowed() || d.Ratchetable() {
		return Decision{}, false
	}
	e.cache.hits.Add(1)
	e.cache.recalled.Add(1)
	if e.observer != nil {
		for k := range d.Results {
			e.observer.Cached(d.Results[k].Policy, d.Results[k].Decision())
		}
	}
	return d, true
}

// Caches reports whether the engine has a DecisionCache.
func (e *Engine) Caches() bool { return e.cache != nil }
