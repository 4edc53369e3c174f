package mutators

import (
	"fmt"
	"slices"

	"github.com/modelgate/modelgate/api/annotations"
)

// Chain is an ordered list of mutators run as one pass.
type Chain []Mutator

// Result is what a pass of a Chain did.
type Result struct {
	// Changed lists the mutators that changed the target in this pass.
	Changed []string
	// Record is the Injected record written to the target.
	Record Record
}

// Names returns the mutators' names in chain order.
func (c Chain) Names() []string {
	out := make([]string, len(c))
	for i, m := range c {
		out[i] = m.Name()
	}
	return out
}

// Run runs every mutator in order and returns the names of those that
// changed the target. It writes no Injected record.
func (c Chain) Run(t *Target, in *Input) ([]string, error) {
	var changed []string
	for _, m := range c {
		ok, err := m.Mutate(t, in)
		if err != nil {
			return nil, fmt.Errorf("mutator %s: %w", m.Name(), err)
		}
		if ok {
			changed = append(changed, m.Name())
		}
	}
	return changed, nil
}

// Apply runs every mutator in order, then writes the Injected record to the
// object and its templates. The record lists the mutators that changed
// something in this pass or in an earlier one (as the object's previous
// record says), so a second pass over an injected object, or a Pod stamped
// from an injected template, writes the same record and changes nothing.
//
// On error the target may be partly changed; callers must discard it.
func (c Chain) Apply(t *Target, in *Input) (Result, error) {
	prev, _ := ParseRecord(t.Object.Annotations[annotations.Injected])
	in.Previous = prev
	// The record lists what this pass owns: parts an earlier pass over the
	// same Target owned and this one removed are no longer modelgate's.
	t.owns = nil
	changed, err := c.Run(t, in)
	if err != nil {
		return Result{}, err
	}
	res := Result{Changed: changed}
	applied := make([]string, 0, len(c))
	for _, m := range c {
		if slices.Contains(changed, m.Name()) || slices.Contains(prev.Mutators, m.Name()) {
			applied = append(applied, m.Name())
		}
	}
	if len(applied) == 0 {
		return res, nil
	}
	owns := slices.Clone(t.owns)
	slices.Sort(owns)
	res.Record = Record{Mutators: applied, Settings: in.Settings.Hash(), Owns: owns}
	value := res.Record.String()
	for _, meta := range t.Metas() {
		setAnnotation(meta, annotations.Injected, value)
	}
	return res, nil
}
