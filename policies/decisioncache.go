package policies

import (
	"container/list"
	"crypto/sha256"
	"encoding/json"
	"maps"
	"slices"
	"sync"
	"sync/atomic"

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
}

// cacheEntry is one decision and its estimated size.
type cacheEntry struct {
	key  [sha256.Size]byte
	d    Decision
	size int64
}

// NewDecisionCache returns a cache of at most maxBytes (estimated).
func NewDecisionCache(maxBytes int64) *DecisionCache {
	return &DecisionCache{max: maxBytes, lru: list.New(), byKey: map[[sha256.Size]byte]*list.Element{}}
}

// CacheStats are a DecisionCache's counters and size.
type CacheStats struct {
	Hits, Misses, Evictions uint64
	Entries                 int
	Bytes                   int64
}

// Stats returns the counters and the current size.
func (c *DecisionCache) Stats() CacheStats {
	c.mu.Lock()
	n, b := c.lru.Len(), c.bytes
	c.mu.Unlock()
	return CacheStats{Hits: c.hits.Load(), Misses: c.misses.Load(), Evictions: c.evictions.Load(), Entries: n, Bytes: b}
}

// get returns a copy of the decision cached for key under set.
func (c *DecisionCache) get(set *Set, key [sha256.Size]byte) (Decision, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.set != set {
		c.reset(set)
	}
	el, ok := c.byKey[key]
	if !ok {
		c.misses.Add(1)
		return Decision{}, false
	}
	c.lru.MoveToFront(el)
	c.hits.Add(1)
	return el.Value.(*cacheEntry).d.clone(), true
}

// put caches a copy of d for key under set, evicting the least recently
// used entries beyond the bound. A decision larger than the bound is not
// kept.
func (c *DecisionCache) put(set *Set, key [sha256.Size]byte, d Decision) {
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
	if el, ok := c.byKey[key]; ok {
		c.lru.MoveToFront(el)
		return
	}
	c.byKey[key] = c.lru.PushFront(&cacheEntry{key: key, d: d, size: size})
	c.bytes += size
	for c.bytes > c.max {
		last := c.lru.Back()
		e := last.Value.(*cacheEntry)
		c.lru.Remove(last)
		delete(c.byKey, e.key)
		c.bytes -= e.size
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

// entryOverhead is what an entry costs besides its messages: the list
// element, the map slot, the key and the slices' headers.
const entryOverhead = 256

// decisionSize estimates the bytes a cached decision holds.
func decisionSize(d Decision) int64 {
	n := int64(entryOverhead)
	for i := range d.Results {
		r := &d.Results[i]
		n += 128 + int64(len(r.Policy)+len(r.Source))
		for _, vs := range [][]Violation{r.Deny, r.Warn} {
			for _, v := range vs {
				n += 48 + int64(len(v.Msg))
				if v.Details != nil {
					b, err := json.Marshal(v.Details)
					if err != nil {
						return 1 << 62 // not kept
					}
					n += 2 * int64(len(b))
				}
			}
		}
	}
	return n
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

// reviewKey is the digest of what the policies of a review can read
// besides the Set: the kind, the namespace and its labels, and the partial
// input.workload. It reports false for a workload it cannot print, which
// is then not cached.
func reviewKey(r *Review) ([sha256.Size]byte, bool) {
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
	buf = append(buf, 1)
	if r.Workload != nil {
		var err error
		if buf, err = appendValue(buf, r.Workload); err != nil {
			return [sha256.Size]byte{}, false
		}
	}
	return sha256.Sum256(buf), true
}

// appendValue appends the value's canonical text: OPA prints objects and
// sets in sorted order.
func appendValue(buf []byte, v ast.Value) ([]byte, error) {
	if t, ok := v.(interface{ AppendText([]byte) ([]byte, error) }); ok {
		return t.AppendText(buf)
	}
	return append(buf, v.String()...), nil
}
