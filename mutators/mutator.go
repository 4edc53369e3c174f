// Package mutators holds modelgate's mutators: small, pure functions of the
// admitted object's pod template and the parsed request, each doing one
// thing and reporting whether it changed anything. The webhook runs them as
// an ordered Chain.
//
// Mutators make no API calls, read no clocks and keep no globals; applying
// one twice changes nothing the second time.
package mutators

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/modelgate/modelgate/api/annotations"
)

// Mutator changes one concern of a Target.
type Mutator interface {
	// Name is stable: it is used in logs, metrics and the Injected record.
	Name() string
	// Mutate changes t and reports whether anything changed. It must be
	// idempotent: a second call with the same input reports false.
	Mutate(t *Target, in *Input) (changed bool, err error)
}

// Target is the part of an admitted object that mutators change.
type Target struct {
	// Kind is the admitted object's kind: Pod, Deployment, StatefulSet, Job
	// or CronJob.
	Kind string
	// Object is the admitted object's own metadata.
	Object *metav1.ObjectMeta
	// Templates are the metadata the object stamps onto the objects it
	// creates, outermost first; the pod template is last. A CronJob has its
	// job template and its pod template; a Pod has none.
	Templates []*metav1.ObjectMeta
	// PodSpec is the Pod's spec or the workload's pod template spec.
	PodSpec *corev1.PodSpec
	// SpecPath is PodSpec's field path in the object (spec,
	// spec.template.spec, ...), for errors about what the user wrote
	// there; nil reads as spec.
	SpecPath *field.Path

	owns []string
	// gpuClaim is what the GPU claim this pass added asks for.
	gpuClaim *annotations.GPUSettings
}

// Own declares that modelgate created a part of the pod spec in this pass
// (see Record.Owns). Mutators declare what they own on every pass.
func (t *Target) Own(part string) {
	if !slices.Contains(t.owns, part) {
		t.owns = append(t.owns, part)
	}
}

// PodMeta is the metadata of the pod (template): the last template, or the
// object itself for a Pod.
func (t *Target) PodMeta() *metav1.ObjectMeta {
	if n := len(t.Templates); n > 0 {
		return t.Templates[n-1]
	}
	return t.Object
}

// specPath is SpecPath, or spec when it is not set.
func (t *Target) specPath() *field.Path {
	if t.SpecPath == nil {
		return field.NewPath("spec")
	}
	return t.SpecPath
}

// containerPath is the field path of the app container at index i.
func (t *Target) containerPath(i int) *field.Path {
	return t.specPath().Child("containers").Index(i)
}

// Metas is every metadata the target carries, the object's own first.
func (t *Target) Metas() []*metav1.ObjectMeta {
	out := make([]*metav1.ObjectMeta, 0, 1+len(t.Templates))
	out = append(out, t.Object)
	return append(out, t.Templates...)
}

// Operation is the admission operation being mutated.
type Operation string

// The operations modelgate mutates.
const (
	Create Operation = "CREATE"
	Update Operation = "UPDATE"
)

// Requester is who sent the request, as the API server authenticated them.
type Requester struct {
	Username string
	Groups   []string
	// Trusted marks a controller that creates objects from templates (the
	// ReplicaSet, Job or CronJob controller, ...). Owner metadata such a
	// requester carries over from a template is kept; anyone else's is
	// replaced by their own identity.
	Trusted bool
}

// Input is the parsed, validated request a mutator works from.
type Input struct {
	Operation Operation
	// Namespace is the object's namespace, and NamespaceLabels its labels as
	// the webhook's cache saw them.
	Namespace       string
	NamespaceLabels map[string]string
	Requester       Requester
	// Settings are the object's modelgate annotations, parsed.
	Settings annotations.Settings
	// Old is the previous object's own metadata on UPDATE, nil on CREATE.
	Old *metav1.ObjectMeta
	// Container is the index in Target.PodSpec.Containers of the container
	// that serves the model (see ResolveContainer), or NoContainer.
	Container int
	// Options are the platform settings from the Configuration.
	Options *Options
	// Previous is the Injected record the object carried before this pass
	// (zero when none); it tells a mutator which parts it created earlier.
	Previous Record
}
