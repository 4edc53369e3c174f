package prometheus

import (
	"bytes"
	"compress/gzip"
	"context"
	"debug/buildinfo"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// PrometheusName is the name of the Prometheus resource the Operator
// reconciles, kube-prometheus's (monitoring/k8s): the Operator writes its
// configuration to the Secret prometheus-k8s and its rule files to the
// ConfigMaps prometheus-k8s-rulefiles-<n>.
const PrometheusName = "k8s"

// configKey is the key of the generated configuration in its Secret.
const configKey = "prometheus.yaml.gz"

// additionalScrapeConfigs is the Secret with the scrape configuration the
// Operator appends to what it generates (spec.additionalScrapeConfigs).
const additionalScrapeConfigs = "prometheus-k8s-additional-scrape-configs"

// Where the Operator's Prometheus Pod has what the configuration refers to.
const (
	// PodServiceAccountDir holds the Pod's service account token and the
	// cluster's CA.
	PodServiceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount/"
	// PodRulesDir holds a folder per rule-file ConfigMap.
	PodRulesDir = "/etc/prometheus/rules/"
)

// ConfigOptions say how the Prometheus resource is made.
type ConfigOptions struct {
	// Binary is the prometheus binary that will run the configuration: the
	// Prometheus resource asks the Operator for its version.
	Binary string
	// Interval is how often Prometheus evaluates the rules, scrapes the
	// API server, and scrapes what a ServiceMonitor does not give an
	// interval; and, unlike the Operator, what one does (see ForHost).
	Interval string
	// Dir gets the service account's files, the rule files and the
	// configuration.
	Dir string
}

// Config is the Operator's configuration for its Prometheus, and its
// copy for a Prometheus run as a host process.
type Config struct {
	// Generated is the configuration as the Operator wrote it.
	Generated []byte
	// RuleFiles are the rule files of the Operator's ConfigMaps, by
	// ConfigMap and key.
	RuleFiles map[string]map[string]string
	// Path is ForHost's configuration, and RulesDir the folder of the rule
	// files it reads, both in ConfigOptions.Dir.
	Path, RulesDir string
	// Adjusted are ForHost's changes.
	Adjusted []string
}

// Configure has the Operator (running: StartOperator) generate the
// configuration of kube-prometheus's Prometheus, monitoring/k8s, running
// as its service account (InstallKubePrometheus), selecting every
// ServiceMonitor and PrometheusRule, and scraping the API server (an
// additional scrape configuration: kube-prometheus has a ServiceMonitor of
// the kubernetes Service, whose Endpoints the simulated API server, on
// loopback, cannot publish). It waits until the configuration scrapes
// each of serviceMonitors (namespace/name) and the rule files hold each of
// rules (namespace/name), then writes them, and the configuration adjusted
// by ForHost, in o.Dir.
//
// The Prometheus resource has no replicas: the StatefulSet the Operator
// creates for it stays empty. On kwok's nodes its Pod would be marked
// Running without running, and the real node cannot reach modelgate's
// replicas on loopback yet (Pod networking): a Pod of it there is a later
// step, which would set replicas and a nodeSelector and drop
// apiserverConfig (a Pod reaches the API server in-cluster).
func Configure(ctx context.Context, c client.Client, admin *rest.Config, o ConfigOptions, serviceMonitors, rules []string) (*Config, error) {
	version, err := binaryVersion(o.Binary)
	if err != nil {
		return nil, err
	}
	host, err := url.Parse(admin.Host)
	if err != nil {
		return nil, err
	}
	saDir := filepath.Join(o.Dir, "serviceaccount")
	if err := writeServiceAccount(ctx, admin, saDir); err != nil {
		return nil, err
	}
	apiserverJob, err := yaml.Marshal([]any{map[string]any{
		"job_name":       "apiserver",
		"scheme":         "https",
		"tls_config":     map[string]any{"ca_file": PodServiceAccountDir + "ca.crt"},
		"authorization":  map[string]any{"credentials_file": PodServiceAccountDir + "token"},
		"static_configs": []any{map[string]any{"targets": []string{host.Host}}},
	}})
	if err != nil {
		return nil, err
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: additionalScrapeConfigs, Namespace: KubePrometheusNamespace},
		Data:       map[string][]byte{"apiserver.yaml": apiserverJob},
	}
	if err := c.Create(ctx, secret); err != nil {
		return nil, fmt.Errorf("creating Secret %s: %w", additionalScrapeConfigs, err)
	}
	objs, err := decodeAll([]byte(prometheusYAML(version, admin.Host, o.Interval)))
	if err != nil {
		return nil, err
	}
	if err := c.Create(ctx, objs[0]); err != nil {
		return nil, fmt.Errorf("creating Prometheus %s: %w", PrometheusName, err)
	}
	cfg, err := waitGenerated(ctx, c, serviceMonitors, rules)
	if err != nil {
		return nil, err
	}
	rulesDir := filepath.Join(o.Dir, "rules")
	cfg.RulesDir = rulesDir
	for cm, files := range cfg.RuleFiles {
		if err := os.MkdirAll(filepath.Join(rulesDir, cm), 0o750); err != nil {
			return nil, err
		}
		for key, content := range files {
			if err := os.WriteFile(filepath.Join(rulesDir, cm, key), []byte(content), 0o600); err != nil {
				return nil, err
			}
		}
	}
	adjusted, changes, err := ForHost(cfg.Generated, HostFiles{
		Mounts:         map[string]string{PodServiceAccountDir: saDir, PodRulesDir: rulesDir},
		Env:            map[string]string{"POD_NAME": "prometheus-" + PrometheusName + "-0", "SHARD": "0"},
		ScrapeInterval: o.Interval,
	})
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(o.Dir, "prometheus.generated.yaml"), cfg.Generated, 0o600); err != nil {
		return nil, err
	}
	cfg.Adjusted = changes
	cfg.Path = filepath.Join(o.Dir, "prometheus.yaml")
	return cfg, os.WriteFile(cfg.Path, adjusted, 0o600)
}

