package policies

import (
	"container/list"
	"crypto/sha256"
	"encoding/json"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/open-policy-agent/opa/v1/ast"
)

// DecisionCache remembers the decisions of a Set for reviews that are the
// same in everything its policies can read, so that a repeat (a
// Deployment's N identical Pods, a GitOps re-apply) is answered without
// evaluating.
//
// It is exact because a policy is a pure function of what it is given:
// the builtins a policy may call read no clock, network or randomness
// (allowedBuiltins refuses time.now_ns, http.send, rand.* and opa.runtime),
// the parameters belong to the Set, and input.workload holds only the
// top-level keys some policy of the Set names (Set.reads). The key is a
// digest of the kind, the namespace and its labels (which select the
// policies) and of that partial input.workload; a review some policy that
// applies may judge by input.object or input.oldObject is never cached, and
// neither is a decision with an error. A policy that reads a Pod's name
// makes every Pod's review miss, never answer for another Pod.
//
// Entries belong to one Set: the first review of another Set drops them
// all. The cache is bounded by an estimate of its bytes, least recently
// used first out. Decisions are copied in and out: the caller's Ratchet and
// Except never touch a cached one.
type DecisionCache struct {
	max int64

	mu    sync.Mutex
	set   *Set
	lru   *list.List // of *cacheEntry, most recent first
	byKey map[[sha256.Size]byte]*list.Element
	bytes int64

	hits, misses, evictions atomic.Uint64
	// recalled counts the hits Engine.Recall found by a review's bytes.
	recalled atomic.Uint64
}

// cacheEntry is one decision and its estimated size, or the mark that the
// decisions of a base key read a guarded key (readsGuarded, no decision).
type cacheEntry struct {
	key          [sha256.Size]byte
	d            Decision
	readsGuarded bool
	size         int64
}

// NewDecisionCache returns a cache of at most maxBytes (estimated).
func NewDecisionCache(maxBytes int64) *DecisionCache {
	return &DecisionCache{max: maxBytes, lru: list.New(), byKey: map[[sha256.Size]byte]*list.Element{}}
}

// CacheStats are a DecisionCache's counters and size. Recalled counts
// the Hits found from a review's bytes, before decoding (Engine.Recall).
type CacheStats struct {
	Hits, Misses, Evictions, Recalled uint64
	Entries                           int
	Bytes, MaxBytes                   int64
}

// Stats returns the counters and the current size.
func (c *DecisionCache) Stats() CacheStats {
	c.mu.Lock()
	n, b := c.lru.Len(), c.bytes
	c.mu.Unlock()
	return CacheStats{Hits: c.hits.Load(), Misses: c.misses.Load(), Evictions: c.evictions.Load(), Recalled: c.recalled.Load(),
		Entries: n, Bytes: b, MaxBytes: c.max}
}

// get returns a copy of the decision cached for k under set, counting a
// hit or a miss (find).
func (c *DecisionCache) get(set *Set, k cacheKey) (d Decision, readsGuarded, ok bool) {
	if d, readsGuarded, ok = c.find(set, k); ok {
		c.hits.Add(1)
	} else {
		c.misses.Add(1)
	}
	return d, readsGuarded, ok
}

// find returns a copy of the decision cached for k under set, counting
// nothing: the one cached under k.base, or, when the decisions of k.base
// read a guarded key (readsGuarded), the one under k.full.
func (c *DecisionCache) find(set *Set, k cacheKey) (Decision, bool, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.set != set {
		c.reset(set)
	}
	e := c.lookup(k.base)
	readsGuarded := e != nil && e.readsGuarded
	if readsGuarded {
		e = c.lookup(k.full)
	}
	if e == nil {
		return Decision{}, false, false
	}
	return e.d.clone(), readsGuarded, true
}

// lookup returns the entry of key, most recently used now; nil when there
// is none. The caller holds mu.
func (c *DecisionCache) lookup(key [sha256.Size]byte) *cacheEntry {
	el, ok := c.byKey[key]
	if !ok {
		return nil
	}
	c.lru.MoveToFront(el)
	return el.Value.(*cacheEntry)
}

// put caches a copy of d under set for each of keys (a review's view key
// and its raw key share one copy; each entry counts its whole size, so the
// bound holds whichever goes first): under k.base when its evaluation read
// no guarded key, else under k.full, with k.base marked as reading them.
// The least recently used entries beyond the bound go; a decision larger
// than the bound is not kept.
func (c *DecisionCache) put(set *Set, d Decision, readGuarded bool, keys ...cacheKey) {
	size := decisionSize(d)
	if size > c.max {
		return
	}
	d = d.clone()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.set != set {
		c.reset(set)
	}
	for _, k := range keys {
		c.putLocked(k, d, size, readGuarded)
	}
}

