package env

import dto "github.com/prometheus/client_model/go"

// SumSeries sums the values of the counter and gauge series whose labels
// include match; 0 when there is none. The suites read modelgate's metrics
// with it, from the process's registry or from a scrape.
func SumSeries(series []*dto.Metric, match map[string]string) float64 {
	total := 0.0
	for _, m := range series {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		ok := true
		for k, v := range match {
			ok = ok && labels[k] == v
		}
		if ok {
			total += m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	return total
}
