// Package promreg registers Prometheus collectors so that a second
// manager in one process (the tests start several) shares the first one's
// collectors instead of failing.
package promreg

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// Register registers c with reg, or returns the collector already
// registered under the same name. The metrics are fixed at compile time:
// any other error is a bug, and it panics.
func Register[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing
			}
		}
		panic(err)
	}
	return c
}
