package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Where a series is scraped from.
const (
	fromAPIServer = "kube-apiserver"
	fromModelgate = "modelgate"
)

// families are one scrape's metric families by name.
type families map[string]*dto.MetricFamily

// parseFamilies parses the Prometheus text format.
func parseFamilies(r io.Reader) (families, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	f, err := p.TextToMetricFamilies(r)
	if err != nil {
		return nil, fmt.Errorf("parsing metrics: %w", err)
	}
	return f, nil
}

// labelsOf returns a series' labels as a map.
func labelsOf(m *dto.Metric) map[string]string {
	out := make(map[string]string, len(m.GetLabel()))
	for _, l := range m.GetLabel() {
		out[l.GetName()] = l.GetValue()
	}
	return out
}

// histogram returns the sum of the named histogram's series that match; a
// family the scrape does not have (nothing observed yet) is empty.
func (f families) histogram(name string, match func(map[string]string) bool) (histogram, error) {
	fam, ok := f[name]
	if !ok {
		return histogram{}, nil
	}
	if fam.GetType() != dto.MetricType_HISTOGRAM {
		return histogram{}, fmt.Errorf("%s is a %s, not a histogram", name, fam.GetType())
	}
	var total histogram
	for _, m := range fam.GetMetric() {
		if !match(labelsOf(m)) {
			continue
		}
		var err error
		if total, err = total.add(fromProto(m.GetHistogram())); err != nil {
			return histogram{}, fmt.Errorf("%s: %w", name, err)
		}
	}
	return total, nil
}

// counter returns the sum of the named counter's series that match; a
// family the scrape does not have counts 0.
func (f families) counter(name string, match func(map[string]string) bool) (float64, error) {
	fam, ok := f[name]
	if !ok {
		return 0, nil
	}
	if fam.GetType() != dto.MetricType_COUNTER {
		return 0, fmt.Errorf("%s is a %s, not a counter", name, fam.GetType())
	}
	var total float64
	for _, m := range fam.GetMetric() {
		if match(labelsOf(m)) {
			total += m.GetCounter().GetValue()
		}
	}
	return total, nil
}

// fromProto converts a parsed classic histogram, with integer or float
// counts.
func fromProto(h *dto.Histogram) histogram {
	bs := make([]bucket, 0, len(h.GetBucket()))
	for _, b := range h.GetBucket() {
		c := float64(b.GetCumulativeCount())
		if b.CumulativeCountFloat != nil {
			c = b.GetCumulativeCountFloat()
		}
		bs = append(bs, bucket{upper: b.GetUpperBound(), count: c})
	}
	count := float64(h.GetSampleCount())
	if h.SampleCountFloat != nil {
		count = h.GetSampleCountFloat()
	}
	return newHistogram(bs, count, h.GetSampleSum())
}

// labelsEqual matches series whose labels have the given values.
func labelsEqual(want map[string]string) func(map[string]string) bool {
	return func(l map[string]string) bool {
		for k, v := range want {
			if l[k] != v {
				return false
			}
		}
		return true
	}
}

// spec is a histogram or counter the report shows: a row title, where it
// is scraped, and which series of the metric are summed.
type spec struct {
	title  string
	source string
	metric string
	match  func(map[string]string) bool
}

// The metrics the report reads. Their label names and values are those
// kube-apiserver 1.36 and modelgate's controller-runtime expose.
const (
	webhookDuration = "apiserver_admission_webhook_admission_duration_seconds"
	stepDuration    = "apiserver_admission_step_admission_duration_seconds"
	requestDuration = "apiserver_request_duration_seconds"
	crWebhookLat    = "controller_runtime_webhook_latency_seconds"
	mutatingReviews = "modelgate_mutating_reviews_total"
	policyReviews   = "modelgate_validating_reviews_total"
)

// modelgateWebhooks matches the series of the API server's webhook metric
// that are calls of modelgate's webhooks (by name) of a type: "admit"
// (mutating) or "validating".
func modelgateWebhooks(names []string, typ string) func(map[string]string) bool {
	return func(l map[string]string) bool {
		return l["type"] == typ && slices.Contains(names, l["name"])
	}
}

// histSpecs are the histograms the report shows, in order. webhooks are the
// names of modelgate's webhooks (the "name" label of the API server's
// webhook metric).
func histSpecs(webhooks []string) []spec {
	modelgate := func(typ string) func(map[string]string) bool { return modelgateWebhooks(webhooks, typ) }
	post := func(group, resource string) func(map[string]string) bool {
		return labelsEqual(map[string]string{"verb": "POST", "group": group, "resource": resource, "subresource": "", "dry_run": ""})
	}
	return []spec{
		{"modelgate mutating, API server view", fromAPIServer, webhookDuration, modelgate("admit")},
		{"modelgate validating, API server view", fromAPIServer, webhookDuration, modelgate("validating")},
		{"admission step admit, all CREATEs", fromAPIServer, stepDuration, labelsEqual(map[string]string{"operation": "CREATE", "type": "admit"})},
		{"admission step validate, all CREATEs", fromAPIServer, stepDuration, labelsEqual(map[string]string{"operation": "CREATE", "type": "validate"})},
		{"POST pods", fromAPIServer, requestDuration, post("", "pods")},
		{"POST deployments", fromAPIServer, requestDuration, post("apps", "deployments")},
		{"modelgate /mutate handler", fromModelgate, crWebhookLat, labelsEqual(map[string]string{"webhook": "/mutate"})},
		{"modelgate /validate handler", fromModelgate, crWebhookLat, labelsEqual(map[string]string{"webhook": "/validate"})},
	}
}

