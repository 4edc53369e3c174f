package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/modelgate/modelgate/api/annotations"
	"github.com/modelgate/modelgate/test/harnesses/certmanager"
	"github.com/modelgate/modelgate/test/harnesses/cluster"
)

// make run INSTALL=helm installs modelgate as the README tells users to:
// the chart, by helm, with its defaults (cert-manager issuing the
// certificates) and the loaders' environment pointing at make run's model
// source, into Pods on the real node, the one node that runs containers.
const (
	// installHost and installHelm are --install's values.
	installHost = "host"
	installHelm = "helm"

	// chartNamespace and chartRelease are where and as what the README's
	// helm install puts the chart.
	chartNamespace = "modelgate-system"
	chartRelease   = "modelgate"
	// chartReplicas is the chart's default replicas.
	chartReplicas = 2
	// chartMetricsPort is the port each replica serves its metrics on.
	chartMetricsPort = 8443
	// chartTimeout bounds the wait for the replicas to pull, start and
	// answer reviews.
	chartTimeout = 4 * time.Minute
	// chartNameLabel=chartName selects the chart's Pods.
	chartNameLabel = "app.kubernetes.io/name"
	chartName      = "modelgate"
)

// chartImage is the image the chart installs by default,
// ghcr.io/modelgate/modelgate:<Chart.yaml's appVersion>, which the node's
// registry serves as modelgate's image. The Configuration's default loader
// image is the same reference (a release's own tag, or :latest for a build
// that is not one, as the chart's appVersion is).
func chartImage(root string) (string, error) {
	path := filepath.Join(root, "charts", "modelgate", "Chart.yaml")
	b, err := os.ReadFile(path) //nolint:gosec // the repository's own chart.
	if err != nil {
		return "", err
	}
	var chart struct {
		AppVersion string `json:"appVersion"`
	}
	if err := yaml.Unmarshal(b, &chart); err != nil {
		return "", fmt.Errorf("reading %s: %w", path, err)
	}
	if chart.AppVersion == "" {
		return "", fmt.Errorf("%s has no appVersion", path)
	}
	return "ghcr.io/modelgate/modelgate:" + chart.AppVersion, nil
}

// chartValues are the values make run installs the chart with: its
// defaults, and the loaders' environment and arguments as host mode's
// Configuration has them (configureLoader).
func chartValues(models *modelSource) map[string]any {
	env := make([]any, 0, 3)
	for _, e := range models.loaderEnv() {
		env = append(env, map[string]any{"name": e.Name, "value": e.Value})
	}
	args := make([]any, 0, len(loaderArgs))
	for _, a := range loaderArgs {
		args = append(args, a)
	}
	return map[string]any{"configuration": map[string]any{"injection": map[string]any{"loader": map[string]any{
		"env": env, "args": args,
	}}}}
}

// installChart creates chartNamespace with its Pods sent to the real node,
// starts cert-manager's controllers, helm installs the chart and waits
// until its replicas are Ready and answer reviews. It returns cert-manager,
// which the caller stops, and the replicas.
func installChart(ctx context.Context, c *cluster.Cluster, admin client.Client, root, devDir, helmBinary, certManagerDir string, models *modelSource) (*certmanager.CertManager, []corev1.Pod, error) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: chartNamespace,
		Labels: map[string]string{cluster.RealNodeNamespaceLabel: cluster.RealNodeRequiredValue}}}
	if err := admin.Create(ctx, ns); err != nil {
		return nil, nil, fmt.Errorf("creating namespace %s: %w", chartNamespace, err)
	}
	if err := cluster.WaitRequiredPlacement(ctx, admin, chartNamespace, c.RealNode.Name); err != nil {
		return nil, nil, err
	}
	cm, err := certmanager.Start(ctx, c.Admin, certmanager.Options{
		Binary: filepath.Join(certManagerDir, "certmanager"), CRDs: filepath.Join(certManagerDir, "crds"),
		Kubeconfig: c.Kubeconfig, Log: filepath.Join(c.LogDir, "cert-manager.log"),
	})
	if err != nil {
		return nil, nil, fmt.Errorf("starting cert-manager: %w", err)
	}
	pods, err := helmInstall(ctx, c, admin, root, devDir, helmBinary, models)
	if err != nil {
		return nil, nil, errors.Join(err, cm.Stop())
	}
	return cm, pods, nil
}

// helmInstall runs the README's helm install and waits for the replicas.
func helmInstall(ctx context.Context, c *cluster.Cluster, admin client.Client, root, devDir, helmBinary string, models *modelSource) ([]corev1.Pod, error) {
	values, err := yaml.Marshal(chartValues(models))
	if err != nil {
		return nil, err
	}
	valuesFile := filepath.Join(devDir, "values.yaml")
	if err := os.WriteFile(valuesFile, values, 0o600); err != nil {
		return nil, err
	}
	homes := filepath.Join(devDir, "helm")
	//nolint:gosec // --helm is the developer's own flag (make run gives the pinned helm).
	cmd := exec.CommandContext(ctx, helmBinary, "install", chartRelease, filepath.Join(root, "charts", "modelgate"),
		"--namespace", chartNamespace, "--values", valuesFile, "--kubeconfig", c.Kubeconfig)
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+filepath.Join(homes, "cache"),
		"HELM_CONFIG_HOME="+filepath.Join(homes, "config"), "HELM_DATA_HOME="+filepath.Join(homes, "data"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("helm install %s charts/modelgate: %w\n%s", chartRelease, err, out)
	}
	return waitChart(ctx, admin)
}

