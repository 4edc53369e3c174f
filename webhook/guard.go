package webhook

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/modelgate/modelgate/api/annotations"
	"github.com/modelgate/modelgate/mutators"
	"github.com/modelgate/modelgate/webhook/decode"
)

// guardReserved protects modelgate's reserved metadata (the owner and team
// labels, the owner-full annotation) on objects that did not opt in, where
// modelgate may not patch: it rejects a CREATE that sets them by hand and
// an UPDATE that changes them. Trusted controllers copying templates are
// exempt. old is nil on CREATE; otherwise old.target.Metas() lines up with
// cur's.
func guardReserved(cur, old *decode.Object, r mutators.Requester) field.ErrorList {
	if r.Trusted {
		return nil
	}
	var errs field.ErrorList
	metas := cur.Target.Metas()
	var olds []*metav1.ObjectMeta
	if old != nil {
		olds = old.Target.Metas()
	}
	for i, m := range metas {
		var prev *metav1.ObjectMeta
		if i < len(olds) {
			prev = olds[i]
		}
		errs = append(errs, guardKeys(cur.Paths[i].Child("labels"), annotations.ReservedLabels,
			m.Labels, labelsOf(prev), old != nil)...)
		errs = append(errs, guardKeys(cur.Paths[i].Child("annotations"), annotations.ReservedAnnotations,
			m.Annotations, annotationsOf(prev), old != nil)...)
	}
	return errs
}

func guardKeys(p *field.Path, keys []string, cur, prev map[string]string, update bool) field.ErrorList {
	var errs field.ErrorList
	for _, k := range keys {
		v, has := cur[k]
		pv, had := prev[k]
		switch {
		case !update && has:
			errs = append(errs, field.Forbidden(p.Key(k), fmt.Sprintf(
				"only modelgate sets this key; remove it, or opt in with %s: \"true\" so that modelgate sets it",
				annotations.Inject)))
		case update && (has != had || v != pv):
			errs = append(errs, field.Forbidden(p.Key(k), fmt.Sprintf(
				"is set by modelgate and cannot be changed (was %q)", pv)))
		}
	}
	return errs
}

func labelsOf(m *metav1.ObjectMeta) map[string]string {
	if m == nil {
		return nil
	}
	return m.Labels
}

func annotationsOf(m *metav1.ObjectMeta) map[string]string {
	if m == nil {
		return nil
	}
	return m.Annotations
}
