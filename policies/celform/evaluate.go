package celform

import (
	"context"
	"fmt"
	"slices"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/admission/plugin/policy/generic"
	"k8s.io/apiserver/pkg/admission/plugin/policy/matching"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/authentication/user"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
)

// Policy is a ValidatingAdmissionPolicy and its binding compiled to judge
// objects offline as the API server does: matched by the API server's
// matcher, evaluated by its validator.
type Policy struct {
	vap       *admissionregistrationv1.ValidatingAdmissionPolicy
	binding   *admissionregistrationv1.ValidatingAdmissionPolicyBinding
	validator validating.Validator
}

// Compile compiles a policy and its binding for Judge.
func Compile(vap *admissionregistrationv1.ValidatingAdmissionPolicy, binding *admissionregistrationv1.ValidatingAdmissionPolicyBinding) (*Policy, error) {
	v, err := compilePolicy(vap)
	if err != nil {
		return nil, err
	}
	return &Policy{vap: vap, binding: binding, validator: v}, nil
}

// PolicyName is the name of the WorkloadPolicy the policy was made of.
func (p *Policy) PolicyName() string { return p.vap.Labels[PolicyLabel] }

// Warns reports whether the policy's violations come back as warnings
// (enforcementAction warn) rather than deny (or, dry run, are only
// recorded).
func (p *Policy) Warns() bool {
	return slices.Contains(p.binding.Spec.ValidationActions, admissionregistrationv1.Warn)
}

// Request is an admission request as a policy sees it.
type Request struct {
	// Object is the object admitted; OldObject the object it replaces on
	// UPDATE, nil on CREATE.
	Object, OldObject *unstructured.Unstructured
	// Operation is CREATE or UPDATE.
	Operation admission.Operation
	// Namespace is the object's namespace, with its labels.
	Namespace *corev1.Namespace
	// UserInfo is who asks.
	UserInfo user.Info
}

// Decision is what a policy does to a request: the messages of the
// validations it fails (or could not evaluate under failurePolicy Fail),
// by the binding's actions.
type Decision struct {
	// Matched says the policy applies to the request.
	Matched bool
	// Deny, Warn and Audit are the messages, by action: they deny the
	// request, come back as warnings, or are only recorded.
	Deny, Warn, Audit []string
}

// Judge decides r as the API server would with the policy and its binding.
func (p *Policy) Judge(ctx context.Context, r Request) (Decision, error) {
	if r.Object == nil {
		return Decision{}, fmt.Errorf("no object to judge")
	}
	gvk := r.Object.GroupVersionKind()
	rr, ok := resourceRule[gvk.Kind]
	if !ok {
		return Decision{}, nil
	}
	gvr := schema.GroupVersionResource{Group: gvk.Group, Version: gvk.Version, Resource: rr.Resources[0]}
	ns := r.Namespace
	if ns == nil {
		ns = &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: r.Object.GetNamespace(), Labels: map[string]string{namespaceLabel: r.Object.GetNamespace()}}}
	}
	var old runtime.Object
	if r.OldObject != nil {
		old = r.OldObject
	}
	userInfo := r.UserInfo
	if userInfo == nil {
		userInfo = &user.DefaultInfo{}
	}
	attr := admission.NewAttributesRecord(r.Object, old, gvk, r.Object.GetNamespace(), r.Object.GetName(), gvr, "", r.Operation, nil, false, userInfo)
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	if err := indexer.Add(ns); err != nil {
		return Decision{}, fmt.Errorf("namespace %s: %w", ns.Name, err)
	}
	m := generic.NewPolicyMatcher(matching.NewMatcher(corelisters.NewNamespaceLister(indexer), nil))
	o := admission.NewObjectInterfacesFromScheme(runtime.NewScheme())
	matches, matchedGVR, matchedGVK, err := m.DefinitionMatches(attr, o, validating.NewValidatingAdmissionPolicyAccessor(p.vap))
	if err != nil || !matches {
		return Decision{}, err
	}
	if matches, err = m.BindingMatches(attr, o, validating.NewValidatingAdmissionPolicyBindingAccessor(p.binding)); err != nil || !matches {
		return Decision{}, err
	}
	versioned := &admission.VersionedAttributes{
		Attributes: attr, VersionedKind: matchedGVK,
		VersionedObject: admission.NewLazyObject(r.Object), VersionedOldObject: admission.NewLazyObject(old),
	}
	res := p.validator.Validate(ctx, matchedGVR, versioned, nil, ns, celconfig.RuntimeCELCostBudget, nil)
	d := Decision{Matched: true}
	for _, dec := range res.Decisions {
		if dec.Action != validating.ActionDeny {
			continue
		}
		for _, a := range p.binding.Spec.ValidationActions {
			switch a {
			case admissionregistrationv1.Deny:
				d.Deny = append(d.Deny, dec.Message)
			case admissionregistrationv1.Warn:
				d.Warn = append(d.Warn, dec.Message)
			case admissionregistrationv1.Audit:
				d.Audit = append(d.Audit, dec.Message)
			}
		}
	}
	return d, nil
}
