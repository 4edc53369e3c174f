package mutators

import (
	"errors"
	"fmt"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
// The previous record is the object's, or the old object's when the update
// dropped it (see PreviousRecord).
//
// On error the target may be partly changed; callers must discard it.
func (c Chain) Apply(t *Target, in *Input) (Result, error) {
	prev := PreviousRecord(t, in.Old)
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

// Revert undoes an earlier injection of an object that no longer opts in:
// every mutator runs with no settings, which makes it remove the parts the
// previous record says modelgate created, and the Injected record goes.
// Owner metadata is not a chain part here: the caller passes the chain of
// mutators to revert. It returns the names of the mutators that changed
// something.
//
// On error the target may be partly changed; callers must discard it.
func (c Chain) Revert(t *Target, in *Input) ([]string, error) {
	in.Previous = PreviousRecord(t, in.Old)
	in.Settings = annotations.Settings{}
	in.Container = NoContainer
	t.owns = nil
	changed, err := c.Run(t, in)
	if err != nil {
		return nil, err
	}
	if len(t.owns) > 0 {
		return nil, fmt.Errorf("%w: %v", errStillOwned, t.owns)
	}
	for _, meta := range t.Metas() {
		setAnnotation(meta, annotations.Injected, "")
	}
	return changed, nil
}

var errStillOwned = errors.New("reverting left parts owned")

// PreviousRecord is the Injected record the target carries, or, when it
// carries none, the one on old (the previous object's metadata on UPDATE,
// nil on CREATE): an update that drops the record, a kubectl replace of a
// manifest without it say, must not make modelgate take its own parts for
// the user's.
func PreviousRecord(t *Target, old *metav1.ObjectMeta) Record {
	if r, ok := ParseRecord(t.Object.Annotations[annotations.Injected]); ok {
		return r
	}
	if old != nil {
		if r, ok := ParseRecord(old.Annotations[annotations.Injected]); ok {
			return r
		}
	}
	return Record{}
}

// HasRecord reports whether the target or old carries an Injected record.
func HasRecord(t *Target, old *metav1.ObjectMeta) bool {
	_, ok := ParseRecord(t.Object.Annotations[annotations.Injected])
	if !ok && old != nil {
		_, ok = ParseRecord(old.Annotations[annotations.Injected])
	}
	return ok
}
