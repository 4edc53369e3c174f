package mutators

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// releaseGPU removes the GPU parts an earlier pass created (as the previous
// record names them) that are not in keep, the parts this pass sets. It
// reports whether the spec changed.
func releaseGPU(t *Target, in *Input, keep []string) bool {
	spec := t.PodSpec
	changed := false
	for _, kind := range []string{partLimits, partRequests} {
		for _, rest := range in.Previous.ownedOf(kind) {
			if slices.Contains(keep, part(kind, rest)) {
				continue
			}
			container, quantity, _ := strings.Cut(rest, "/")
			name, value, _ := strings.Cut(quantity, "=")
			c := containerNamed(spec, container)
			if c == nil {
				continue
			}
			l := &c.Resources.Limits
			if kind == partRequests {
				l = &c.Resources.Requests
			}
			changed = dropQuantity(l, corev1.ResourceName(name), value) || changed
		}
	}
	for _, rest := range in.Previous.ownedOf(partNodeAffinity) {
		if slices.Contains(keep, part(partNodeAffinity, rest)) {
			continue
		}
		op, key, _ := strings.Cut(rest, "/")
		changed = dropRequirement(spec, corev1.NodeSelectorOperator(op), key) || changed
	}
	for _, rest := range in.Previous.ownedOf(partToleration) {
		if slices.Contains(keep, part(partToleration, rest)) {
			continue
		}
		effect, key, _ := strings.Cut(rest, "/")
		if i := slices.IndexFunc(spec.Tolerations, isGPUToleration(key, corev1.TaintEffect(effect))); i >= 0 {
			spec.Tolerations = deleteAt(spec.Tolerations, i)
			changed = true
		}
	}
	return changed
}

// dropQuantity deletes l[name] when it still equals value: a quantity the
// user changed since is theirs. An emptied list becomes nil.
func dropQuantity(l *corev1.ResourceList, name corev1.ResourceName, value string) bool {
	want, err := resource.ParseQuantity(value)
	cur, ok := (*l)[name]
	if err != nil || !ok || cur.Cmp(want) != 0 {
		return false
	}
	delete(*l, name)
	if len(*l) == 0 {
		*l = nil
	}
	return true
}

// dropRequirement removes the requirements with the key and operator from
// every term of the required node affinity. A term that held nothing else
// goes (it was modelgate's, or matched no node once emptied), and an
// affinity left with nothing in it goes too. It reports whether the spec
// changed.
func dropRequirement(spec *corev1.PodSpec, op corev1.NodeSelectorOperator, key string) bool {
	a := spec.Affinity
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return false
	}
	sel := a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution
	match := func(r corev1.NodeSelectorRequirement) bool { return r.Key == key && r.Operator == op }
	changed := false
	terms := sel.NodeSelectorTerms[:0:0]
	for _, term := range sel.NodeSelectorTerms {
		if !slices.ContainsFunc(term.MatchExpressions, match) {
			terms = append(terms, term)
			continue
		}
		changed = true
		term.MatchExpressions = slices.DeleteFunc(slices.Clone(term.MatchExpressions), match)
		if len(term.MatchExpressions) == 0 {
			term.MatchExpressions = nil
			if len(term.MatchFields) == 0 {
				continue
			}
		}
		terms = append(terms, term)
	}
	if !changed {
		return false
	}
	sel.NodeSelectorTerms = terms
	if len(terms) == 0 {
		a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution = nil
	}
	if a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil && len(a.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution) == 0 {
		a.NodeAffinity = nil
	}
	if a.NodeAffinity == nil && a.PodAffinity == nil && a.PodAntiAffinity == nil {
		spec.Affinity = nil
	}
	return true
}
