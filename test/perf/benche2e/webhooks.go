package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/modelgate/modelgate/test/harnesses/env"
)

// switchTimeout bounds how long the API server may take to start or stop
// calling modelgate after its configurations are created or deleted.
const switchTimeout = 60 * time.Second

// webhooks are modelgate's admission registration as the API server held it
// when the benchmark started, so that it can be deleted and re-created.
type webhooks struct {
	mutating   []*admissionregistrationv1.MutatingWebhookConfiguration
	validating []*admissionregistrationv1.ValidatingWebhookConfiguration
	// names are the webhooks' names: the "name" label of the API server's
	// webhook metrics.
	names []string
}

// loadWebhooks reads modelgate's webhook configurations, those
// config/webhook renders, from the API server (where envtest installed
// them pointing at the local server).
func loadWebhooks(ctx context.Context, c client.Client, root string) (*webhooks, error) {
	dir := filepath.Join(root, "config", "webhook")
	mutating, err := env.MutatingWebhooks(dir)
	if err != nil {
		return nil, err
	}
	validating, err := env.ValidatingWebhooks(dir)
	if err != nil {
		return nil, err
	}
	w := &webhooks{}
	for _, r := range mutating {
		live := &admissionregistrationv1.MutatingWebhookConfiguration{}
		if err := c.Get(ctx, client.ObjectKey{Name: r.Name}, live); err != nil {
			return nil, fmt.Errorf("reading MutatingWebhookConfiguration %s: %w", r.Name, err)
		}
		w.mutating = append(w.mutating, live)
		for _, h := range live.Webhooks {
			w.names = append(w.names, h.Name)
		}
	}
	for _, r := range validating {
		live := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		if err := c.Get(ctx, client.ObjectKey{Name: r.Name}, live); err != nil {
			return nil, fmt.Errorf("reading ValidatingWebhookConfiguration %s: %w", r.Name, err)
		}
		w.validating = append(w.validating, live)
		for _, h := range live.Webhooks {
			w.names = append(w.names, h.Name)
		}
	}
	slices.Sort(w.names)
	return w, nil
}

// objects returns fresh copies of the configurations, ready to create:
// without the server-set metadata of the ones they were read as.
func (w *webhooks) objects() []client.Object {
	var out []client.Object
	for _, m := range w.mutating {
		out = append(out, m.DeepCopy())
	}
	for _, v := range w.validating {
		out = append(out, v.DeepCopy())
	}
	for _, o := range out {
		o.SetResourceVersion("")
		o.SetUID("")
		o.SetCreationTimestamp(metav1.Time{})
		o.SetGeneration(0)
		o.SetManagedFields(nil)
		o.SetSelfLink("")
	}
	return out
}

// unregister deletes modelgate's webhook configurations.
func (w *webhooks) unregister(ctx context.Context, c client.Client) error {
	for _, o := range w.objects() {
		if err := c.Delete(ctx, o); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting %T %s: %w", o, o.GetName(), err)
		}
	}
	return nil
}

// register re-creates modelgate's webhook configurations.
func (w *webhooks) register(ctx context.Context, c client.Client) error {
	for _, o := range w.objects() {
		if err := c.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating %T %s: %w", o, o.GetName(), err)
		}
	}
	return nil
}

// probe is what one dry-run create of the annotated Deployment showed: was
// it injected, and how many calls of modelgate's mutating and validating
// webhooks the API server made for it.
type probe struct {
	injected             bool
	mutating, validating float64
}

// probeWebhooks dry-runs the annotated Deployment as the developer and
// counts, from the API server's metrics, the calls to modelgate's webhooks
// it caused.
func probeWebhooks(ctx context.Context, dev client.Client, s *scraper, names []string) (probe, error) {
	count := func(f families, typ string) (float64, error) {
		h, err := f.histogram(webhookDuration, modelgateWebhooks(names, typ))
		return h.count, err
	}
	before, err := s.apiserver(ctx)
	if err != nil {
		return probe{}, err
	}
	d := annotatedDeployment("default", templateName, 1)
	if err := dev.Create(ctx, d, client.DryRunAll); err != nil {
		return probe{}, fmt.Errorf("dry-run creating Deployment %s: %w", templateName, err)
	}
	after, err := s.apiserver(ctx)
	if err != nil {
		return probe{}, err
	}
	p := probe{injected: isInjected(&d.Spec.Template)}
	for _, t := range []struct {
		typ string
		out *float64
	}{{"admit", &p.mutating}, {"validating", &p.validating}} {
		b, err := count(before, t.typ)
		if err != nil {
			return probe{}, err
		}
		a, err := count(after, t.typ)
		if err != nil {
			return probe{}, err
		}
		*t.out = a - b
	}
	return p, nil
}

// errSwitchTimeout is returned when the API server does not start or stop
// calling modelgate in time.
var errSwitchTimeout = errors.New("the API server did not pick up the change of modelgate's webhook configurations")

// waitWebhooks waits until the API server calls both of modelgate's
// webhooks (registered) or neither (not registered) for the annotated
// Deployment, twice in a row, so that a phase never starts while its
// configuration informers lag.
func waitWebhooks(ctx context.Context, dev client.Client, s *scraper, names []string, registered bool) error {
	deadline := time.Now().Add(switchTimeout)
	good := 0
	var last probe
	for {
		p, err := probeWebhooks(ctx, dev, s, names)
		if err != nil {
			return err
		}
		last = p
		on := p.injected && p.mutating > 0 && p.validating > 0
		off := !p.injected && p.mutating == 0 && p.validating == 0
		if (registered && on) || (!registered && off) {
			if good++; good == 2 {
				return nil
			}
		} else {
			good = 0
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w within %s (want registered=%t; last dry run: injected=%t, mutating calls=%g, validating calls=%g)",
				errSwitchTimeout, switchTimeout, registered, last.injected, last.mutating, last.validating)
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(200 * time.Millisecond):
		}
	}
}
