package annotations

import (
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Choice is an object's explicit injection choice.
type Choice int

const (
	// Unset means the object says nothing; the namespace decides.
	Unset Choice = iota
	// OptIn is modelgate.io/inject: "true".
	OptIn
	// OptOut is modelgate.io/inject: "false".
	OptOut
)

// String returns the annotation value the choice stands for ("" for Unset).
func (c Choice) String() string {
	switch c {
	case OptIn:
		return "true"
	case OptOut:
		return "false"
	default:
		return ""
	}
}

// InjectValues are the values accepted for the Inject annotation.
var InjectValues = []string{"true", "false"}

// ParseInject reads the Inject annotation from an annotation map. path is the
// field path of that map (for example metadata.annotations), used in errors.
func ParseInject(annotations map[string]string, path *field.Path) (Choice, *field.Error) {
	v, ok := annotations[Inject]
	if !ok {
		return Unset, nil
	}
	switch v {
	case "true":
		return OptIn, nil
	case "false":
		return OptOut, nil
	default:
		return Unset, field.NotSupported(path.Key(Inject), v, InjectValues)
	}
}

// Combine merges the choices found on an object and its templates: an
// explicit opt-out anywhere wins, then an opt-in anywhere.
func Combine(choices ...Choice) Choice {
	out := Unset
	for _, c := range choices {
		switch c {
		case OptOut:
			return OptOut
		case OptIn:
			out = OptIn
		}
	}
	return out
}

// Decide turns an object's combined choice and its namespace's labels into
// the final answer: inject or not.
func Decide(c Choice, namespaceLabels map[string]string) bool {
	switch c {
	case OptOut:
		return false
	case OptIn:
		return true
	default:
		return namespaceLabels[NamespaceInjection] == InjectionEnabled
	}
}

// IsReservedLabel reports whether key is a label only modelgate may set.
func IsReservedLabel(key string) bool {
	for _, k := range ReservedLabels {
		if k == key {
			return true
		}
	}
	return false
}
