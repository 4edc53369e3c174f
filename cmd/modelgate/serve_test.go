package main

import (
	"errors"
	"flag"
	"io"
	"testing"

	config "github.com/modelgate/modelgate/api/config/v1alpha1"
)

func TestServeCertificatesFlag(t *testing.T) {
	tests := map[string]struct {
		args    []string
		want    config.CertificateMode
		invalid bool
	}{
		"default":      {want: config.CertificatesFiles},
		"self":         {args: []string{"--certificates", "self"}, want: config.CertificatesSelf},
		"cert-manager": {args: []string{"--certificates=cert-manager"}, want: config.CertificatesCertManager},
		"unknown":      {args: []string{"--certificates", "vault"}, invalid: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var f serveFlags
			fs := flag.NewFlagSet("serve", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			f.bind(fs)
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			c := config.New()
			err := f.apply(fs, c)
			if tc.invalid {
				if !errors.Is(err, config.ErrInvalid) {
					t.Fatalf("apply = %v, want config.ErrInvalid", err)
				}
				return
			}
			if err != nil || c.Certificates.Mode != tc.want {
				t.Errorf("mode %q, err %v; want %q", c.Certificates.Mode, err, tc.want)
			}
		})
	}
}