// counterSpecs are the counters the report shows, in order.
func counterSpecs() []spec {
	kind := func(k string) func(map[string]string) bool { return labelsEqual(map[string]string{"kind": k}) }
	return []spec{
		{"modelgate mutating reviews: Pods", fromModelgate, mutatingReviews, kind("Pod")},
		{"modelgate mutating reviews: Deployments", fromModelgate, mutatingReviews, kind("Deployment")},
		{"modelgate validating reviews: Pods", fromModelgate, policyReviews, kind("Pod")},
		{"modelgate validating reviews: Deployments", fromModelgate, policyReviews, kind("Deployment")},
	}
}

// snapshot is one scrape of each source.
type snapshot map[string]families

// delta is what a phase observed: each histogram's and counter's
// difference between two snapshots, in the order of their specs.
type delta struct {
	hists    []histogram
	counters []float64
}

// diff computes the delta between two snapshots.
func diff(before, after snapshot, hs, cs []spec) (delta, error) {
	var d delta
	for _, s := range hs {
		b, err := before[s.source].histogram(s.metric, s.match)
		if err != nil {
			return delta{}, fmt.Errorf("%s: %w", s.source, err)
		}
		a, err := after[s.source].histogram(s.metric, s.match)
		if err != nil {
			return delta{}, fmt.Errorf("%s: %w", s.source, err)
		}
		h, err := a.sub(b)
		if err != nil {
			return delta{}, fmt.Errorf("%s %s (%s): %w", s.source, s.metric, s.title, err)
		}
		d.hists = append(d.hists, h)
	}
	for _, s := range cs {
		b, err := before[s.source].counter(s.metric, s.match)
		if err != nil {
			return delta{}, fmt.Errorf("%s: %w", s.source, err)
		}
		a, err := after[s.source].counter(s.metric, s.match)
		if err != nil {
			return delta{}, fmt.Errorf("%s: %w", s.source, err)
		}
		d.counters = append(d.counters, a-b)
	}
	return d, nil
}

// pool adds deltas up: the phase's rounds together.
func pool(ds []delta) (delta, error) {
	var out delta
	for i, d := range ds {
		if i == 0 {
			out = delta{hists: slices.Clone(d.hists), counters: slices.Clone(d.counters)}
			continue
		}
		for j := range d.hists {
			h, err := out.hists[j].add(d.hists[j])
			if err != nil {
				return delta{}, err
			}
			out.hists[j] = h
		}
		for j := range d.counters {
			out.counters[j] += d.counters[j]
		}
	}
	return out, nil
}

// scraper reads the API server's metrics (through its REST client, as the
// administrator) and modelgate's (plain HTTP on its metrics address).
type scraper struct {
	api          rest.Interface
	modelgateURL string
	http         *http.Client
}

// newScraper returns a scraper for the API server behind admin and
// modelgate's metrics address.
func newScraper(admin *rest.Config, metricsAddr string) (*scraper, error) {
	cfg := rest.CopyConfig(admin)
	cfg.QPS = -1 // no client-side throttling
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating a client for the API server's metrics: %w", err)
	}
	return &scraper{api: cs.Discovery().RESTClient(), modelgateURL: "http://" + metricsAddr + "/metrics", http: &http.Client{Timeout: 30 * time.Second}}, nil
}

// snapshot scrapes both sources.
func (s *scraper) snapshot(ctx context.Context) (snapshot, error) {
	api, err := s.apiserver(ctx)
	if err != nil {
		return nil, err
	}
	mg, err := s.modelgate(ctx)
	if err != nil {
		return nil, err
	}
	return snapshot{fromAPIServer: api, fromModelgate: mg}, nil
}

// apiserver scrapes kube-apiserver's /metrics.
func (s *scraper) apiserver(ctx context.Context) (families, error) {
	b, err := s.api.Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("scraping kube-apiserver's /metrics: %w", err)
	}
	f, err := parseFamilies(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("kube-apiserver: %w", err)
	}
	return f, nil
}

// modelgate scrapes modelgate's metrics endpoint.
func (s *scraper) modelgate(ctx context.Context) (families, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.modelgateURL, nil)
	if err != nil {
		return nil, fmt.Errorf("building a request for %s: %w", s.modelgateURL, err)
	}
	resp, err := s.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scraping modelgate's metrics: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scraping modelgate's metrics: %s answered %s", s.modelgateURL, resp.Status)
	}
	f, err := parseFamilies(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("modelgate: %w", err)
	}
	return f, nil
}