// putLocked caches d under k. The caller holds mu.
func (c *DecisionCache) putLocked(k cacheKey, d Decision, size int64, readGuarded bool) {
	// By determinism every review of a base key reads a guarded key or
	// none does; should two ever disagree, the base becomes a mark, so
	// that no decision made with a name is given for another name.
	el := c.byKey[k.base]
	marked := el != nil && el.Value.(*cacheEntry).readsGuarded
	if !readGuarded && !marked {
		c.insert(&cacheEntry{key: k.base, d: d, size: size})
		return
	}
	if el != nil && !marked {
		c.remove(el)
	}
	c.insert(&cacheEntry{key: k.base, readsGuarded: true, size: entryOverhead})
	c.insert(&cacheEntry{key: k.full, d: d, size: size})
}

// remove drops an entry. The caller holds mu.
func (c *DecisionCache) remove(el *list.Element) {
	e := el.Value.(*cacheEntry)
	c.lru.Remove(el)
	delete(c.byKey, e.key)
	c.bytes -= e.size
}

// insert adds e unless its key is cached, and evicts beyond the bound. The
// caller holds mu.
func (c *DecisionCache) insert(e *cacheEntry) {
	if el, ok := c.byKey[e.key]; ok {
		c.lru.MoveToFront(el)
		return
	}
	c.byKey[e.key] = c.lru.PushFront(e)
	c.bytes += e.size
	for c.bytes > c.max {
		c.remove(c.lru.Back())
		c.evictions.Add(1)
	}
}

// reset drops every entry and makes them the new set's.
func (c *DecisionCache) reset(set *Set) {
	c.set = set
	c.lru.Init()
	clear(c.byKey)
	c.bytes = 0
}

// entryOverhead is what an entry costs besides its results: the list
// element, the entry, its share of the map, rounded up to match the live
// heap BenchmarkDecisionCacheMemory measures (webhook package).
const entryOverhead = 352

// decisionSize estimates the live heap a cached decision holds: its copy
// of the results and violations (the policies' names are shared with the
// Set, not copied) and the entry around it.
func decisionSize(d Decision) int64 {
	n := int64(entryOverhead) + int64(len(d.Results))*int64(unsafe.Sizeof(Result{}))
	for i := range d.Results {
		r := &d.Results[i]
		for _, vs := range [][]Violation{r.Deny, r.Warn} {
			for _, v := range vs {
				n += int64(unsafe.Sizeof(v)) + int64(len(v.Msg)) + valueSize(v.Details)
			}
		}
	}
	return n
}

// Heap costs of the Go values ast.JSON makes of a message's details, as
// TestDecisionSizeDetails measures them against the live heap: a map's
// header and table, and per item its slot (key and value) and a share of
// the table's spare room; a slice's header and backing array; a string,
// number or bool boxed in an interface. A string's bytes are counted
// though they are often shared with the review's input (a label copied
// into details), so the estimate errs high.
const (
	mapOverhead  = 128
	mapPerItem   = 56
	sliceHeader  = 24
	sliceItem    = 16
	boxedString  = 16
	boxedScalar  = 8
	sizeAllocTop = 16 // rounding of each allocation to its size class
)

// valueSize estimates the live heap held by v, a value ast.JSON returned
// (maps, slices, strings, json.Number, bool, nil), beyond the interface
// holding it.
func valueSize(v any) int64 {
	switch v := v.(type) {
	case nil:
		return 0
	case map[string]any:
		n := int64(mapOverhead + sizeAllocTop)
		for k, x := range v {
			n += mapPerItem + int64(len(k)) + sizeAllocTop + valueSize(x)
		}
		return n
	case []any:
		n := int64(sliceHeader + sizeAllocTop + sliceItem*cap(v))
		for _, x := range v {
			n += valueSize(x)
		}
		return n
	case string:
		return boxedString + int64(len(v))
	case json.Number:
		return boxedString + int64(len(v))
	default:
		return boxedScalar
	}
}

