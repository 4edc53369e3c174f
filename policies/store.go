package policies

import (
	"fmt"
	"maps"
	"slices"
	"sync"
)

// Store merges the policies of several sources (a directory, the
// WorkloadPolicy resources, ...) and swaps a new Set into its Engine after
// every change. A policy's identity is (source, name): two sources may use
// the same name. Store is safe for concurrent use.
type Store struct {
	engine  *Engine
	mu      sync.Mutex
	sources map[string]map[string]*Compiled
}

// NewStore returns an empty Store feeding e.
func NewStore(e *Engine) *Store {
	return &Store{engine: e, sources: map[string]map[string]*Compiled{}}
}

// Replace makes cs the whole of source's policies; an empty cs removes
// them all. Every policy must come from source and names must be unique;
// otherwise nothing changes.
func (s *Store) Replace(source string, cs []*Compiled) error {
	byName := make(map[string]*Compiled, len(cs))
	for _, c := range cs {
		if c == nil {
			continue
		}
		if c.source != source {
			return fmt.Errorf("policy %q has source %q, not %q", c.name, c.source, source)
		}
		if _, dup := byName[c.name]; dup {
			return fmt.Errorf("source %q has two policies named %q", source, c.name)
		}
		byName[c.name] = c
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(byName) == 0 {
		delete(s.sources, source)
	} else {
		s.sources[source] = byName
	}
	s.publish()
	return nil
}

// Upsert adds each of cs, or replaces the policy of the same source and
// name, and swaps the new Set in once: a replica loading its policies at
// start puts them in force together, not one Set (and one background
// preparation of the combined query) per policy.
func (s *Store) Upsert(cs ...*Compiled) {
	if len(cs) == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range cs {
		m := s.sources[c.source]
		if m == nil {
			m = map[string]*Compiled{}
			s.sources[c.source] = m
		}
		m[c.name] = c
	}
	s.publish()
}

// Delete removes the policy of the source and name, if present.
func (s *Store) Delete(source, name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.sources[source]
	if _, ok := m[name]; !ok {
		return
	}
	delete(m, name)
	if len(m) == 0 {
		delete(s.sources, source)
	}
	s.publish()
}

// publish swaps a Set of every policy into the engine; s.mu is held, so
// Sets are published in the order of the changes.
func (s *Store) publish() {
	var all []*Compiled
	for _, m := range s.sources {
		all = slices.AppendSeq(all, maps.Values(m))
	}
	s.engine.Swap(NewSet(all...))
}
