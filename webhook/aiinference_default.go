package webhook

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/modelgate/modelgate/api/annotations"
	config "github.com/modelgate/modelgate/api/config/v1alpha1"
	servingv1 "github.com/modelgate/modelgate/api/v1"
	"github.com/modelgate/modelgate/mutators"
)

// AIInferenceDefaulter fills in what an AIInference may leave out: engine
// name (vllm) and port (the engine's preset from the Configuration),
// replicas (1), warmup.timeoutSeconds (300) and gpu.count (1). It leaves
// the health path to be resolved from the preset when used, so that the
// stored object does not grow a field older versions cannot show.
//
// It drops a serving.modelgate.io/conversion-data annotation written into
// a v1 object, so the stored object never carries one. It also stamps the
// owner metadata every workload modelgate admits gets
// (modelgate.io/owner from the requester, kept from the old object on
// UPDATE, and modelgate.io/team from the namespace), with the same mutator,
// so policies such as required-owner-team judge AIInference alike.
type AIInferenceDefaulter struct {
	// Ports are the engines' preset ports.
	Ports      map[annotations.EngineName]int32
	Trusted    *config.TrustedRequesters
	Namespaces NamespaceLabeler
	// Options carry the key that seals the owner metadata.
	Options *mutators.Options
}

var _ admission.Defaulter[*servingv1.AIInference] = (*AIInferenceDefaulter)(nil)

// NewAIInferenceDefaulter takes the engine ports from the Configuration's
// probe presets.
func NewAIInferenceDefaulter(cfg *config.Configuration, ns NamespaceLabeler) *AIInferenceDefaulter {
	opts := mutatorOptions(cfg)
	ports := map[annotations.EngineName]int32{}
	for e, p := range opts.Probes.Presets {
		ports[e] = p.Port
	}
	return &AIInferenceDefaulter{Ports: ports, Trusted: trustedRequesters(cfg), Namespaces: ns, Options: opts}
}

// Default implements admission.Defaulter.
func (d *AIInferenceDefaulter) Default(ctx context.Context, obj *servingv1.AIInference) error {
	// Conversion takes the annotation off objects written in older
	// versions; one written straight into v1 by hand means nothing there,
	// and stored it would only mislead.
	delete(obj.Annotations, servingv1.ConversionDataAnnotation)
	req, err := admission.RequestFromContext(ctx)
	if err != nil {
		return fmt.Errorf("reading the admission request: %w", err)
	}
	in := &mutators.Input{
		Operation: mutators.Operation(req.Operation),
		Namespace: obj.Namespace,
		Requester: requesterFrom(req.UserInfo, d.Trusted),
		Options:   d.Options,
	}
	if len(req.OldObject.Raw) > 0 {
		var old struct {
			Metadata metav1.ObjectMeta `json:"metadata"`
			Spec     struct {
				Engine servingv1.EngineSpec `json:"engine"`
			} `json:"spec"`
		}
		if err := json.Unmarshal(req.OldObject.Raw, &old); err != nil {
			return apierrors.NewBadRequest(fmt.Sprintf("decoding the old object: %v", err))
		}
		in.Old = &old.Metadata
		FollowEngineChange(&obj.Spec, &old.Spec.Engine, d.Ports)
	}
	DefaultAIInference(&obj.Spec, d.Ports)
	if in.NamespaceLabels, err = d.Namespaces.NamespaceLabels(ctx, obj.Namespace); err != nil {
		return apierrors.NewInternalError(err)
	}
	t := &mutators.Target{Kind: "AIInference", Object: &obj.ObjectMeta, PodSpec: &corev1.PodSpec{}}
	if _, err := (mutators.OwnerMetadata{}).Mutate(t, in); err != nil {
		return apierrors.NewInternalError(err)
	}
	// modelgate injects nothing into an AIInference itself: a record on
	// one was written by hand and is not sealed.
	mutators.SetRecord(t, mutators.Record{})
	mutators.SealMetadata(t, in)
	return nil
}

// FollowEngineChange clears a port the defaulter set for the old engine
// when an UPDATE changes the engine, so that the new engine gets its own
// preset: a port still equal to the old engine's preset was the default,
// not a choice. A port the user chose stays.
func FollowEngineChange(spec *servingv1.AIInferenceSpec, old *servingv1.EngineSpec, ports map[annotations.EngineName]int32) {
	name, oldName := orVLLM(spec.Engine.Name), orVLLM(old.Name)
	if name == oldName || spec.Engine.Port == 0 {
		return
	}
	if preset, ok := ports[annotations.EngineName(oldName)]; ok && spec.Engine.Port == preset {
		spec.Engine.Port = 0
	}
}

func orVLLM(e servingv1.EngineName) servingv1.EngineName {
	if e == "" {
		return servingv1.EngineVLLM
	}
	return e
}

// DefaultAIInference sets the defaults on spec; it is idempotent.
func DefaultAIInference(spec *servingv1.AIInferenceSpec, ports map[annotations.EngineName]int32) {
	if spec.Engine.Name == "" {
		spec.Engine.Name = servingv1.EngineVLLM
	}
	if spec.Engine.Port == 0 {
		spec.Engine.Port = ports[annotations.EngineName(spec.Engine.Name)]
	}
	if spec.Replicas == nil {
		one := int32(1)
		spec.Replicas = &one
	}
	if spec.Warmup == nil {
		spec.Warmup = &servingv1.WarmupSpec{}
	}
	if spec.Warmup.TimeoutSeconds == 0 {
		spec.Warmup.TimeoutSeconds = annotations.DefaultWarmupTimeoutSeconds
	}
	if spec.GPU != nil && spec.GPU.Count == 0 {
		spec.GPU.Count = 1
	}
}