// clone copies the decision's results and their violation slices; the
// violations' details are shared, and nothing changes them.
func (d Decision) clone() Decision {
	if d.Results == nil {
		return d
	}
	out := Decision{Results: slices.Clone(d.Results)}
	for i := range out.Results {
		r := &out.Results[i]
		r.Deny, r.Warn = slices.Clone(r.Deny), slices.Clone(r.Warn)
		r.Ratcheted, r.Excepted = slices.Clone(r.Ratcheted), slices.Clone(r.Excepted)
	}
	return out
}

// cacheable reports whether a decision may be cached: no policy failed.
func (d Decision) cacheable() bool {
	for i := range d.Results {
		if d.Results[i].Err != nil {
			return false
		}
	}
	return true
}

// cacheKey is where a review's decision is cached: base is the digest of
// what the policies of a review can read besides the Set and the guarded
// keys (the kind, the namespace and its labels, the partial
// input.workload); full adds the guarded keys' values.
type cacheKey struct {
	base, full [sha256.Size]byte
}

// reviewKey returns the review's cacheKey under set: what its policies
// may read, with the set's guarded keys left out of the base. A View is
// keyed from its fields (View.AppendKey), without building its value; a
// Workload value by its canonical text. It reports false for a workload
// it cannot print, which is then not cached.
func reviewKey(r *Review, set *Set) (cacheKey, bool) {
	buf := make([]byte, 0, 4096)
	add := func(s string) {
		buf = append(buf, s...)
		buf = append(buf, 0)
	}
	add(r.Kind)
	add(r.Namespace)
	for _, k := range slices.Sorted(maps.Keys(r.NamespaceLabels)) {
		add(k)
		add(r.NamespaceLabels[k])
	}
	guarded := set.guarded
	if r.View != nil {
		buf = append(buf, 'v')
		buf = r.View.AppendKey(buf, func(k string) bool { return set.reads.has(k) && !slices.Contains(guarded, k) })
		k := cacheKey{base: sha256.Sum256(buf)}
		k.full = k.base
		if len(guarded) > 0 {
			buf = append(buf, 'g')
			buf = r.View.AppendKey(buf, func(k string) bool { return slices.Contains(guarded, k) })
			k.full = sha256.Sum256(buf)
		}
		return k, true
	}
	buf = append(buf, 'a')
	var err error
	obj, isObject := r.Workload.(ast.Object)
	if !isObject {
		if r.Workload != nil {
			if buf, err = appendValue(buf, r.Workload); err != nil {
				return cacheKey{}, false
			}
		}
		k := cacheKey{base: sha256.Sum256(buf)}
		k.full = k.base
		return k, true
	}
	// The object's keys in order, the guarded ones apart; each key and
	// value printed in OPA's canonical text, which sorts objects and sets.
	keys := obj.Keys()
	slices.SortFunc(keys, func(a, b *ast.Term) int { return a.Value.Compare(b.Value) })
	var rest []byte
	for _, key := range keys {
		if s, ok := key.Value.(ast.String); ok && slices.Contains(guarded, string(s)) {
			if rest, err = appendItem(rest, key, obj.Get(key)); err != nil {
				return cacheKey{}, false
			}
			continue
		}
		if buf, err = appendItem(buf, key, obj.Get(key)); err != nil {
			return cacheKey{}, false
		}
	}
	// Whether a guarded key is there at all is part of the base: OPA reads
	// a ref before the call that guards it, so an absent key fails the
	// expression without calling it.
	for _, g := range guarded {
		present := byte('-')
		if obj.Get(ast.StringTerm(g)) != nil {
			present = '+'
		}
		buf = append(buf, present)
	}
	k := cacheKey{base: sha256.Sum256(buf)}
	k.full = sha256.Sum256(append(append(buf, 'g'), rest...))
	return k, true
}

// appendItem appends one item of an object: its key and its value, each
// followed by a separator that neither can contain.
func appendItem(buf []byte, key, value *ast.Term) ([]byte, error) {
	var err error
	if buf, err = appendValue(buf, key.Value); err != nil {
		return nil, err
	}
	buf = append(buf, 0)
	if buf, err = appendValue(buf, value.Value); err != nil {
		return nil, err
	}
	return append(buf, 0), nil
}

// appendValue appends the value's canonical text: OPA prints objects and
// sets in sorted order.
func appendValue(buf []byte, v ast.Value) ([]byte, error) {
	if t, ok := v.(interface{ AppendText([]byte) ([]byte, error) }); ok {
		return t.AppendText(buf)
	}
	return append(buf, v.String()...), nil
}
