package prometheus

import (
	"fmt"
	"strings"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/promql/parser"
)

// exprNeeds is the exporter expr reads beside modelgate's and the API
// server's metrics, which description must name with its mark.
func exprNeeds(expr, description string) (string, error) {
	names, err := metricNames(expr)
	if err != nil {
		return "", err
	}
	needs := ""
	for _, n := range names {
		m := needsFor(n)
		if m == "" {
			continue
		}
		if needs != "" && needs != m {
			return "", fmt.Errorf("%q reads the metrics of two other exporters", expr)
		}
		needs = m
	}
	if needs != "" && !strings.Contains(description, needs) {
		return "", fmt.Errorf("%q reads another exporter's metrics: its description must say %q", expr, needs)
	}
	return needs, nil
}

// metricNames are the metric names expr selects.
func metricNames(expr string) ([]string, error) {
	e, err := parser.ParseExpr(expr)
	if err != nil {
		return nil, fmt.Errorf("parsing %q: %w", expr, err)
	}
	var names []string
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok {
			for _, m := range vs.LabelMatchers {
				if m.Name == model.MetricNameLabel {
					names = append(names, m.Value)
				}
			}
		}
		return nil
	})
	return names, nil
}
