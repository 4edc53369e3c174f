package policies

import (
	"cmp"
	"slices"
)

// Set is an immutable snapshot of the policies an Engine evaluates, in the
// order of their results: by name, then source.
type Set struct {
	policies     []*Compiled
	needsObjects bool
	reads        reads
	// guarded are the keys of reads every policy reads only through
	// readBuiltin: the DecisionCache keys a decision by them only when an
	// evaluation read them.
	guarded []string
	// combined evaluates the combinable policies in one query.
	combined combined
}

// NewSet makes a Set of the compiled policies; nil entries are ignored.
func NewSet(cs ...*Compiled) *Set {
	s := &Set{policies: make([]*Compiled, 0, len(cs))}
	for _, c := range cs {
		if c == nil {
			continue
		}
		s.policies = append(s.policies, c)
		s.needsObjects = s.needsObjects || c.needsObjects
		s.reads.add(c.reads)
	}
	s.guarded = setGuarded(s.policies, s.reads)
	slices.SortStableFunc(s.policies, func(a, b *Compiled) int {
		return cmp.Or(cmp.Compare(a.name, b.name), cmp.Compare(a.source, b.source))
	})
	return s
}

// Len returns the number of policies; a nil Set has none.
func (s *Set) Len() int {
	if s == nil {
		return 0
	}
	return len(s.policies)
}

// Names returns the policies' names in evaluation order.
func (s *Set) Names() []string {
	out := make([]string, 0, s.Len())
	for _, c := range s.all() {
		out = append(out, c.name)
	}
	return out
}

// Has reports whether the Set holds the policy of that source and name.
func (s *Set) Has(source, name string) bool {
	return slices.ContainsFunc(s.all(), func(c *Compiled) bool { return c.source == source && c.name == name })
}

// ReadsWorkloadKey reports whether any policy may read the key of
// input.workload.
func (s *Set) ReadsWorkloadKey(key string) bool { return s != nil && s.reads.has(key) }

// NeedsObjects reports whether any policy may read input.object or
// input.oldObject.
func (s *Set) NeedsObjects() bool { return s != nil && s.needsObjects }

func (s *Set) all() []*Compiled {
	if s == nil {
		return nil
	}
	return s.policies
}