// waitChart waits until the chart's Deployment has its replicas, all
// Ready, and a server-side dry run of an opted-in Pod in "default" comes
// back injected: the API server calls them.
func waitChart(ctx context.Context, c client.Client) ([]corev1.Pod, error) {
	var (
		ready []corev1.Pod
		last  error
	)
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, chartTimeout, true, func(ctx context.Context) (bool, error) {
		ready, last = readyReplicas(ctx, c)
		if last != nil {
			return false, nil //nolint:nilerr // polled again; the last error is reported on timeout
		}
		probe := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceDefault, Name: "injection-probe", Annotations: map[string]string{
				annotations.Inject: "true", annotations.Engine: "vllm", annotations.GPU: "1",
			}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "server", Image: "vllm/vllm-openai:v0.9.1"}}},
		}
		if last = c.Create(ctx, probe, client.DryRunAll); last != nil {
			return false, nil //nolint:nilerr // the webhook may refuse for a moment: asked again
		}
		if _, ok := probe.Annotations[annotations.Injected]; !ok {
			last = errors.New("a dry run of an opted-in Pod came back without modelgate's injection")
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		return nil, fmt.Errorf("waiting for the chart's %d replicas to be Ready and answer reviews: %w\n%s",
			chartReplicas, errors.Join(err, last), chartReport(context.WithoutCancel(ctx), c))
	}
	return ready, nil
}

// readyReplicas returns the chart's Pods, once the Deployment has its
// replicas and they are all Ready; else an error saying what is missing.
func readyReplicas(ctx context.Context, c client.Client) ([]corev1.Pod, error) {
	d := &appsv1.Deployment{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: chartNamespace, Name: chartRelease}, d); err != nil {
		return nil, err
	}
	if d.Status.ReadyReplicas != chartReplicas || d.Status.Replicas != chartReplicas {
		return nil, fmt.Errorf("deployment %s/%s: %d of %d replicas Ready", chartNamespace, chartRelease, d.Status.ReadyReplicas, d.Status.Replicas)
	}
	pods := &corev1.PodList{}
	if err := c.List(ctx, pods, client.InNamespace(chartNamespace), client.MatchingLabels{chartNameLabel: chartName}); err != nil {
		return nil, err
	}
	var ready []corev1.Pod
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil && p.Status.PodIP != "" && cluster.PodReady(&p) {
			ready = append(ready, p)
		}
	}
	if len(ready) != chartReplicas {
		return nil, fmt.Errorf("%d of the chart's Pods Ready", len(ready))
	}
	slices.SortFunc(ready, func(a, b corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	return ready, nil
}

// chartReport describes the chart's namespace's Pods and events, for a
// wait that failed.
func chartReport(ctx context.Context, c client.Client) string {
	var b strings.Builder
	pods := &corev1.PodList{}
	if err := c.List(ctx, pods, client.InNamespace(chartNamespace)); err != nil && !apierrors.IsNotFound(err) {
		fmt.Fprintf(&b, "listing the Pods of %s: %v\n", chartNamespace, err)
	}
	for _, p := range pods.Items {
		fmt.Fprintf(&b, "pod %s/%s on %q: %s", p.Namespace, p.Name, p.Spec.NodeName, p.Status.Phase)
		for _, s := range p.Status.ContainerStatuses {
			fmt.Fprintf(&b, " [%s ready=%t restarts=%d]", s.Name, s.Ready, s.RestartCount)
			if w := s.State.Waiting; w != nil {
				fmt.Fprintf(&b, " %s: %s", w.Reason, w.Message)
			}
		}
		b.WriteString("\n")
	}
	events := &corev1.EventList{}
	_ = c.List(ctx, events, client.InNamespace(chartNamespace))
	for _, e := range events.Items {
		if e.Type == corev1.EventTypeWarning {
			fmt.Fprintf(&b, "event %s %s: %s %s\n", e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Reason, e.Message)
		}
	}
	return b.String()
}

// printChartMetrics prints how to scrape one replica's metrics with the
// reader's token; k is the kubectl command line the usage gave.
func printChartMetrics(k string, pods []corev1.Pod) {
	fmt.Printf(`
modelgate's metrics, served by each replica on its Pod's address, port %d
(HTTPS, to tokens allowed to get /metrics; docs/operations.md, "Metrics and
alerts"), here %s's:

  curl -sk -H "Authorization: Bearer $(%s -n %s create token %s)" https://%s:%d/metrics | grep '^modelgate_'
`, chartMetricsPort, pods[0].Name, k, metricsReaderNamespace, metricsReaderName, pods[0].Status.PodIP, chartMetricsPort)
}

// printChart says that modelgate runs from the chart, and how to see it.
func printChart(root, helmBinary, k string, c *cluster.Cluster, cm *certmanager.CertManager) {
	rel := func(p string) string {
		if r, err := filepath.Rel(root, p); err == nil && !strings.HasPrefix(r, "..") {
			return r
		}
		return p
	}
	fmt.Printf(`
modelgate runs from the chart (make run INSTALL=helm): helm install %s
charts/modelgate -n %s, with the chart's defaults and the loaders'
environment, its %d replicas in Pods on the real node, their certificate
issued by cert-manager's own controllers (a process here; its log:
%s):

  %s -n %s get pods -o wide
  %s --kubeconfig %s list -A

`, chartRelease, chartNamespace, chartReplicas, rel(cm.Log()), k, chartNamespace, rel(helmBinary), rel(c.Kubeconfig))
}
