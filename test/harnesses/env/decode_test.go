package env

import (
	"errors"
	"testing"
	"time"

	cmv1 "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestDecodeStrict proves that the decoding the install suite
// (test/suites/install) relies on is strict: a misspelt or mistyped field,
// or an unknown kind, is an error.
func TestDecodeStrict(t *testing.T) {
	certificate := func(spec map[string]any) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "cert-manager.io/v1", "kind": "Certificate",
			"metadata": map[string]any{"name": "c", "namespace": "modelgate-system"},
			"spec":     spec,
		}}
	}
	valid := map[string]any{"secretName": "s", "issuerRef": map[string]any{"name": "i"}, "renewBefore": "720h"}
	for name, tc := range map[string]struct {
		obj     *unstructured.Unstructured
		wantErr bool
		is      error
	}{
		"valid Certificate": {obj: certificate(valid)},
		"misspelt field": {obj: certificate(map[string]any{
			"secretName": "s", "issuerRef": map[string]any{"name": "i"}, "renewbefore": "720h",
		}), wantErr: true},
		"mistyped field": {obj: certificate(map[string]any{
			"secretName": "s", "issuerRef": map[string]any{"name": "i"}, "isCA": "yes",
		}), wantErr: true},
		"unknown kind": {obj: &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "cert-manager.io/v1", "kind": "Certificat",
			"metadata": map[string]any{"name": "c"},
		}}, wantErr: true, is: ErrUnknownKind},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := DecodeStrict([]*unstructured.Unstructured{tc.obj})
			if (err != nil) != tc.wantErr {
				t.Fatalf("DecodeStrict error = %v, want error %t", err, tc.wantErr)
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("DecodeStrict error = %v, want %v", err, tc.is)
			}
			if err == nil {
				if c, ok := got[0].(*cmv1.Certificate); !ok || c.Spec.RenewBefore == nil || c.Spec.RenewBefore.Duration != 720*time.Hour {
					t.Errorf("DecodeStrict = %#v, want a Certificate with renewBefore 720h", got[0])
				}
			}
		})
	}
}
