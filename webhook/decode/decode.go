// Package decode decodes the objects the webhooks admit: whole, as the API
// server does (Whole, for the mutating webhook and for policies that read
// the raw object), or only the fields the policies' view is built from
// (Views, with the decoders easyjson generates from viewtypes.go). The
// tests in webhook/ hold both equal to the API server's own decoding.
package decode

import (
	"errors"
	"fmt"
	"strings"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/modelgate/modelgate/api/annotations"
	"github.com/modelgate/modelgate/mutators"
)

// Object is an admitted object decoded once: the typed object (marshalled
// again to build the patch) and the parts mutators change.
type Object struct {
	Obj    any
	Target *mutators.Target
	// Paths[i] is the field path of Target.Metas()[i].
	Paths []*field.Path
}

// AnnotationPaths returns the field path of every metadata's annotations.
func (d *Object) AnnotationPaths() []*field.Path {
	out := make([]*field.Path, len(d.Paths))
	for i, p := range d.Paths {
		out[i] = p.Child("annotations")
	}
	return out
}

// AnnotationSources are the object's metadata annotations, each with the
// field path problems in it are reported at, outermost first.
func (d *Object) AnnotationSources() []annotations.Source {
	paths := d.AnnotationPaths()
	out := make([]annotations.Source, 0, len(paths))
	for i, m := range d.Target.Metas() {
		out = append(out, annotations.Source{Path: paths[i], Annotations: m.Annotations})
	}
	return out
}

// Func decodes one kind's raw JSON.
type Func func(raw []byte, opts ...jsonv2.Options) (*Object, error)

// ErrEmptyObject is returned for a review whose object is missing.
var ErrEmptyObject = errors.New("the admission request carries no object")

var (
	metaPath        = field.NewPath("metadata")
	templateMeta    = field.NewPath("spec", "template", "metadata")
	jobTemplateMeta = field.NewPath("spec", "jobTemplate", "metadata")
	cronPodMeta     = field.NewPath("spec", "jobTemplate", "spec", "template", "metadata")
	podSpec         = field.NewPath("spec")
	templateSpec    = field.NewPath("spec", "template", "spec")
	cronPodSpec     = field.NewPath("spec", "jobTemplate", "spec", "template", "spec")
)

// Whole decodes the kinds the mutating webhook handles, keyed by
// group/version/kind as the API server sends them.
var Whole = map[metav1.GroupVersionKind]Func{
	{Group: "", Version: "v1", Kind: "Pod"}: func(raw []byte, opts ...jsonv2.Options) (*Object, error) {
		o := &corev1.Pod{}
		if err := Unmarshal(raw, o, opts...); err != nil {
			return nil, err
		}
		return &Object{Obj: o, Paths: []*field.Path{metaPath},
			Target: &mutators.Target{Kind: "Pod", Object: &o.ObjectMeta, PodSpec: &o.Spec, SpecPath: podSpec}}, nil
	},
	{Group: "apps", Version: "v1", Kind: "Deployment"}: workload("Deployment",
		func(o *appsv1.Deployment) (*metav1.ObjectMeta, *corev1.PodTemplateSpec) {
			return &o.ObjectMeta, &o.Spec.Template
		}),
	{Group: "apps", Version: "v1", Kind: "StatefulSet"}: workload("StatefulSet",
		func(o *appsv1.StatefulSet) (*metav1.ObjectMeta, *corev1.PodTemplateSpec) {
			return &o.ObjectMeta, &o.Spec.Template
		}),
	{Group: "batch", Version: "v1", Kind: "Job"}: workload("Job",
		func(o *batchv1.Job) (*metav1.ObjectMeta, *corev1.PodTemplateSpec) {
			return &o.ObjectMeta, &o.Spec.Template
		}),
	{Group: "batch", Version: "v1", Kind: "CronJob"}: func(raw []byte, opts ...jsonv2.Options) (*Object, error) {
		o := &batchv1.CronJob{}
		if err := Unmarshal(raw, o, opts...); err != nil {
			return nil, err
		}
		jt := &o.Spec.JobTemplate
		return &Object{Obj: o, Paths: []*field.Path{metaPath, jobTemplateMeta, cronPodMeta},
			Target: &mutators.Target{
				Kind:      "CronJob",
				Object:    &o.ObjectMeta,
				Templates: []*metav1.ObjectMeta{&jt.ObjectMeta, &jt.Spec.Template.ObjectMeta},
				PodSpec:   &jt.Spec.Template.Spec,
				SpecPath:  cronPodSpec,
			}}, nil
	},
}

// workload decodes a kind that carries one pod template at
// spec.template; parts returns the object's metadata and its template.
func workload[T any](kind string, parts func(*T) (*metav1.ObjectMeta, *corev1.PodTemplateSpec)) Func {
	return func(raw []byte, opts ...jsonv2.Options) (*Object, error) {
		o := new(T)
		if err := Unmarshal(raw, o, opts...); err != nil {
			return nil, err
		}
		meta, tpl := parts(o)
		return &Object{Obj: o, Paths: []*field.Path{metaPath, templateMeta},
			Target: &mutators.Target{
				Kind:      kind,
				Object:    meta,
				Templates: []*metav1.ObjectMeta{&tpl.ObjectMeta},
				PodSpec:   &tpl.Spec,
				SpecPath:  templateSpec,
			}}, nil
	}
}

// Unmarshal decodes a typed object the way the API server does:
// case-sensitive field names, unknown fields ignored, the types' own
// UnmarshalJSON (quantities, times, int-or-strings) used. It uses the
// encoding/json/v2 implementation: one pass with no separate validation
// scan, a third of the allocations and half the time of sigs.k8s.io/json's
// (docs/performance.md, "One-pass decoding"); TestDecodeAsTheAPIServer
// holds the two equal. What it refuses that the API server never sends,
// duplicate names and invalid UTF-8, only a hostile client writes.
func Unmarshal(raw []byte, into any, opts ...jsonv2.Options) error {
	if len(raw) == 0 {
		return ErrEmptyObject
	}
	if err := jsonv2.Unmarshal(raw, into, opts...); err != nil {
		return fmt.Errorf("decoding object: %w", steadyError{err})
	}
	return nil
}

// steadyError is a decoding error whose message says "cannot" every time:
// the decoder's own picks "cannot" or "unable to" at random per process,
// so that nobody relies on its text, and ours goes to users, logs and
// golden files.
type steadyError struct{ err error }

func (e steadyError) Error() string {
	msg := e.err.Error()
	if rest, ok := strings.CutPrefix(msg, "json: unable to "); ok {
		return "json: cannot " + rest
	}
	return msg
}

func (e steadyError) Unwrap() error { return e.err }

// SteadyError is err, a decoding error, with a message that says "cannot"
// every time (steadyError).
func SteadyError(err error) error { return steadyError{err} }

// SkipManagedFields decodes without metadata.managedFields, which the API
// server sends, which can be as large as the rest of the object, and which
// nothing the policies see is built from: the validating webhook's
// decoding when a policy reads the raw object (judgedDecoding).
var SkipManagedFields = jsonv2.WithUnmarshalers(managedFieldsSkipped)

// managedFieldsSkipped checks metadata.managedFields as JSON and skips it:
// the field stays empty.
var managedFieldsSkipped = jsonv2.UnmarshalFromFunc(func(dec *jsontext.Decoder, _ *[]metav1.ManagedFieldsEntry) error {
	return dec.SkipValue()
})
