package prometheus_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/modelgate/modelgate/test/harnesses/cluster"
	"github.com/modelgate/modelgate/test/harnesses/prometheus"
)

// installMonitoring does what installing kube-prometheus and then
// config/prometheus does: the Prometheus Operator (its CRDs and RBAC, and
// the Operator itself, running until the test ends), Prometheus's account,
// and config/prometheus's objects; and proves that the Prometheus account
// lists modelgate's endpoints only thanks to the discovery Role.
func installMonitoring(ctx context.Context, t *testing.T, root, dir string, objs *prometheus.Objects, admin client.Client, k8s kubernetes.Interface, c *cluster.Cluster, second *cluster.Replica) {
	t.Helper()
	if err := prometheus.InstallOperator(ctx, admin, *operatorBinary, root); err != nil {
		t.Fatal(err)
	}
	op, err := prometheus.StartOperator(ctx, c.Admin, *operatorBinary, dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the Prometheus Operator's log (last lines):\n%s", cluster.Tail(op.Log, 30))
		}
		if err := op.Stop(); err != nil {
			t.Error(err)
		}
	})
	if err := prometheus.InstallKubePrometheus(ctx, admin); err != nil {
		t.Fatal(err)
	}
	user := "system:serviceaccount:" + prometheus.KubePrometheusNamespace + ":" + prometheus.KubePrometheusServiceAccount
	groups := []string{"system:serviceaccounts", "system:serviceaccounts:" + prometheus.KubePrometheusNamespace, "system:authenticated"}
	list := &authorizationv1.ResourceAttributes{Namespace: namespace, Verb: "list", Resource: "endpoints"}
	// kube-prometheus's grants act (the authorizer has its binding), so
	// that what they leave out is known to be left out.
	waitAllowed(ctx, t, k8s, user, groups, &authorizationv1.ResourceAttributes{Verb: "get", Resource: "nodes", Subresource: "metrics"})
	if ok, err := allowed(ctx, k8s, user, groups, list); err != nil || ok {
		t.Fatalf("Prometheus's account may list endpoints in %s before config/prometheus is applied (%t, %v): the test proves nothing about its discovery Role", namespace, ok, err)
	}
	if err := prometheus.InstallObjects(ctx, admin, objs, []string{metricsAddr(t, c.Configuration), second.MetricsAddr}); err != nil {
		t.Fatal(err)
	}
	waitAllowed(ctx, t, k8s, user, groups, list)
}

// startPrometheus has the Operator generate the configuration of
// kube-prometheus's Prometheus, with config/prometheus's ServiceMonitor and
// PrometheusRule and the API server's metrics, checks its rule file, and
// starts Prometheus with it (adjusted to a host process: ForHost).
func startPrometheus(ctx context.Context, t *testing.T, objs *prometheus.Objects, dir string, admin client.Client, c *cluster.Cluster) *prometheus.Server {
	t.Helper()
	promDir := filepath.Join(dir, "prometheus")
	if err := os.MkdirAll(promDir, 0o750); err != nil {
		t.Fatal(err)
	}
	sm, pr := objs.ServiceMonitor, objs.PrometheusRule
	cfg, err := prometheus.Configure(ctx, admin, c.Admin, prometheus.ConfigOptions{Binary: *prometheusBinary, Interval: interval, Dir: promDir},
		[]string{sm.Namespace + "/" + sm.Name}, []string{pr.Namespace + "/" + pr.Name})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cfg.Adjusted {
		t.Logf("the Operator's configuration, for a host process: %s", c)
	}
	checkRules(t, cfg, pr)
	checkOperatorStatefulSet(ctx, t, admin)
	s, err := prometheus.Start(ctx, *prometheusBinary, cfg.Path, promDir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("prometheus's log (last lines):\n%s", cluster.Tail(s.Log, 30))
		}
		_ = s.Stop()
	})
	return s
}

// checkOperatorStatefulSet waits until the Operator has made the
// StatefulSet of its own Prometheus, and requires it to have no replicas
// and no Pod: kwok would mark one Running without running it.
func checkOperatorStatefulSet(ctx context.Context, t *testing.T, admin client.Client) {
	t.Helper()
	sts := &appsv1.StatefulSet{}
	key := client.ObjectKey{Namespace: prometheus.KubePrometheusNamespace, Name: "prometheus-" + prometheus.PrometheusName}
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		err := admin.Get(ctx, key, sts)
		return err == nil, client.IgnoreNotFound(err)
	})
	if err != nil {
		t.Fatalf("the Operator's StatefulSet %s: %v", key, err)
	}
	if sts.Spec.Replicas == nil || *sts.Spec.Replicas != 0 {
		t.Errorf("the Operator's StatefulSet %s has replicas %v, want 0", key, sts.Spec.Replicas)
	}
	pods := &corev1.PodList{}
	if err := admin.List(ctx, pods, client.InNamespace(key.Namespace), client.MatchingLabels(sts.Spec.Selector.MatchLabels)); err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) > 0 {
		t.Errorf("the Operator's StatefulSet %s has %d Pods, want none", key, len(pods.Items))
	}
}

// checkRules requires the Operator's rule file of pr to be the one
// promtool's unit tests run (prometheus.RuleFile: TestRules), and to pass
// promtool check rules with every rule of pr counted.
func checkRules(t *testing.T, cfg *prometheus.Config, pr *monitoringv1.PrometheusRule) {
	t.Helper()
	generated, err := cfg.RuleFile(pr.Namespace + "/" + pr.Name)
	if err != nil {
		t.Fatal(err)
	}
	ours, err := prometheus.RuleFile(pr)
	if err != nil {
		t.Fatal(err)
	}
	var gen, want any
	if err := yaml.Unmarshal([]byte(generated), &gen); err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(ours, &want); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, gen); diff != "" {
		t.Errorf("the Operator's rule file differs from prometheus.RuleFile's, which promtool's unit tests run (-RuleFile +Operator):\n%s", diff)
	}
	paths := cfg.RuleFilePaths()
	if len(paths) != 1 {
		t.Fatalf("rule files %v, want the one of PrometheusRule %s/%s", paths, pr.Namespace, pr.Name)
	}
	out, err := exec.Command(*promtoolBinary, "check", "rules", paths[0]).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}
	n := 0
	for _, g := range pr.Spec.Groups {
		n += len(g.Rules)
	}
	if want := fmt.Sprintf("SUCCESS: %d rules found", n); !strings.Contains(string(out), want) {
		t.Fatalf("promtool check rules: want %q in:\n%s", want, out)
	}
	t.Logf("promtool check rules: %d rules", n)
}
