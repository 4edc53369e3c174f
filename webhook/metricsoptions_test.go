package webhook

import (
	"testing"

	"k8s.io/utils/ptr"

	"github.com/modelgate/modelgate/webhook/config"
)

// TestMetricsOptions checks that the metrics are served as the kubebuilder
// scaffold serves them (HTTPS, each request's token checked by the API
// server) unless metrics.secure is false.
func TestMetricsOptions(t *testing.T) {
	for name, tc := range map[string]struct {
		secure *bool
		want   bool
	}{
		"unset (not defaulted)": {secure: nil, want: true},
		"secure":                {secure: ptr.To(true), want: true},
		"turned off":            {secure: ptr.To(false), want: false},
	} {
		t.Run(name, func(t *testing.T) {
			o := metricsOptions(config.MetricsEndpoint{BindAddress: "127.0.0.1:8443", Secure: tc.secure})
			if o.BindAddress != "127.0.0.1:8443" {
				t.Errorf("BindAddress = %q, want the configured 127.0.0.1:8443", o.BindAddress)
			}
			if o.SecureServing != tc.want {
				t.Errorf("SecureServing = %v, want %v", o.SecureServing, tc.want)
			}
			if got := o.FilterProvider != nil; got != tc.want {
				t.Errorf("FilterProvider set = %v, want %v: authentication and authorization go with HTTPS", got, tc.want)
			}
		})
	}
}
