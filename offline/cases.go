package offline

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// The type of a declarative case file.
const (
	CaseAPIVersion = "test.modelgate.io/v1alpha1"
	CaseKind       = "PolicyTest"
	// CaseFileSuffix ends the name of every case file `modelgate test` runs.
	CaseFileSuffix = ".cases.yaml"
)

// CaseFile is a declarative test file: objects admitted through the
// webhooks, each with the answer expected. Paths in it are relative to the
// file.
type CaseFile struct {
	metav1.TypeMeta `json:",inline"`

	// Policies is a policy directory, or a directory or file of
	// WorkloadPolicy objects (see LoadPolicies); none when empty.
	Policies string `json:"policies,omitempty"`
	// Config is a Configuration file; the defaults when empty.
	Config string `json:"config,omitempty"`
	// Exceptions is a file, or a directory of files, of
	// WorkloadPolicyException objects applied to the cases (in the
	// namespace of the case when they name none), beside those found
	// with the WorkloadPolicy objects of Policies.
	Exceptions string `json:"exceptions,omitempty"`
	// Defaults of every case.
	Target `json:",inline"`
	// Cases are run in order.
	Cases []Case `json:"cases"`

	// path is where the file was read from.
	path string
}

// Target is who creates the objects and where; a case's own settings
// replace the file's.
type Target struct {
	// Namespace the object is created in when its metadata names none;
	// "default" when empty.
	Namespace string `json:"namespace,omitempty"`
	// NamespaceLabels are the namespace's labels (kubernetes.io/metadata.name
	// is added).
	NamespaceLabels map[string]string `json:"namespaceLabels,omitempty"`
	// User is the requester's name; DefaultTestUser when empty.
	User string `json:"user,omitempty"`
	// Groups are the requester's groups; system:authenticated is added.
	Groups []string `json:"groups,omitempty"`
	// Now is the time the object is judged at, which decides whether an
	// exception has expired (RFC 3339); the local clock when unset.
	Now *metav1.Time `json:"now,omitempty"`
}

// Case is one object and the answer expected for it.
type Case struct {
	// Name is unique in the file.
	Name string `json:"name"`
	// Object is the object inline; File a YAML file holding it alone.
	// Exactly one of them is set.
	Object json.RawMessage `json:"object,omitempty"`
	File   string          `json:"file,omitempty"`
	// OldObject, or OldFile, makes the case an UPDATE from that object
	// (as modelgate's mutating webhook admitted it) to Object: what
	// ratcheting judges. At most one of them is set.
	OldObject json.RawMessage `json:"oldObject,omitempty"`
	OldFile   string          `json:"oldFile,omitempty"`
	Target    `json:",inline"`
	Expect    Expect `json:"expect"`
}

// Expect is the answer expected.
type Expect struct {
	// Decision is allowed, warned or denied.
	Decision Decision `json:"decision"`
	// Messages, when set (even empty), are the exact lines expected, in
	// any order: the denial's lines for denied, the warnings for warned.
	Messages []string `json:"messages,omitempty"`
	// Warnings, when set (even empty), are the exact warnings expected
	// with a denial, in any order; only with decision denied.
	Warnings []string `json:"warnings,omitempty"`
	// CELFailsClosed names the policies whose CEL form denies the object
	// though their Rego allows it, because CEL cannot see what Rego does
	// (a resource claim's template, a sealed record): the backstop fails
	// closed there. The case fails where one of them does not, and where
	// a policy not named decides otherwise in CEL than in Rego.
	CELFailsClosed []string `json:"celFailsClosed,omitempty"`
}

// DefaultTestUser is the requester of cases that name none.
const DefaultTestUser = "modelgate-test"

// Path returns the file's path.
func (f *CaseFile) Path() string { return f.path }

