package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/modelgate/modelgate/api/annotations"
	"github.com/modelgate/modelgate/test/harnesses/cluster"
	"github.com/modelgate/modelgate/test/harnesses/prometheus"
)

// What make run sets up acts only once the API server's informers, or
// modelgate's, have seen it; make run says it is ready once each acts, so
// that what it prints works at once (`make run`'s users and test/suites/makerun
// act on it right away).
const (
	waitPoll    = 100 * time.Millisecond
	waitTimeout = time.Minute
)

// waitNamespaceTeam waits until modelgate stamps namespace ns's team label
// on the workloads created there: its webhook reads namespaces from its
// cache, which sees a new label a moment after it is set. It asks with
// server-side dry runs of a Pod that opts in.
func waitNamespaceTeam(ctx context.Context, c client.Client, ns, team string) error {
	last, err := cluster.WaitDryRun(ctx, c, func() *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "team-probe", Annotations: map[string]string{annotations.Inject: "true"}},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "probe", Image: "registry.invalid/probe"}}},
		}
	}, func(p *corev1.Pod) bool { return p.Labels[annotations.TeamLabel] == team })
	if err != nil {
		var got string
		if last != nil {
			got = last.Labels[annotations.TeamLabel]
		}
		return fmt.Errorf("waiting for modelgate to label namespace %s's Pods %s=%s (last %q): %w", ns, annotations.TeamLabel, team, got, err)
	}
	return nil
}

// waitMetricsReader waits until the API server's authorizer lets the
// metrics reader get /metrics (RBAC reads bindings from an informer), as
// modelgate asks it for each scrape: the scrape the usage prints works at
// once.
func waitMetricsReader(ctx context.Context, c client.Client) error {
	err := wait.PollUntilContextTimeout(ctx, waitPoll, waitTimeout, true, func(ctx context.Context) (bool, error) {
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User:                  "system:serviceaccount:" + metricsReaderNamespace + ":" + metricsReaderName,
			Groups:                []string{"system:serviceaccounts", "system:serviceaccounts:" + metricsReaderNamespace, "system:authenticated"},
			NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: "/metrics", Verb: "get"},
		}}
		if err := c.Create(ctx, sar); err != nil {
			return false, fmt.Errorf("asking whether %s may get /metrics: %w", metricsReaderName, err)
		}
		return sar.Status.Allowed, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for %s/%s to be allowed to get /metrics: %w", metricsReaderNamespace, metricsReaderName, err)
	}
	return nil
}

// prometheusTargets are what make run's Prometheus scrapes: modelgate (one
// replica) and the API server.
const prometheusTargets = 2

// waitPrometheusTargets waits until Prometheus has scraped each of its
// targets: its discovery reads the metrics Service's Endpoints with
// config/prometheus's Role, and modelgate lets its scraper in through the
// API server's authorizer, both a moment after they are created.
func waitPrometheusTargets(ctx context.Context, s *prometheus.Server) error {
	last, err := s.WaitTargetsUp(ctx, prometheusTargets, 2*time.Minute)
	if err != nil {
		for _, t := range last {
			err = errors.Join(err, fmt.Errorf("target %s: %s %s", t.ScrapeURL, t.Health, t.LastError))
		}
		return fmt.Errorf("prometheus: %w; see %s", err, s.Log)
	}
	return nil
}
