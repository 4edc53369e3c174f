package mutators

import (
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// InvalidError is returned by a mutator when the object's own content makes
// the mutation impossible (a volume name modelgate needs is taken, say).
// The webhook answers it as an invalid object (422), listing Errs; any other
// mutator error is modelgate's own fault (500).
type InvalidError struct {
	Errs field.ErrorList
}

// Error implements error.
func (e *InvalidError) Error() string { return e.Errs.ToAggregate().Error() }

func invalid(errs ...*field.Error) error { return &InvalidError{Errs: errs} }