// LoadCaseFile reads a case file strictly: an unknown or duplicated field,
// or a missing or invalid one, is an error naming the file and the field.
func LoadCaseFile(path string) (*CaseFile, error) {
	data, err := os.ReadFile(path) //nolint:gosec // the path is the user's own argument.
	if err != nil {
		return nil, err
	}
	js, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	f := &CaseFile{path: path}
	strict, err := kjson.UnmarshalStrict(js, f)
	if err == nil && len(strict) > 0 {
		err = errors.Join(strict...)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if errs := f.validate(); len(errs) > 0 {
		lines := make([]string, len(errs))
		for i, e := range errs {
			lines[i] = path + ": " + e.Error()
		}
		return nil, errors.New(strings.Join(lines, "\n"))
	}
	return f, nil
}

func (f *CaseFile) validate() field.ErrorList {
	var errs field.ErrorList
	if f.APIVersion != CaseAPIVersion {
		errs = append(errs, field.NotSupported(field.NewPath("apiVersion"), f.APIVersion, []string{CaseAPIVersion}))
	}
	if f.Kind != CaseKind {
		errs = append(errs, field.NotSupported(field.NewPath("kind"), f.Kind, []string{CaseKind}))
	}
	errs = append(errs, f.validateTarget(nil)...)
	if len(f.Cases) == 0 {
		errs = append(errs, field.Required(field.NewPath("cases"), "must list at least one case"))
	}
	names := sets.New[string]()
	for i := range f.Cases {
		c := &f.Cases[i]
		p := field.NewPath("cases").Index(i)
		switch {
		case c.Name == "":
			errs = append(errs, field.Required(p.Child("name"), ""))
		case names.Has(c.Name):
			errs = append(errs, field.Duplicate(p.Child("name"), c.Name))
		}
		names.Insert(c.Name)
		hasObject := len(c.Object) > 0 && string(c.Object) != "null"
		switch {
		case hasObject && c.File != "":
			errs = append(errs, field.Invalid(p.Child("file"), c.File, "must not be set with object"))
		case !hasObject && c.File == "":
			errs = append(errs, field.Required(p.Child("object"), "one of object or file must be set"))
		case hasObject && !strings.HasPrefix(strings.TrimSpace(string(c.Object)), "{"):
			errs = append(errs, field.Invalid(p.Child("object"), string(c.Object), "must be a Kubernetes object"))
		}
		hasOld := len(c.OldObject) > 0 && string(c.OldObject) != "null"
		switch {
		case hasOld && c.OldFile != "":
			errs = append(errs, field.Invalid(p.Child("oldFile"), c.OldFile, "must not be set with oldObject"))
		case hasOld && !strings.HasPrefix(strings.TrimSpace(string(c.OldObject)), "{"):
			errs = append(errs, field.Invalid(p.Child("oldObject"), string(c.OldObject), "must be a Kubernetes object"))
		}
		errs = append(errs, c.validateTarget(p)...)
		ep := p.Child("expect")
		switch c.Expect.Decision {
		case "":
			errs = append(errs, field.Required(ep.Child("decision"), "must be one of allowed, warned or denied"))
		case Allowed:
			if len(c.Expect.Messages) > 0 {
				errs = append(errs, field.Invalid(ep.Child("messages"), c.Expect.Messages, "must be empty when the decision is allowed"))
			}
		case Warned, Denied:
		default:
			errs = append(errs, field.NotSupported(ep.Child("decision"), c.Expect.Decision, Decisions))
		}
		if c.Expect.Warnings != nil && c.Expect.Decision != Denied {
			errs = append(errs, field.Forbidden(ep.Child("warnings"), "only with decision denied; the warnings of a warned object are its messages"))
		}
	}
	return errs
}

func (t *Target) validateTarget(p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if t.Namespace != "" {
		for _, msg := range validation.IsDNS1123Label(t.Namespace) {
			errs = append(errs, field.Invalid(p.Child("namespace"), t.Namespace, msg))
		}
	}
	for k, v := range t.NamespaceLabels {
		if err := ValidateLabel(k, v); err != nil {
			errs = append(errs, field.Invalid(p.Child("namespaceLabels").Key(k), v, err.Error()))
		}
	}
	return errs
}
