package prometheus

import (
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"
)

// generated is a configuration as the Operator generates it for its Pod
// (abridged): a ServiceMonitor's job, with shard relabeling, the API
// server's job from an additional scrape configuration, and the rules.
const generated = `global:
  scrape_interval: 2s
  external_labels:
    prometheus: monitoring/k8s
    prometheus_replica: $(POD_NAME)
rule_files:
- /etc/prometheus/rules/prometheus-k8s-rulefiles-0/*.yaml
scrape_configs:
- job_name: serviceMonitor/modelgate-system/modelgate/0
  scrape_interval: 30s
  scheme: https
  authorization:
    type: Bearer
    credentials: tok
  kubernetes_sd_configs:
  - role: endpoints
    api_server: https://127.0.0.1:6443
    authorization:
      credentials_file: /var/run/secrets/kubernetes.io/serviceaccount/token
    tls_config:
      ca_file: /var/run/secrets/kubernetes.io/serviceaccount/ca.crt
  relabel_configs:
  - source_labels: [__tmp_hash]
    regex: $(SHARD)
    action: keep
  - source_labels: [__address__]
    regex: 192\.0\.2\.\d+:(\d+)
    target_label: __address__
    replacement: 127.0.0.1:${1}
- job_name: apiserver
  tls_config:
    ca_file: /var/run/secrets/kubernetes.io/serviceaccount/ca.crt
  static_configs:
  - targets: [127.0.0.1:6443]
`

// TestForHost: ForHost changes the Pod's paths, the config-reloader's
// variables and the scrape intervals, and nothing else; a path or a
// variable it has nothing for is an error.
func TestForHost(t *testing.T) {
	host := HostFiles{
		Mounts: map[string]string{PodServiceAccountDir: "/tmp/x/sa", PodRulesDir: "/tmp/x/rules"},
		Env:    map[string]string{"POD_NAME": "prometheus-k8s-0", "SHARD": "0"},
	}
	want := strings.NewReplacer(
		"$(POD_NAME)", "prometheus-k8s-0",
		"$(SHARD)", `"0"`,
		"/etc/prometheus/rules/", "/tmp/x/rules/",
		"/var/run/secrets/kubernetes.io/serviceaccount/", "/tmp/x/sa/",
	).Replace(generated)
	for name, tc := range map[string]struct {
		generated string
		host      func(*HostFiles)
		want      string
		// wantChanges counts the changes ForHost reports, each once.
		wantChanges int
		wantErr     string
	}{
		// The replica, the shard, the rule files, the token, the CA (twice).
		"as generated, for the host": {generated: generated, want: want, wantChanges: 5},
		"scrape intervals": {generated: generated, host: func(h *HostFiles) { h.ScrapeInterval = "1s" },
			want: strings.ReplaceAll(strings.ReplaceAll(want, "30s", "1s"), "2s", "1s")},
		"a variable the reloader has not": {generated: generated + "  - labels: {x: $(NODE_NAME)}\n", wantErr: "$(NODE_NAME) has no value"},
		"a path under no mount": {generated: strings.ReplaceAll(generated, "/etc/prometheus/rules/", "/etc/prometheus/certs/"),
			wantErr: "/etc/prometheus/certs/prometheus-k8s-rulefiles-0/*.yaml is under no folder"},
		"a relative path is the Pod's working folder's": {generated: strings.ReplaceAll(generated, "/etc/prometheus/rules/", "rules/"),
			want: strings.ReplaceAll(want, "/tmp/x/rules/", "rules/")},
	} {
		t.Run(name, func(t *testing.T) {
			h := host
			if tc.host != nil {
				tc.host(&h)
			}
			got, changes, err := ForHost([]byte(tc.generated), h)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one saying %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var gotV, wantV any
			if err := yaml.Unmarshal(got, &gotV); err != nil {
				t.Fatal(err)
			}
			if err := yaml.Unmarshal([]byte(tc.want), &wantV); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(wantV, gotV); diff != "" {
				t.Errorf("ForHost (-want +got):\n%s", diff)
			}
			if tc.wantChanges != 0 && len(changes) != tc.wantChanges {
				t.Errorf("changes %q, want %d", changes, tc.wantChanges)
			}
		})
	}
}

// TestReleaseVersion: the Prometheus resource asks for the release of
// the binary that runs its configuration, which its module's version
// encodes.
func TestReleaseVersion(t *testing.T) {
	for name, tc := range map[string]struct{ module, want string }{
		"3.16.0":              {module: "v0.316.0", want: "v3.16.0"},
		"3.5.2":               {module: "v0.305.2", want: "v3.5.2"},
		"a release candidate": {module: "v0.316.0-rc.1", want: "v3.16.0-rc.1"},
		"a 2.x module":        {module: "v0.55.1"},
		"a development build": {module: "(devel)"},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := releaseVersion(tc.module)
			if tc.want == "" {
				if err == nil {
					t.Fatalf("releaseVersion(%q) = %q, want an error", tc.module, got)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("releaseVersion(%q) = %q, %v; want %q", tc.module, got, err, tc.want)
			}
		})
	}
	// A test binary's main module has no version: refused, not guessed.
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if v, err := binaryVersion(self); err == nil {
		t.Fatalf("binaryVersion of a test binary = %q, want an error", v)
	}
}

// TestNeedsMarks: an expression reading another exporter's metrics must
// say so in its description.
func TestNeedsMarks(t *testing.T) {
	for name, tc := range map[string]struct {
		expr, description, want, wantErr string
	}{
		"modelgate's":            {expr: `sum(rate(modelgate_mutating_reviews_total[5m]))`},
		"the API server's":       {expr: `rate(apiserver_admission_webhook_rejection_count[5m]) > 0`},
		"kube-state-metrics":     {expr: `kube_deployment_status_replicas_available < 1`, description: "x. " + NeedsKubeStateMetrics, want: NeedsKubeStateMetrics},
		"cert-manager":           {expr: `certmanager_certificate_expiration_timestamp_seconds - time() < 1`, description: NeedsCertManager, want: NeedsCertManager},
		"unmarked":               {expr: `kube_pod_info`, description: "pods", wantErr: "must say"},
		"two other exporters":    {expr: `kube_pod_info + certmanager_certificate_ready_status`, description: NeedsKubeStateMetrics + NeedsCertManager, wantErr: "two other exporters"},
		"does not parse":         {expr: `sum(`, wantErr: "parsing"},
		"a name by regex is not": {expr: `{__name__=~"modelgate_.*"}`},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := exprNeeds(tc.expr, tc.description)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one saying %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("exprNeeds = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

// TestDashboardQueriesSubstitutes the variables, longest name first, and
// refuses a variable without a value.
func TestDashboardQueriesSubstitutes(t *testing.T) {
	d := []byte(`{"panels": [{"title": "p", "targets": [{"expr": "rate(modelgate_x_total{namespace=~\"$namespace\"}[$__rate_interval]) + increase(modelgate_y_total[$__range])"}]}]}`)
	qs, err := DashboardQueries(d, DashboardVariables)
	if err != nil {
		t.Fatal(err)
	}
	want := `rate(modelgate_x_total{namespace=~"modelgate-system"}[1m]) + increase(modelgate_y_total[15m])`
	if len(qs) != 1 || qs[0].Expr != want {
		t.Fatalf("queries %+v, want one %q", qs, want)
	}
	if _, err := DashboardQueries(d, map[string]string{"$namespace": "x"}); err == nil || !strings.Contains(err.Error(), "no value") {
		t.Fatalf("error %v, want one saying a variable has no value", err)
	}
}
