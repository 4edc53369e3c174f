package main

import (
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	config "github.com/modelgate/modelgate/api/config/v1alpha1"
	servingv1 "github.com/modelgate/modelgate/api/v1"
	"github.com/modelgate/modelgate/controller/aiinference"
	"github.com/modelgate/modelgate/controller/celpolicy"
	"github.com/modelgate/modelgate/policies/celform"
)

// addController runs the leader's controllers in mgr: the one that applies
// the ValidatingAdmissionPolicies made of the WorkloadPolicies' CEL forms,
// and the AIInference controller unless the Configuration turns it off.
func addController(mgr manager.Manager, cfg *config.Configuration) error {
	cel := &celpolicy.Reconciler{
		Client:  mgr.GetClient(),
		Keys:    celform.KeysOf(cfg),
		Scope:   celform.ScopeOf(cfg),
		Enforce: ptr.Deref(cfg.Policy.Backstop, false),
	}
	if d := cfg.Policy.Exceptions.ClockSkew; d != nil {
		cel.ClockSkew = d.Duration
	}
	if err := cel.SetupWithManager(mgr); err != nil {
		return err
	}
	if !cfg.ControllerEnabled() {
		return nil
	}
	r := aiinference.NewReconciler(mgr, engines(cfg.Controller.Engines), crmetrics.Registry)
	served := func() (bool, error) { return aiinference.Served(mgr) }
	if err := r.SetupWhenServed(mgr, served, aiinference.CRDPoll); err != nil {
		return fmt.Errorf("adding the AIInference controller: %w", err)
	}
	return nil
}

// engines are the built-in engine presets with the Configuration's in
// place of those of the same name.
func engines(presets map[string]config.EnginePreset) map[servingv1.EngineName]aiinference.Engine {
	out := maps.Clone(aiinference.DefaultEngines)
	for name, p := range presets {
		e := aiinference.Engine{Image: p.Image, Command: p.Command, Args: p.Args}
		for _, v := range p.Env {
			e.Env = append(e.Env, corev1.EnvVar{Name: v.Name, Value: v.Value})
		}
		out[servingv1.EngineName(name)] = e
	}
	return out
}
