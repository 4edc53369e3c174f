package decode

import (
	"errors"
	"fmt"
	"strings"

	"github.com/mailru/easyjson"
	"github.com/mailru/easyjson/jlexer"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/modelgate/modelgate/api/annotations"
	"github.com/modelgate/modelgate/mutators"
)

// ViewFunc decodes one kind's raw JSON into the pieces the validating
// webhook reads (viewtypes.go), keeping every annotation when allAnnotations,
// else only the modelgate.io/ ones.
type ViewFunc func(raw []byte, allAnnotations bool) (*Object, error)

// Views decodes the kinds the validating webhook judges, as Whole
// lists them. The decoded object holds only what the policies' view is
// built from: a policy that reads the raw object (input.object) reads the
// bytes the API server sent, never this.
var Views = map[metav1.GroupVersionKind]ViewFunc{
	{Group: "", Version: "v1", Kind: "Pod"}: func(raw []byte, all bool) (*Object, error) {
		v := &podView{}
		v.Metadata.Annotations.all = all
		if err := unmarshalView(raw, v); err != nil {
			return nil, err
		}
		meta, spec := v.Metadata.objectMeta(), v.Spec.podSpec()
		return &Object{Obj: v, Paths: []*field.Path{metaPath},
			Target: &mutators.Target{Kind: "Pod", Object: meta, PodSpec: spec, SpecPath: podSpec}}, nil
	},
	{Group: "apps", Version: "v1", Kind: "Deployment"}:  templatedDecoder("Deployment"),
	{Group: "apps", Version: "v1", Kind: "StatefulSet"}: templatedDecoder("StatefulSet"),
	{Group: "batch", Version: "v1", Kind: "Job"}:        templatedDecoder("Job"),
	{Group: "batch", Version: "v1", Kind: "CronJob"}: func(raw []byte, all bool) (*Object, error) {
		v := &cronJobView{}
		jt := &v.Spec.JobTemplate
		for _, m := range []*metaView{&v.Metadata, &jt.Metadata, &jt.Spec.Template.Metadata} {
			m.Annotations.all = all
		}
		if err := unmarshalView(raw, v); err != nil {
			return nil, err
		}
		tpl := &jt.Spec.Template
		return &Object{Obj: v, Paths: []*field.Path{metaPath, jobTemplateMeta, cronPodMeta},
			Target: &mutators.Target{
				Kind:      "CronJob",
				Object:    v.Metadata.objectMeta(),
				Templates: []*metav1.ObjectMeta{jt.Metadata.objectMeta(), tpl.Metadata.objectMeta()},
				PodSpec:   tpl.Spec.podSpec(),
				SpecPath:  cronPodSpec,
			}}, nil
	},
}

// templatedDecoder decodes a kind with one pod template at spec.template.
func templatedDecoder(kind string) ViewFunc {
	return func(raw []byte, all bool) (*Object, error) {
		v := &templatedView{}
		tpl := &v.Spec.Template
		v.Metadata.Annotations.all, tpl.Metadata.Annotations.all = all, all
		if err := unmarshalView(raw, v); err != nil {
			return nil, err
		}
		return &Object{Obj: v, Paths: []*field.Path{metaPath, templateMeta},
			Target: &mutators.Target{
				Kind:      kind,
				Object:    v.Metadata.objectMeta(),
				Templates: []*metav1.ObjectMeta{tpl.Metadata.objectMeta()},
				PodSpec:   tpl.Spec.podSpec(),
				SpecPath:  templateSpec,
			}}, nil
	}
}

// unmarshalView decodes raw into v. The request's envelope has been
// decoded and checked as JSON (reviewhttp.go) before: what is skipped here
// is not checked again.
func unmarshalView(raw []byte, v easyjson.Unmarshaler) error {
	if len(raw) == 0 {
		return ErrEmptyObject
	}
	err := easyjson.Unmarshal(raw, v)
	var lexed *jlexer.LexerError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &lexed):
		// The lexer's message quotes the input around the error: a value
		// nobody should find in an answer or a log.
		return fmt.Errorf("decoding object: %s at byte %d", lexed.Reason, lexed.Offset)
	default:
		return fmt.Errorf("decoding object: %w", err)
	}
}

