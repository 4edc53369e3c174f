package prometheus

import (
	"errors"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strings"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// APIServer is how Prometheus reaches the cluster's API server, for
// service discovery and to scrape its metrics: as its own service
// account (kube-prometheus's monitoring/prometheus-k8s).
type APIServer struct {
	// URL is the API server's https URL; CAFile its CA.
	URL, CAFile string
	// TokenFile holds the Prometheus service account's token.
	TokenFile string
}

// SecretValue reads a key of a Secret in the ServiceMonitor's namespace,
// as the Prometheus Operator does for an endpoint's authorization.
type SecretValue func(sel corev1.SecretKeySelector) (string, error)

// JobOptions adjust what the Operator would generate to the test cluster.
type JobOptions struct {
	// ScrapeInterval replaces the endpoints' interval (the test cannot
	// wait 30 s between scrapes); empty keeps theirs.
	ScrapeInterval string
	// Loopback rewrites each discovered endpoint's address to 127.0.0.1
	// with its port. The simulated cluster's modelgate is a process on
	// loopback, not a Pod, and the API server refuses loopback addresses
	// in Endpoints: the test publishes each replica under an address of
	// TEST-NET-1 (192.0.2.0/24, never routed) that this turns back into
	// loopback before any scrape.
	Loopback bool
}

// ServiceMonitorJobs is the scrape configuration the Prometheus Operator
// generates for sm (its default service discovery role, endpoints), one
// job per endpoint. It returns an error for any field of sm it does not
// translate, so that nothing sm says is silently left out.
func ServiceMonitorJobs(sm *monitoringv1.ServiceMonitor, api APIServer, secret SecretValue, o JobOptions) ([]map[string]any, error) {
	if err := onlyTranslated(sm); err != nil {
		return nil, fmt.Errorf("ServiceMonitor %s/%s: %w", sm.Namespace, sm.Name, err)
	}
	var jobs []map[string]any
	for i, ep := range sm.Spec.Endpoints {
		job := map[string]any{
			"job_name":     fmt.Sprintf("serviceMonitor/%s/%s/%d", sm.Namespace, sm.Name, i),
			"honor_labels": false,
			"metrics_path": ep.Path,
			"kubernetes_sd_configs": []any{map[string]any{
				"role":          "endpoints",
				"api_server":    api.URL,
				"namespaces":    map[string]any{"names": []string{sm.Namespace}},
				"tls_config":    map[string]any{"ca_file": api.CAFile},
				"authorization": map[string]any{"credentials_file": api.TokenFile},
			}},
		}
		if ep.Scheme != nil {
			// The Operator takes either case; Prometheus, lower case.
			job["scheme"] = strings.ToLower(string(*ep.Scheme))
		}
		if ep.Interval != "" {
			job["scrape_interval"] = string(ep.Interval)
		}
		if o.ScrapeInterval != "" {
			job["scrape_interval"] = o.ScrapeInterval
		}
		if ep.TLSConfig != nil {
			job["tls_config"] = map[string]any{"insecure_skip_verify": ep.TLSConfig.InsecureSkipVerify != nil && *ep.TLSConfig.InsecureSkipVerify}
		}
		if a := ep.Authorization; a != nil {
			if a.Credentials == nil {
				return nil, errors.New("endpoint authorization without credentials")
			}
			v, err := secret(*a.Credentials)
			if err != nil {
				return nil, fmt.Errorf("endpoint %d's authorization: %w", i, err)
			}
			typ := a.Type
			if typ == "" {
				typ = "Bearer"
			}
			job["authorization"] = map[string]any{"type": typ, "credentials": v}
		}
		job["relabel_configs"] = relabelings(sm, ep, o)
		jobs = append(jobs, job)
	}
	return jobs, nil
}

// relabelings are the Operator's: keep the selected Services' endpoints
// on the named port, and label each target with its namespace, Service,
// Pod, job and endpoint.
func relabelings(sm *monitoringv1.ServiceMonitor, ep monitoringv1.Endpoint, o JobOptions) []any {
	var rs []any
	keys := make([]string, 0, len(sm.Spec.Selector.MatchLabels))
	for k := range sm.Spec.Selector.MatchLabels {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		name := sanitize(k)
		rs = append(rs,
			map[string]any{"action": "keep", "source_labels": []string{"__meta_kubernetes_service_label_" + name, "__meta_kubernetes_service_labelpresent_" + name},
				"regex": "(" + sm.Spec.Selector.MatchLabels[k] + ");true"})
	}
	rs = append(rs,
		map[string]any{"action": "keep", "source_labels": []string{"__meta_kubernetes_endpoint_port_name"}, "regex": ep.Port},
		map[string]any{"source_labels": []string{"__meta_kubernetes_endpoint_address_target_kind", "__meta_kubernetes_endpoint_address_target_name"},
			"separator": ";", "regex": "Pod;(.*)", "replacement": "${1}", "target_label": "pod"},
		map[string]any{"source_labels": []string{"__meta_kubernetes_namespace"}, "target_label": "namespace"},
		map[string]any{"source_labels": []string{"__meta_kubernetes_service_name"}, "target_label": "service"},
		map[string]any{"source_labels": []string{"__meta_kubernetes_pod_name"}, "target_label": "pod"},
		map[string]any{"source_labels": []string{"__meta_kubernetes_pod_container_name"}, "target_label": "container"},
		map[string]any{"source_labels": []string{"__meta_kubernetes_service_name"}, "target_label": "job", "replacement": "${1}"},
		map[string]any{"target_label": "endpoint", "replacement": ep.Port},
	)
	if o.Loopback {
		rs = append(rs, map[string]any{"source_labels": []string{"__address__"}, "regex": `192\.0\.2\.\d+:(\d+)`,
			"target_label": "__address__", "replacement": "127.0.0.1:${1}"})
	}
	return rs
}

// sanitize is Prometheus's label name sanitation of Kubernetes labels.
func sanitize(s string) string {
	b := []byte(s)
	for i, c := range b {
		if (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') && (c < '0' || c > '9') && c != '_' {
			b[i] = '_'
		}
	}
	return string(b)
}

// onlyTranslated returns an error when sm sets a field ServiceMonitorJobs
// does not translate.
func onlyTranslated(sm *monitoringv1.ServiceMonitor) error {
	spec := sm.Spec.DeepCopy()
	if len(spec.Selector.MatchExpressions) > 0 {
		return errors.New("spec.selector.matchExpressions is not translated")
	}
	spec.Selector.MatchLabels = nil
	for i := range spec.Endpoints {
		ep := &spec.Endpoints[i]
		ep.Port, ep.Path, ep.Scheme, ep.Interval, ep.Authorization = "", "", nil, "", nil
		if ep.TLSConfig != nil {
			tc := *ep.TLSConfig
			tc.InsecureSkipVerify = nil
			if !reflect.ValueOf(tc).IsZero() {
				return fmt.Errorf("spec.endpoints[%d].tlsConfig: only insecureSkipVerify is translated", i)
			}
			ep.TLSConfig = nil
		}
		if !reflect.ValueOf(*ep).IsZero() {
			return fmt.Errorf("spec.endpoints[%d] sets a field that is not translated: %+v", i, *ep)
		}
	}
	spec.Endpoints = nil
	if !reflect.ValueOf(*spec).IsZero() {
		return fmt.Errorf("spec sets a field that is not translated: %+v", *spec)
	}
	return nil
}

// StaticJob scrapes fixed targets over https with the API server's CA and
// the Prometheus service account's token: the API server's own metrics.
func StaticJob(name string, api APIServer, interval string, targets ...string) map[string]any {
	return map[string]any{
		"job_name":        name,
		"scrape_interval": interval,
		"scheme":          "https",
		"tls_config":      map[string]any{"ca_file": api.CAFile},
		"authorization":   map[string]any{"credentials_file": api.TokenFile},
		"static_configs":  []any{map[string]any{"targets": targets}},
	}
}

// WriteConfig writes Prometheus's configuration: the global scrape and
// evaluation interval, the rule files and the jobs.
func WriteConfig(path, interval string, ruleFiles []string, jobs []map[string]any) error {
	b, err := yaml.Marshal(map[string]any{
		"global":         map[string]any{"scrape_interval": interval, "evaluation_interval": interval},
		"rule_files":     ruleFiles,
		"scrape_configs": jobs,
	})
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o600)
}
