package prometheus

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// API is a Prometheus's HTTP API.
type API struct {
	// URL is its base, on loopback.
	URL string
}

// apiGet reads a Prometheus API endpoint's data into out.
func (s API) apiGet(ctx context.Context, path string, q url.Values, out any) error {
	u := s.URL + path
	if q != nil {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return err
	}
	var r struct {
		Status    string          `json:"status"`
		Data      json.RawMessage `json:"data"`
		ErrorType string          `json:"errorType"`
		Error     string          `json:"error"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return fmt.Errorf("GET %s: %s: %w", path, resp.Status, err)
	}
	if r.Status != "success" {
		return fmt.Errorf("GET %s: %s: %s", path, r.ErrorType, r.Error)
	}
	return json.Unmarshal(r.Data, out)
}

// Series is one series of an instant query's answer.
type Series struct {
	Metric map[string]string `json:"metric"`
	Value  [2]any            `json:"value"`
}

// Query evaluates expr now.
func (s API) Query(ctx context.Context, expr string) ([]Series, error) {
	var d struct {
		ResultType string   `json:"resultType"`
		Result     []Series `json:"result"`
	}
	if err := s.apiGet(ctx, "/api/v1/query", url.Values{"query": {expr}}, &d); err != nil {
		return nil, fmt.Errorf("%s: %w", expr, err)
	}
	if d.ResultType != "vector" {
		return nil, fmt.Errorf("%s: a %s, not a vector", expr, d.ResultType)
	}
	return d.Result, nil
}

// Rule is an alerting rule's state as Prometheus evaluates it.
type Rule struct {
	Name string `json:"name"`
	// State is inactive, pending or firing.
	State string `json:"state"`
	// Health is ok, err or unknown; LastError says why err.
	Health    string `json:"health"`
	LastError string `json:"lastError"`
}

// AlertRules are the loaded alerting rules by name.
func (s API) AlertRules(ctx context.Context) (map[string]Rule, error) {
	var d struct {
		Groups []struct {
			Rules []Rule `json:"rules"`
		} `json:"groups"`
	}
	if err := s.apiGet(ctx, "/api/v1/rules", url.Values{"type": {"alert"}}, &d); err != nil {
		return nil, err
	}
	out := map[string]Rule{}
	for _, g := range d.Groups {
		for _, r := range g.Rules {
			out[r.Name] = r
		}
	}
	return out, nil
}

// Target is a scrape target's state.
type Target struct {
	Labels    map[string]string `json:"labels"`
	ScrapeURL string            `json:"scrapeUrl"`
	Health    string            `json:"health"`
	LastError string            `json:"lastError"`
}

// ActiveTargets are the targets Prometheus scrapes.
func (s API) ActiveTargets(ctx context.Context) ([]Target, error) {
	var d struct {
		Active []Target `json:"activeTargets"`
	}
	if err := s.apiGet(ctx, "/api/v1/targets", url.Values{"state": {"active"}}, &d); err != nil {
		return nil, err
	}
	return d.Active, nil
}

// WaitTargetsUp waits until Prometheus scrapes n targets, each of them
// successfully at its last scrape, and returns them. On timeout it
// returns the targets it saw last with the error.
func (s API) WaitTargetsUp(ctx context.Context, n int, timeout time.Duration) ([]Target, error) {
	var last []Target
	err := wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		ts, err := s.ActiveTargets(ctx)
		if err != nil {
			return false, err
		}
		last = ts
		up := 0
		for _, tg := range ts {
			if tg.Health == "up" {
				up++
			}
		}
		return up == n && len(ts) == n, nil
	})
	if err != nil {
		return last, fmt.Errorf("waiting for %d targets up: %w", n, err)
	}
	return last, nil
}

// ActiveAlert is a pending or firing alert, with its labels and its
// annotations as Prometheus rendered them.
type ActiveAlert struct {
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
	State       string            `json:"state"`
}

// ActiveAlerts are the pending and firing alerts.
func (s API) ActiveAlerts(ctx context.Context) ([]ActiveAlert, error) {
	var d struct {
		Alerts []ActiveAlert `json:"alerts"`
	}
	if err := s.apiGet(ctx, "/api/v1/alerts", nil, &d); err != nil {
		return nil, err
	}
	return d.Alerts, nil
}
