package certs

import (
	"bytes"
	"context"
	"crypto/x509"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// inject makes every target trust bundle. A target's CA bundle becomes
// bundle plus what it already trusted and has not expired, so a replica
// working from an older Secret never takes a newer CA away; expired CAs
// drop out. A target that does not exist is skipped (nothing calls it). It
// reports whether it changed a target.
func (r *Rotator) inject(ctx context.Context, bundle []*x509.Certificate, now time.Time) (bool, error) {
	log := logr.FromContextOrDiscard(ctx)
	// setBundle merges bundle into *caBundle and reports a change.
	setBundle := func(caBundle *[]byte) bool {
		existing, _ := ParseCertificates(*caBundle)
		out := EncodeCertificates(MergeBundles(bundle, existing, now))
		if bytes.Equal(out, *caBundle) {
			return false
		}
		*caBundle = out
		return true
	}
	type target struct {
		name string
		obj  client.Object
		edit func() bool
	}
	var targets []target
	for _, name := range r.Targets.Mutating {
		cfg := &admissionregistrationv1.MutatingWebhookConfiguration{}
		targets = append(targets, target{name, cfg, func() bool {
			changed := false
			for i := range cfg.Webhooks {
				changed = setBundle(&cfg.Webhooks[i].ClientConfig.CABundle) || changed
			}
			return changed
		}})
	}
	for _, name := range r.Targets.Validating {
		cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		targets = append(targets, target{name, cfg, func() bool {
			changed := false
			for i := range cfg.Webhooks {
				changed = setBundle(&cfg.Webhooks[i].ClientConfig.CABundle) || changed
			}
			return changed
		}})
	}
	for _, name := range r.Targets.CRDs {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		targets = append(targets, target{name, crd, func() bool {
			c := crd.Spec.Conversion
			if c == nil || c.Strategy != apiextensionsv1.WebhookConverter || c.Webhook == nil || c.Webhook.ClientConfig == nil {
				log.Info("CRD does not convert through a webhook: no CA bundle to inject", "crd", name)
				return false
			}
			return setBundle(&c.Webhook.ClientConfig.CABundle)
		}})
	}
	changedAny := false
	for _, t := range targets {
		if err := r.update(ctx, t.name, t.obj, &changedAny, t.edit); err != nil {
			return changedAny, err
		}
	}
	return changedAny, nil
}

// update reads the named cluster-scoped object into obj, lets change edit
// it, and writes it back if change reports a change, setting *changed. A
// conflict is an error, retried by the next reconcile.
func (r *Rotator) update(ctx context.Context, name string, obj client.Object, changed *bool, change func() bool) error {
	if err := r.Reader.Get(ctx, client.ObjectKey{Name: name}, obj); err != nil {
		if apierrors.IsNotFound(err) {
			logr.FromContextOrDiscard(ctx).V(1).Info("CA bundle target not found; skipped", "name", name)
			return nil
		}
		return fmt.Errorf("reading %s for its CA bundle: %w", name, err)
	}
	if !change() {
		return nil
	}
	if err := r.Client.Update(ctx, obj); err != nil {
		return fmt.Errorf("injecting the CA bundle into %s: %w", name, err)
	}
	*changed = true
	return nil
}
