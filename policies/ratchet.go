package policies

// RatchetedPrefix leads the warning a ratcheted denial becomes:
// "[policy] existing violation, not introduced by this update: message".
const RatchetedPrefix = "existing violation, not introduced by this update: "

// Ratchetable reports whether d, the decision on an UPDATE's new object,
// has a denial that Ratchet could lift: a deny message of a policy that
// denies and ratchets. Only then is the old object worth judging.
func (d Decision) Ratchetable() bool {
	for i := range d.Results {
		if d.Results[i].ratchetable() {
			return true
		}
	}
	return false
}

// Ratcheted reports whether Ratchet lifted a denial of d.
func (d Decision) Ratcheted() bool {
	for i := range d.Results {
		if len(d.Results[i].Ratcheted) > 0 {
			return true
		}
	}
	return false
}

func (r *Result) ratchetable() bool {
	return r.Ratchet && r.Err == nil && r.Action == ActionDeny && len(r.Deny) > 0
}

// RatchetSet is the part of set that could lift a denial of d: the
// policies that ratchet and denied. The old object is judged by these
// only, so that a slow policy that did not deny is not evaluated twice.
func (d Decision) RatchetSet(set *Set) *Set {
	want := map[[2]string]bool{}
	for i := range d.Results {
		if r := &d.Results[i]; r.ratchetable() {
			want[[2]string{r.Source, r.Policy}] = true
		}
	}
	var keep []*Compiled
	for _, c := range set.all() {
		if want[[2]string{c.source, c.name}] {
			keep = append(keep, c)
		}
	}
	return NewSet(keep...)
}

// Ratchet lifts the denials of an UPDATE that the old object had too, as
// Kubernetes ratchets CRD validation (KEP-4008): each deny message of a
// ratcheting policy whose key the same policy also gave the old object
// moves from Deny to Ratcheted. A violation's key is its policy's source
// and name and its message as written: an UPDATE cannot change the
// object's name, so a message naming it is the same on both sides, and a
// new violation that differs from an old one only where the name appears
// is a new one. A new violation, one of another policy, or any under a
// policy with NoRatchet, still denies. It returns how many denials it
// lifted.
func (d *Decision) Ratchet(old Decision) int {
	had := map[string]bool{}
	for i := range old.Results {
		o := &old.Results[i]
		for _, v := range o.Deny {
			had[violationKey(o.Source, o.Policy, v.Msg)] = true
		}
	}
	lifted := 0
	for i := range d.Results {
		r := &d.Results[i]
		if !r.Ratchet || r.Err != nil || r.Action != ActionDeny {
			continue
		}
		kept := r.Deny[:0:0]
		for _, v := range r.Deny {
			if had[violationKey(r.Source, r.Policy, v.Msg)] {
				r.Ratcheted = append(r.Ratcheted, v)
				lifted++
				continue
			}
			kept = append(kept, v)
		}
		r.Deny = kept
	}
	return lifted
}

// violationKey identifies a violation across the old and new object.
func violationKey(source, policy, msg string) string {
	return source + "\x00" + policy + "\x00" + msg
}
