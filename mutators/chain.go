package mutators

import (
	"errors"
	"fmt"
	"slices"
	"strings"

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
// object and its templates and seals their reserved metadata. The record lists the mutators that changed
// something in this pass or in an earlier one (as the object's previous
// record says), so a second pass over an injected object, or a Pod stamped
// from an injected template, writes the same record and changes nothing.
//
// The previous record is the object's, or the old object's when the update
// dropped it (see PreviousRecord).
//
// On error the target may be partly changed; callers must discard it.
func (c Chain) Apply(t *Target, in *Input) (Result, error) {
	return c.ApplyAfter(t, in, PreviousRecord(t, in))
}

// ApplyAfter is Apply for a caller that has read the previous record
// already: prev must be PreviousRecord(t, in), read with nothing changed
// since (reading it parses the record and verifies its seal).
func (c Chain) ApplyAfter(t *Target, in *Input, prev Record) (Result, error) {
	in.Previous = prev
	// The record lists what this pass owns: parts an earlier pass over the
	// same Target owned and this one removed are no longer modelgate's.
	t.owns, t.gpuClaim = nil, nil
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
	if len(applied) > 0 {
		owns := slices.Clone(t.owns)
		slices.Sort(owns)
		res.Record = Record{Mutators: applied, Settings: in.Settings.Hash(), Owns: owns, GPUClaim: t.gpuClaim}
	}
	// Always written, so that a record modelgate did not make (a forged
	// one, which PreviousRecord ignored) never stays to be sealed.
	SetRecord(t, res.Record)
	SealMetadata(t, in)
	return res, nil
}

// SetRecord writes r as the Injected record of the object and its
// templates, or removes the record when r is the zero Record.
func SetRecord(t *Target, r Record) {
	value := ""
	if len(r.Mutators) > 0 {
		value = r.String()
	}
	for _, meta := range t.Metas() {
		setAnnotation(meta, annotations.Injected, value)
	}
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
	in.Previous = PreviousRecord(t, in)
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
	SetRecord(t, Record{})
	SealMetadata(t, in)
	return changed, nil
}

var errStillOwned = errors.New("reverting left parts owned")

// PreviousRecord is the Injected record modelgate can prove it wrote: the
// target's own when its seal verifies (a reinvocation, a Pod a controller
// stamped from a sealed template), else the old object's on UPDATE (it is
// what the API server stored, and modelgate admitted it). An update that
// drops the record, a kubectl replace of a manifest without it say, must
// not make modelgate take its own parts for the user's; a record a user
// wrote by hand must not make modelgate take the user's parts for its own.
func PreviousRecord(t *Target, in *Input) Record {
	r, _ := previousRecord(t, in)
	return r
}

// HasRecord reports whether PreviousRecord finds a record.
func HasRecord(t *Target, in *Input) bool {
	_, ok := previousRecord(t, in)
	return ok
}

func previousRecord(t *Target, in *Input) (Record, bool) {
	r, ok := ParseRecord(t.Object.Annotations[annotations.Injected])
	if ok && in.sealed(t.Object) {
		return r, true
	}
	if in.Old != nil {
		if r, ok := ParseRecord(in.Old.Annotations[annotations.Injected]); ok {
			return r, true
		}
	}
	if ok {
		// An unsealed record (a template an older version injected, a
		// manifest copied from another namespace) is believed only for
		// the parts whose names are modelgate's anyway: its loader, its
		// volume and the mounts of it. A user cannot make modelgate take
		// anything of theirs with it, and modelgate replaces its own parts
		// instead of refusing the reserved names.
		return Record{Owns: slices.DeleteFunc(r.Owns, func(p string) bool { return !reservedPart(p) })}, false
	}
	return Record{}, false
}

// reservedPart reports whether a part's name is reserved to modelgate: the
// loader init container, the model volume and a mount of it.
func reservedPart(p string) bool {
	if p == part(partInitContainer, LoaderContainerName) || p == part(partVolume, ModelVolumeName) {
		return true
	}
	rest, ok := strings.CutPrefix(p, partVolumeMount+"/")
	return ok && strings.HasSuffix(rest, "/"+ModelVolumeName) && strings.Count(rest, "/") == 1
}
