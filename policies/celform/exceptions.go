package celform

import (
	"cmp"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"

	policyv1 "github.com/modelgate/modelgate/api/policy/v1"
)

// Names reports whether ex names the WorkloadPolicy called policy:
// spec.policies lists it and spec.policySource is WorkloadPolicy (or
// unset).
func Names(ex *policyv1.WorkloadPolicyException, policy string) bool {
	return (ex.Spec.PolicySource == "" || ex.Spec.PolicySource == policyv1.PolicySourceWorkloadPolicy) && slices.Contains(ex.Spec.Policies, policy)
}

// ExceptionsFor are the exceptions of es that name the WorkloadPolicy
// called policy (Names), sorted by namespace and name. Expiry is the
// caller's: it passes those in force.
func ExceptionsFor(policy string, es []policyv1.WorkloadPolicyException) []policyv1.WorkloadPolicyException {
	var out []policyv1.WorkloadPolicyException
	for i := range es {
		if Names(&es[i], policy) {
			out = append(out, es[i])
		}
	}
	slices.SortFunc(out, func(a, b policyv1.WorkloadPolicyException) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	return out
}

// Identities and labels of the object, as validators.SubjectOf derives
// them (TestExceptedAsSubjectOf holds the two together).
const (
	// subjectIdentities is the object's [kind, name], then those of the
	// workload its controller belongs to: a Pod's Deployment (its
	// ReplicaSet's name less "-" and its pod-template-hash label), its
	// StatefulSet, its Job and that Job's CronJob (the Job's name less the
	// "-<minutes>" a CronJob adds), a Job's CronJob. The API server allows
	// one controller reference at most.
	subjectIdentities = `[[object.kind, object.?metadata.?name.orValue('')]] +
  object.?metadata.?ownerReferences.orValue([]).filter(r, r.?controller.orValue(false)).map(c,
    object.kind == 'Pod' && c.kind == 'ReplicaSet' ?
      (object.?metadata.?labels[?'pod-template-hash'].orValue('') != '' && c.name.endsWith('-' + object.metadata.labels['pod-template-hash']) ?
        [['Deployment', c.name.substring(0, size(c.name) - size(object.metadata.labels['pod-template-hash']) - 1)]] : []) :
    object.kind == 'Pod' && c.kind == 'StatefulSet' ? [['StatefulSet', string(c.name)]] :
    object.kind == 'Pod' && c.kind == 'Job' ?
      [['Job', string(c.name)]] + (c.name.matches('-[0-9]{8,}$') ? [['CronJob', c.name.substring(0, c.name.lastIndexOf('-'))]] : []) :
    object.kind == 'Job' && c.kind == 'CronJob' ? [['CronJob', string(c.name)]] : []).flatten()`
	// subjectLabels are the object's labels, then its pod template's
	// (each dyn: the object's are typed where the API server knows its
	// schema, the template's read through variables.podMeta are not).
	subjectLabels = `object.kind in ['Deployment', 'StatefulSet', 'Job', 'CronJob'] ?
  [dyn(object.?metadata.?labels.orValue({})), dyn(variables.podMeta.?labels.orValue({}))] : [dyn(object.?metadata.?labels.orValue({}))]`
)

// excepted is variables.excepted's expression: whether one of es covers
// the object, as policies.Exception.matches decides: in the exception's
// namespace, an identity of the object of its kinds and names, labels of
// the object or its pod template its selector matches. Every value an
// exception holds is a quoted literal. An exception whose selector does
// not parse applies nowhere, as modelgate reads it (validators.ExceptionOf).
func excepted(es []policyv1.WorkloadPolicyException) string {
	var terms []string
	for i := range es {
		if t, ok := exceptionTerm(&es[i]); ok {
			terms = append(terms, t)
		}
	}
	if len(terms) == 0 {
		return "false"
	}
	// A list of one binds a name to a value (the API server's CEL has no
	// cel.bind).
	return "[" + indent(subjectIdentities) + "].exists(ids,\n[" + indent(subjectLabels) + "].exists(ls,\n  " +
		strings.Join(terms, " ||\n  ") + "))"
}

// exceptionTerm is whether e covers the object, with ids and ls its
// identities and label sets; false when e applies nowhere.
func exceptionTerm(e *policyv1.WorkloadPolicyException) (string, bool) {
	parts := []string{"request.namespace == " + quote(e.Namespace)}
	var id []string
	if len(e.Spec.Match.Kinds) > 0 {
		id = append(id, "id[0] in "+stringList(e.Spec.Match.Kinds))
	}
	if len(e.Spec.Match.Names) > 0 {
		id = append(id, "id[1] in "+stringList(e.Spec.Match.Names))
	}
	if len(id) > 0 {
		parts = append(parts, "ids.exists(id, "+strings.Join(id, " && ")+")")
	}
	if ls := e.Spec.Match.LabelSelector; ls != nil {
		sel, ok := selectorTerm(ls)
		if !ok {
			return "", false
		}
		if sel != "" {
			parts = append(parts, "ls.exists(l, "+sel+")")
		}
	}
	return "(" + strings.Join(parts, " && ") + ")", true
}

// selectorTerm is ls over the labels l, as the label selector modelgate
// parses it (metav1.LabelSelectorAsSelector: its requirements sorted by
// key, their values sorted); "" when it selects everything, false when it
// does not parse.
func selectorTerm(ls *metav1.LabelSelector) (string, bool) {
	sel, err := metav1.LabelSelectorAsSelector(ls)
	if err != nil {
		return "", false
	}
	reqs, _ := sel.Requirements()
	out := make([]string, 0, len(reqs))
	for _, r := range reqs {
		t, ok := requirementTerm(r)
		if !ok {
			return "", false
		}
		out = append(out, t)
	}
	return strings.Join(out, " && "), true
}

// requirementTerm is one requirement of a label selector over l.
func requirementTerm(r labels.Requirement) (string, bool) {
	k := quote(r.Key())
	has := k + " in l"
	switch r.Operator() {
	case selection.Exists:
		return has, true
	case selection.DoesNotExist:
		return "!(" + has + ")", true
	case selection.Equals, selection.DoubleEquals, selection.In:
		return "(" + has + " && l[" + k + "] in " + stringList(r.ValuesUnsorted()) + ")", true
	case selection.NotEquals, selection.NotIn:
		return "!(" + has + " && l[" + k + "] in " + stringList(r.ValuesUnsorted()) + ")", true
	}
	return "", false
}

// stringList is vs, sorted and without duplicates, as a CEL list of
// quoted strings.
func stringList(vs []string) string {
	s := slices.Sorted(slices.Values(vs))
	s = slices.Compact(s)
	q := make([]string, len(s))
	for i, v := range s {
		q[i] = quote(v)
	}
	return "[" + strings.Join(q, ", ") + "]"
}
