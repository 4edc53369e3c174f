package prometheus

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// DashboardVariables are the values the dashboard's variables take in a
// query through Prometheus's API: modelgate's namespace, a rate window
// of a few scrapes and a range of the last quarter hour.
var DashboardVariables = map[string]string{
	"$__rate_interval": "1m",
	"$__range":         "15m",
	"$namespace":       "modelgate-system",
}

// Query is one query of a dashboard panel.
type Query struct {
	Panel, Expr string
	// Needs is the exporter the query reads beside modelgate and the API
	// server (NeedsKubeStateMetrics, NeedsCertManager), "" for none.
	Needs string
}

// DashboardQueries reads the Grafana dashboard b and returns every
// panel's queries with vars substituted. A query reading another
// exporter's metrics must be marked in its panel's description (an error
// otherwise), as must a variable the query uses that vars lacks.
func DashboardQueries(b []byte, vars map[string]string) ([]Query, error) {
	var d struct {
		Panels []struct {
			Title       string `json:"title"`
			Description string `json:"description"`
			Targets     []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, fmt.Errorf("the dashboard: %w", err)
	}
	// Longest name first, so that no variable is read as a longer one's
	// prefix.
	names := slices.SortedFunc(maps.Keys(vars), func(a, b string) int { return cmp.Compare(len(b), len(a)) })
	var out []Query
	for _, p := range d.Panels {
		for _, t := range p.Targets {
			expr := t.Expr
			for _, k := range names {
				expr = strings.ReplaceAll(expr, k, vars[k])
			}
			if strings.Contains(expr, "$") {
				return nil, fmt.Errorf("panel %q: %q uses a variable with no value here", p.Title, t.Expr)
			}
			needs, err := exprNeeds(expr, p.Description)
			if err != nil {
				return nil, fmt.Errorf("panel %q: %w", p.Title, err)
			}
			out = append(out, Query{Panel: p.Title, Expr: expr, Needs: needs})
		}
	}
	if len(out) == 0 {
		return nil, errors.New("the dashboard has no queries")
	}
	return out, nil
}
