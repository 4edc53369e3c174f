package webhook

import (
	"fmt"
	"strings"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/modelgate/modelgate/mutators"
)

// decoded is an admitted object decoded once: the typed object (marshalled
// again to build the patch) and the parts mutators change.
type decoded struct {
	obj    any
	target *mutators.Target
	// paths[i] is the field path of target.Metas()[i].
	paths []*field.Path
}

// annotationPaths returns the field path of every metadata's annotations.
func (d *decoded) annotationPaths() []*field.Path {
	out := make([]*field.Path, len(d.paths))
	for i, p := range d.paths {
		out[i] = p.Child("annotations")
	}
	return out
}

// kindDecoder decodes one kind's raw JSON.
type kindDecoder func(raw []byte, opts ...jsonv2.Options) (*decoded, error)

var (
	metaPath        = field.NewPath("metadata")
	templateMeta    = field.NewPath("spec", "template", "metadata")
	jobTemplateMeta = field.NewPath("spec", "jobTemplate", "metadata")
	cronPodMeta     = field.NewPath("spec", "jobTemplate", "spec", "template", "metadata")
	podSpec         = field.NewPath("spec")
	templateSpec    = field.NewPath("spec", "template", "spec")
	cronPodSpec     = field.NewPath("spec", "jobTemplate", "spec", "template", "spec")
)

// decoders are the kinds the mutating webhook handles, keyed by
// group/version/kind as the API server sends them.
var decoders = map[metav1.GroupVersionKind]kindDecoder{
	{Group: "", Version: "v1", Kind: "Pod"}: func(raw []byte, opts ...jsonv2.Options) (*decoded, error) {
		o := &corev1.Pod{}
		if err := unmarshal(raw, o, opts...); err != nil {
			return nil, err
		}
		return &decoded{obj: o, paths: []*field.Path{metaPath},
			target: &mutators.Target{Kind: "Pod", Object: &o.ObjectMeta, PodSpec: &o.Spec, SpecPath: podSpec}}, nil
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
	{Group: "batch", Version: "v1", Kind: "CronJob"}: func(raw []byte, opts ...jsonv2.Options) (*decoded, error) {
		o := &batchv1.CronJob{}
		if err := unmarshal(raw, o, opts...); err != nil {
			return nil, err
		}
		jt := &o.Spec.JobTemplate
		return &decoded{obj: o, paths: []*field.Path{metaPath, jobTemplateMeta, cronPodMeta},
			target: &mutators.Target{
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
func workload[T any](kind string, parts func(*T) (*metav1.ObjectMeta, *corev1.PodTemplateSpec)) kindDecoder {
	return func(raw []byte, opts ...jsonv2.Options) (*decoded, error) {
		o := new(T)
		if err := unmarshal(raw, o, opts...); err != nil {
			return nil, err
		}
		meta, tpl := parts(o)
		return &decoded{obj: o, paths: []*field.Path{metaPath, templateMeta},
			target: &mutators.Target{
				Kind:      kind,
				Object:    meta,
				Templates: []*metav1.ObjectMeta{&tpl.ObjectMeta},
				PodSpec:   &tpl.Spec,
				SpecPath:  templateSpec,
			}}, nil
	}
}

// unmarshal decodes a typed object the way the API server does:
// case-sensitive field names, unknown fields ignored, the types' own
// UnmarshalJSON (quantities, times, int-or-strings) used. It uses the
// encoding/json/v2 implementation: one pass with no separate validation
// scan, a third of the allocations and half the time of sigs.k8s.io/json's
// (docs/performance.md, "One-pass decoding"); TestDecodeAsTheAPIServer
// holds the two equal. What it refuses that the API server never sends,
// duplicate names and invalid UTF-8, only a hostile client writes.
func unmarshal(raw []byte, into any, opts ...jsonv2.Options) error {
	if len(raw) == 0 {
		return errEmptyObject
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

// skipManagedFields decodes without metadata.managedFields, which the API
// server sends, which can be as large as the rest of the object, and which
// nothing the policies see is built from: the validating webhook's
// decoding when a policy reads the raw object (judgedDecoding).
var skipManagedFields = jsonv2.WithUnmarshalers(managedFieldsSkipped)

// managedFieldsSkipped checks metadata.managedFields as JSON and skips it:
// the field stays empty.
var managedFieldsSkipped = jsonv2.UnmarshalFromFunc(func(dec *jsontext.Decoder, _ *[]metav1.ManagedFieldsEntry) error {
	return dec.SkipValue()
})
