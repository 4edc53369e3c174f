package webhook

import (
	"crypto/tls"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/utils/ptr"

	config "github.com/modelgate/modelgate/api/config/v1alpha1"
	"github.com/modelgate/modelgate/certs"
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
			o, clientCA, err := metricsOptions(config.MetricsEndpoint{BindAddress: "127.0.0.1:8443", Secure: tc.secure})
			if err != nil || clientCA != nil {
				t.Fatalf("metricsOptions = %v, %v; want no CA watch and no error without metrics.clientCAFile", clientCA, err)
			}
			if len(o.TLSOpts) != 0 {
				t.Errorf("%d TLS options, want none: client certificates are asked for only with metrics.clientCAFile", len(o.TLSOpts))
			}
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

// TestMetricsOptionsClientCA: with metrics.clientCAFile the server asks
// for client certificates without requiring them (a bearer token still
// does), the CA file is watched, and a file that cannot be read stops the
// start with an error naming the field.
func TestMetricsOptionsClientCA(t *testing.T) {
	ca, err := certs.NewCA("metrics-client-ca", time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(file, ca.CertPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	o, clientCA, err := metricsOptions(config.MetricsEndpoint{BindAddress: ":8443", ClientCAFile: file})
	if err != nil {
		t.Fatal(err)
	}
	if clientCA == nil || !o.SecureServing || o.FilterProvider == nil {
		t.Fatalf("CA watch %v, SecureServing %v, FilterProvider set %v: want all three", clientCA, o.SecureServing, o.FilterProvider != nil)
	}
	c := &tls.Config{}
	for _, opt := range o.TLSOpts {
		opt(c)
	}
	if c.ClientAuth != tls.RequestClientCert {
		t.Errorf("ClientAuth = %v, want RequestClientCert", c.ClientAuth)
	}

	_, _, err = metricsOptions(config.MetricsEndpoint{BindAddress: ":8443", ClientCAFile: filepath.Join(t.TempDir(), "missing.crt")})
	if err == nil || !strings.Contains(err.Error(), "metrics.clientCAFile") || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("err = %v, want one naming metrics.clientCAFile, wrapping fs.ErrNotExist", err)
	}
	// Metrics off: the file is not read.
	if _, clientCA, err := metricsOptions(config.MetricsEndpoint{BindAddress: "0", ClientCAFile: "/missing.crt"}); err != nil || clientCA != nil {
		t.Errorf("metrics off: %v, %v; want neither a CA watch nor an error", clientCA, err)
	}
}
