package main

import (
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// serialSamples is how many Pod creates the serial probe sends, one at a
// time, after each phase's burst.
const serialSamples = 200

// serialPod is the probe's Pod: the annotated template as a bare Pod with
// the webhooks (modelgate injects it in full, as it does a Pod a human
// creates), the injected template without them (the same Pod, stored as
// is).
func serialPod(ns string, tmpl *corev1.PodTemplateSpec) *corev1.Pod {
	t := tmpl.DeepCopy()
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ns, GenerateName: "serial-", Labels: t.Labels, Annotations: t.Annotations,
		},
		Spec: t.Spec,
	}
}

// serialCreates sends serialSamples server-side dry-run Pod creates one
// after the other and returns each one's latency as the client saw it:
// the whole request through authentication, admission (modelgate's
// webhooks, when registered) and validation, without the etcd write or any
// controller. Unlike the burst, nothing else competes for the CPUs, and
// the samples are timed exactly rather than binned into histograms.
func (b *bench) serialCreates(ctx context.Context, ns string, webhooks bool) ([]time.Duration, error) {
	tmpl := b.template
	if webhooks {
		tmpl = &annotatedDeployment(ns, templateName, 1).Spec.Template
	}
	out := make([]time.Duration, 0, serialSamples)
	for range serialSamples {
		pod := serialPod(ns, tmpl)
		start := time.Now()
		if err := b.dev.Create(ctx, pod, client.DryRunAll); err != nil {
			return nil, fmt.Errorf("dry-run creating a Pod in %s: %w", ns, err)
		}
		out = append(out, time.Since(start))
		if webhooks && !isInjected(pod) {
			return nil, fmt.Errorf("the serial probe's Pod in %s was not injected although modelgate's webhooks are registered", ns)
		}
	}
	return out, nil
}

// sampleQuantile returns the q-quantile of samples by the nearest-rank
// method (q in (0, 1]); samples need not be sorted.
func sampleQuantile(samples []time.Duration, q float64) time.Duration {
	if len(samples) == 0 {
		return 0
	}
	s := slices.Clone(samples)
	slices.Sort(s)
	rank := int(math.Ceil(q * float64(len(s))))
	return s[min(max(rank, 1), len(s))-1]
}
