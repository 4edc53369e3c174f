package offline

import (
	"context"
	"encoding/json"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"sigs.k8s.io/controller-runtime/pkg/conversion"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	config "github.com/modelgate/modelgate/api/config/v1alpha1"
	"github.com/modelgate/modelgate/api/install"
	servingv1 "github.com/modelgate/modelgate/api/v1"
	"github.com/modelgate/modelgate/policies"
	"github.com/modelgate/modelgate/webhook"
)

// aiinferenceGVR is what the AIInference webhooks are registered for: the
// API server converts every version to v1 before calling them.
var aiinferenceGVR = metav1.GroupVersionResource{Group: servingv1.GroupVersion.Group, Version: "v1", Resource: "aiinferences"}

// aiinferences admits AIInference objects as the API server does: the
// object, in any served version, converted to v1 by the conversion code
// /convert runs, then the defaulting webhook and its patch, then the
// validating webhook (structural checks and the policies).
type aiinferences struct {
	scheme    *runtime.Scheme
	decoder   runtime.Decoder
	defaulter *admission.Webhook
	validator *admission.Webhook
}

func newAIInferences(cfg *config.Configuration, engine *policies.Engine, ns webhook.NamespaceLabeler) (*aiinferences, error) {
	s := runtime.NewScheme()
	if err := install.AddToScheme(s); err != nil {
		return nil, fmt.Errorf("building scheme: %w", err)
	}
	return &aiinferences{
		scheme:    s,
		decoder:   serializer.NewCodecFactory(s, serializer.EnableStrict).UniversalDeserializer(),
		defaulter: admission.WithDefaulter(s, webhook.NewAIInferenceDefaulter(cfg, ns)),
		validator: admission.WithValidator(s, webhook.NewAIInferenceValidator(cfg, engine, ns, webhook.NewPolicyMetrics(nil))),
	}, nil
}

// toV1 decodes an AIInference in any served version and returns it as v1
// JSON, with the namespace set.
func (a *aiinferences) toV1(raw []byte, namespace string) ([]byte, error) {
	obj, _, err := a.decoder.Decode(raw, nil, nil)
	if err != nil {
		return nil, fmt.Errorf("decoding the AIInference: %w", err)
	}
	hub := &servingv1.AIInference{}
	switch o := obj.(type) {
	case *servingv1.AIInference:
		hub = o
	case conversion.Convertible:
		if err := o.ConvertTo(hub); err != nil {
			return nil, fmt.Errorf("converting the AIInference to v1: %w", err)
		}
	default:
		return nil, fmt.Errorf("decoding the AIInference: unexpected %T", obj)
	}
	hub.APIVersion, hub.Kind = servingv1.GroupVersion.String(), "AIInference"
	hub.Namespace = namespace
	return json.Marshal(hub)
}

// admit runs one AIInference through conversion, defaulting and
// validation. The outcome's object is the defaulted v1 object: what the
// API server stores.
func (a *aiinferences) admit(ctx context.Context, r Request, name string) (Outcome, error) {
	sent, err := a.toV1(r.Object, r.Namespace)
	if err != nil {
		return Outcome{}, err
	}
	req := createRequest(aiinferenceGVR, "AIInference", name, r, sent)
	out := Outcome{Object: sent}
	resp := a.defaulter.Handle(ctx, req)
	out.Warnings = append(out.Warnings, resp.Warnings...)
	if !resp.Allowed {
		return denial(out, resp, "AIInference defaulting")
	}
	if len(resp.Patches) > 0 {
		patch, err := json.Marshal(resp.Patches)
		if err != nil {
			return Outcome{}, fmt.Errorf("encoding the defaulting patch: %w", err)
		}
		if sent, err = applyPatch(sent, patch); err != nil {
			return Outcome{}, err
		}
		out.Object, out.Mutated = sent, true
	}
	return check(ctx, a.validator, req, sent, out, "AIInference validating")
}