// prometheusYAML is kube-prometheus's Prometheus (every ServiceMonitor and
// PrometheusRule of every namespace, as its service account), for a
// Prometheus outside the cluster: apiserverConfig has it discover through
// the API server's URL, with the token and CA at the paths a Pod has them.
// Its default scrape class turns the TEST-NET-1 addresses the test
// publishes modelgate's replicas at (InstallObjects) back into loopback
// before a scrape, in every job the Operator generates from a
// ServiceMonitor.
func prometheusYAML(version, apiServer, interval string) string {
	return fmt.Sprintf(`apiVersion: monitoring.coreos.com/v1
kind: Prometheus
metadata:
  name: %[1]s
  namespace: %[2]s
spec:
  version: %[3]s
  replicas: 0
  serviceAccountName: %[4]s
  scrapeInterval: %[5]s
  evaluationInterval: %[5]s
  serviceMonitorSelector: {}
  serviceMonitorNamespaceSelector: {}
  ruleSelector: {}
  ruleNamespaceSelector: {}
  additionalScrapeConfigs:
    name: %[6]s
    key: apiserver.yaml
  apiserverConfig:
    host: %[7]s
    authorization:
      credentialsFile: %[8]stoken
    tlsConfig:
      caFile: %[8]sca.crt
  scrapeClasses:
  - name: loopback
    default: true
    relabelings:
    - sourceLabels: [__address__]
      regex: '%[9]s'
      targetLabel: __address__
      replacement: '127.0.0.1:${1}'
`, PrometheusName, KubePrometheusNamespace, version, KubePrometheusServiceAccount, interval,
		additionalScrapeConfigs, apiServer, PodServiceAccountDir, strings.ReplaceAll(testNet, ".", `\.`)+`\d+:(\d+)`)
}

// binaryVersion is the Prometheus version of a binary built from the
// module github.com/prometheus/prometheus.
func binaryVersion(binary string) (string, error) {
	info, err := buildinfo.ReadFile(binary)
	if err != nil {
		return "", fmt.Errorf("reading %s's build information: %w", binary, err)
	}
	v, err := releaseVersion(info.Main.Version)
	if err != nil {
		return "", fmt.Errorf("%s: %w", binary, err)
	}
	return v, nil
}

// releaseVersion is the Prometheus release of a version of its Go module:
// v0.3XX.Y is v3.XX.Y.
func releaseVersion(module string) (string, error) {
	var minor, patch int
	var rest string
	if n, _ := fmt.Sscanf(module, "v0.%d.%d%s", &minor, &patch, &rest); n < 2 || minor < 100 || minor%100 > 99 {
		return "", fmt.Errorf("module version %q is not v0.<major><minor, 2 digits>.<patch>", module)
	}
	return fmt.Sprintf("v%d.%d.%d%s", minor/100, minor%100, patch, rest), nil
}

// writeServiceAccount writes into dir what a Pod of kube-prometheus's
// Prometheus has at PodServiceAccountDir: a token of its service account
// and the cluster's CA.
func writeServiceAccount(ctx context.Context, admin *rest.Config, dir string) error {
	k8s, err := kubernetes.NewForConfig(admin)
	if err != nil {
		return err
	}
	tr, err := k8s.CoreV1().ServiceAccounts(KubePrometheusNamespace).CreateToken(ctx, KubePrometheusServiceAccount,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(24 * 3600))}}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("a token for %s/%s: %w", KubePrometheusNamespace, KubePrometheusServiceAccount, err)
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "ca.crt"), admin.CAData, 0o600); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "token"), []byte(tr.Status.Token), 0o600)
}