// annotationsView is a metadata's annotations: every key when all is set
// before decoding, else only the modelgate.io/ ones (the validating
// webhook's own reads: settings, the injection record, the seal), the
// others' values skipped, never unescaped or copied.
type annotationsView struct {
	all bool
	m   map[string]string
}

// UnmarshalEasyJSON implements easyjson.Unmarshaler.
func (a *annotationsView) UnmarshalEasyJSON(in *jlexer.Lexer) {
	if in.IsNull() {
		in.Skip()
		a.m = nil
		return
	}
	in.Delim('{')
	if a.m == nil && in.Ok() {
		a.m = map[string]string{}
	}
	for !in.IsDelim('}') {
		key := in.UnsafeFieldName(false)
		in.WantColon()
		keep := a.all || strings.HasPrefix(key, annotations.Prefix)
		switch {
		case in.IsNull(): // null is the zero value, as in the default decoding
			in.Skip()
			if keep {
				a.m[strings.Clone(key)] = ""
			}
		case !keep: // checked to be a string, neither unescaped nor copied
			if in.CurrentToken() != jlexer.TokenString {
				in.AddError(fmt.Errorf("annotation %s: want a string", key))
			}
			in.Skip()
		default:
			k := strings.Clone(key)
			a.m[k] = in.String()
		}
		in.WantComma()
	}
	in.Delim('}')
}

// objectMeta is m as the typed metadata, holding only what m holds.
func (m *metaView) objectMeta() *metav1.ObjectMeta {
	out := &metav1.ObjectMeta{
		Name:              m.Name,
		GenerateName:      m.GenerateName,
		Namespace:         m.Namespace,
		DeletionTimestamp: m.DeletionTimestamp,
		Labels:            m.Labels,
		Annotations:       m.Annotations.m,
	}
	for _, o := range m.OwnerReferences {
		out.OwnerReferences = append(out.OwnerReferences, metav1.OwnerReference{Kind: o.Kind, Name: o.Name, Controller: o.Controller})
	}
	return out
}

// podSpec is s as the typed pod spec, holding only what s holds; a probe
// that is set is an empty one.
func (s *podSpecView) podSpec() *corev1.PodSpec {
	spec := &corev1.PodSpec{
		Containers:     containersOf(s.Containers),
		InitContainers: containersOf(s.InitContainers),
		HostNetwork:    s.HostNetwork,
		HostPID:        s.HostPID,
		HostIPC:        s.HostIPC,
		Affinity:       s.Affinity,
		ResourceClaims: s.ResourceClaims,
	}
	if s.EphemeralContainers != nil {
		spec.EphemeralContainers = make([]corev1.EphemeralContainer, len(s.EphemeralContainers))
		for i := range s.EphemeralContainers {
			spec.EphemeralContainers[i].EphemeralContainerCommon = corev1.EphemeralContainerCommon(s.EphemeralContainers[i].container())
		}
	}
	return spec
}

func containersOf(cs []containerView) []corev1.Container {
	if cs == nil {
		return nil
	}
	out := make([]corev1.Container, len(cs))
	for i := range cs {
		out[i] = cs[i].container()
	}
	return out
}

func (c *containerView) container() corev1.Container {
	return corev1.Container{
		Name:            c.Name,
		Image:           c.Image,
		Command:         c.Command,
		Args:            c.Args,
		Ports:           c.Ports,
		Resources:       c.Resources,
		SecurityContext: c.SecurityContext,
		RestartPolicy:   c.RestartPolicy,
		ReadinessProbe:  probeIf(c.ReadinessProbe != nil),
		LivenessProbe:   probeIf(c.LivenessProbe != nil),
		StartupProbe:    probeIf(c.StartupProbe != nil),
	}
}

func probeIf(set bool) *corev1.Probe {
	if !set {
		return nil
	}
	return &corev1.Probe{}
}
