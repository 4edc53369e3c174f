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
	changedAny := false
	merged := func(current []byte) ([]byte, bool) {
		existing, _ := ParseCertificates(current)
		out := EncodeCertificates(MergeBundles(bundle, existing, now))
		return out, !bytes.Equal(out, current)
	}
	for _, name := range r.Targets.Mutating {
		cfg := &admissionregistrationv1.MutatingWebhookConfiguration{}
		if err := r.update(ctx, name, cfg, &changedAny, func() bool {
			changed := false
			for i := range cfg.Webhooks {
				if b, ok := merged(cfg.Webhooks[i].ClientConfig.CABundle); ok {
					cfg.Webhooks[i].ClientConfig.CABundle, changed = b, true
				}
			}
			return changed
		}); err != nil {
			return changedAny, err
		}
	}
	for _, name := range r.Targets.Validating {
		cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		if err := r.update(ctx, name, cfg, &changedAny, func() bool {
			changed := false
			for i := range cfg.Webhooks {
				if b, ok := merged(cfg.Webhooks[i].ClientConfig.CABundle); ok {
					cfg.Webhooks[i].ClientConfig.CABundle, changed = b, true
				}
			}
			return changed
		}); err != nil {
			return changedAny, err
		}
	}
	for _, name := range r.Targets.CRDs {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := r.update(ctx, name, crd, &changedAny, func() bool {
			c := crd.Spec.Conversion
			if c == nil || c.Strategy != apiextensionsv1.WebhookConverter || c.Webhook == nil || c.Webhook.ClientConfig == nil {
				log.Info("CRD does not convert through a webhook: no CA bundle to inject", "crd", name)
				return false
			}
			b, ok := merged(c.Webhook.ClientConfig.CABundle)
			c.Webhook.ClientConfig.CABundle = b
			return ok
		}); err != nil {
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