// waitGenerated waits until the Operator's configuration has a job for
// the first endpoint of each ServiceMonitor of serviceMonitors, with its
// authorization's credentials (the token controller fills the Secret they
// come from after the ServiceMonitor is created, and the Operator leaves a
// ServiceMonitor out until it can read them), and its rule files hold each
// PrometheusRule of rules.
func waitGenerated(ctx context.Context, c client.Client, serviceMonitors, rules []string) (*Config, error) {
	var last error
	var cfg *Config
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		// Not there yet, or not whole yet: the poll goes on, and says
		// why it ended.
		cfg, last = readGenerated(ctx, c)
		if last == nil {
			last = cfg.has(serviceMonitors, rules)
		}
		return last == nil, nil
	})
	if err != nil {
		return nil, fmt.Errorf("the Operator's configuration of %s/%s: %w (last: %w)", KubePrometheusNamespace, PrometheusName, err, last)
	}
	return cfg, nil
}

// readGenerated reads the configuration Secret and the rule-file
// ConfigMaps the Operator wrote.
func readGenerated(ctx context.Context, c client.Client) (*Config, error) {
	s := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: KubePrometheusNamespace, Name: "prometheus-" + PrometheusName}, s); err != nil {
		return nil, err
	}
	gz, ok := s.Data[configKey]
	if !ok {
		return nil, fmt.Errorf("secret %s has no %s", s.Name, configKey)
	}
	r, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		return nil, err
	}
	generated, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	cms := &corev1.ConfigMapList{}
	if err := c.List(ctx, cms, client.InNamespace(KubePrometheusNamespace)); err != nil {
		return nil, err
	}
	cfg := &Config{Generated: generated, RuleFiles: map[string]map[string]string{}}
	for _, cm := range cms.Items {
		if strings.HasPrefix(cm.Name, "prometheus-"+PrometheusName+"-rulefiles-") {
			cfg.RuleFiles[cm.Name] = cm.Data
		}
	}
	return cfg, nil
}

// has returns an error unless cfg scrapes each ServiceMonitor with
// credentials and its rule files hold each PrometheusRule.
func (cfg *Config) has(serviceMonitors, rules []string) error {
	var gen struct {
		RuleFiles     []string         `json:"rule_files"`
		ScrapeConfigs []map[string]any `json:"scrape_configs"`
	}
	if err := yaml.Unmarshal(cfg.Generated, &gen); err != nil {
		return err
	}
	for _, sm := range serviceMonitors {
		i := slices.IndexFunc(gen.ScrapeConfigs, func(j map[string]any) bool { return j["job_name"] == "serviceMonitor/"+sm+"/0" })
		if i < 0 {
			return fmt.Errorf("no job for ServiceMonitor %s", sm)
		}
		if auth, ok := gen.ScrapeConfigs[i]["authorization"].(map[string]any); !ok || auth["credentials"] == "" || auth["credentials"] == nil {
			return fmt.Errorf("the job of ServiceMonitor %s has no credentials", sm)
		}
	}
	for _, pr := range rules {
		if _, err := cfg.RuleFile(pr); err != nil {
			return err
		}
	}
	if len(rules) > 0 && len(gen.RuleFiles) == 0 {
		return errors.New("no rule_files")
	}
	return nil
}

// RuleFile is the rule file the Operator wrote for the PrometheusRule pr
// (namespace/name): its ConfigMaps' key is <namespace>-<name>-<uid>.yaml.
func (cfg *Config) RuleFile(pr string) (string, error) {
	prefix := strings.Replace(pr, "/", "-", 1) + "-"
	var found []string
	for _, files := range cfg.RuleFiles {
		for key, content := range files {
			if strings.HasPrefix(key, prefix) && strings.HasSuffix(key, ".yaml") && len(key) == len(prefix)+36+len(".yaml") {
				found = append(found, content)
			}
		}
	}
	if len(found) != 1 {
		return "", fmt.Errorf("%d rule files of PrometheusRule %s, want 1", len(found), pr)
	}
	return found[0], nil
}

// RuleFilePaths are the host paths of the rule files Configure wrote.
func (cfg *Config) RuleFilePaths() []string {
	var paths []string
	for cm, files := range cfg.RuleFiles {
		for key := range files {
			paths = append(paths, filepath.Join(cfg.RulesDir, cm, key))
		}
	}
	slices.Sort(paths)
	return paths
}
