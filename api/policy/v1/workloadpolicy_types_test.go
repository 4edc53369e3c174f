package v1

import (
	"encoding/json"
	"os"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"
)

func TestParameters(t *testing.T) {
	raw := func(s string) *apiextensionsv1.JSON { return &apiextensionsv1.JSON{Raw: []byte(s)} }
	cases := map[string]struct {
		params  *apiextensionsv1.JSON
		want    map[string]any
		wantErr string
	}{
		"unset":     {params: nil, want: map[string]any{}},
		"empty raw": {params: raw(""), want: map[string]any{}},
		"null":      {params: raw("null"), want: map[string]any{}},
		"empty":     {params: raw("{}"), want: map[string]any{}},
		"object": {
			params: raw(`{"products": ["NVIDIA-H100-80GB-HBM3"], "maxGPUs": 8, "strict": true, "nested": {"big": 9007199254740993}}`),
			want: map[string]any{
				"products": []any{"NVIDIA-H100-80GB-HBM3"},
				"maxGPUs":  json.Number("8"),
				"strict":   true,
				"nested":   map[string]any{"big": json.Number("9007199254740993")},
			},
		},
		"array":         {params: raw(`["a"]`), wantErr: "spec.parameters: must be an object, not an array"},
		"string":        {params: raw(`"a"`), wantErr: "spec.parameters: must be an object, not a string"},
		"number":        {params: raw(`1`), wantErr: "spec.parameters: must be an object, not a number"},
		"boolean":       {params: raw(`false`), wantErr: "spec.parameters: must be an object, not a boolean"},
		"trailing data": {params: raw(`{} {}`), wantErr: "spec.parameters: must be a single JSON object, found data after it"},
		"malformed":     {params: raw(`{"a":`), wantErr: "spec.parameters: unexpected EOF"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p := &WorkloadPolicy{Spec: WorkloadPolicySpec{Rego: "package p", Parameters: tc.params}}
			got, err := p.Parameters()
			if tc.wantErr != "" {
				if err == nil {
					t.Fatalf("Parameters() = %v, want error %q", got, tc.wantErr)
				}
				if err.Error() != tc.wantErr {
					t.Fatalf("Parameters() error = %q, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parameters() error = %v", err)
			}
			if got == nil {
				t.Fatal("Parameters() = nil map, want a non-nil map")
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Parameters() (-want +got):\n%s", diff)
			}
		})
	}
}

func TestAddToScheme(t *testing.T) {
	s := runtime.NewScheme()
	if err := AddToScheme(s); err != nil {
		t.Fatalf("AddToScheme: %v", err)
	}
	for kind, want := range map[string]runtime.Object{
		"WorkloadPolicy":     &WorkloadPolicy{},
		"WorkloadPolicyList": &WorkloadPolicyList{},
	} {
		obj, err := s.New(GroupVersion.WithKind(kind))
		if err != nil {
			t.Errorf("scheme.New(%s): %v", kind, err)
			continue
		}
		if diff := cmp.Diff(want, obj); diff != "" {
			t.Errorf("scheme.New(%s) (-want +got):\n%s", kind, diff)
		}
	}
}

// TestMinimalJSON checks that an object with only spec.rego set serializes
// without empty match or status, so clients send what users wrote.
func TestMinimalJSON(t *testing.T) {
	p := &WorkloadPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: GroupVersion.String(), Kind: "WorkloadPolicy"},
		ObjectMeta: metav1.ObjectMeta{Name: "gpu-limit"},
		Spec:       WorkloadPolicySpec{Rego: "package gpu"},
	}
	got, err := json.Marshal(p)
	if err != nil {
		t.Fatalf("json.Marshal: %v", err)
	}
	want := `{"kind":"WorkloadPolicy","apiVersion":"policy.modelgate.io/v1","metadata":{"name":"gpu-limit"},"spec":{"rego":"package gpu"}}`
	if diff := cmp.Diff(want, string(got)); diff != "" {
		t.Errorf("json (-want +got):\n%s", diff)
	}
}

const crdPath = "../../../config/crd/bases/policy.modelgate.io_workloadpolicies.yaml"

// loadCRD reads the CRD that make manifests generates from this package.
func loadCRD(t *testing.T) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	return loadCRDFile(t, crdPath)
}

func loadCRDFile(t *testing.T, crdPath string) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	data, err := os.ReadFile(crdPath)
	if err != nil {
		t.Fatalf("reading the generated CRD (run make manifests): %v", err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(data, crd); err != nil {
		t.Fatalf("decoding %s: %v", crdPath, err)
	}
	return crd
}

// v1Version returns the CRD's only version, which must be v1.
func v1Version(t *testing.T, crd *apiextensionsv1.CustomResourceDefinition) *apiextensionsv1.CustomResourceDefinitionVersion {
	t.Helper()
	if len(crd.Spec.Versions) != 1 || crd.Spec.Versions[0].Name != GroupVersion.Version {
		t.Fatalf("versions = %v, want exactly %s", crd.Spec.Versions, GroupVersion.Version)
	}
	v := &crd.Spec.Versions[0]
	if v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
		t.Fatal("version v1 has no OpenAPI schema")
	}
	return v
}

// property follows a path of property names down from s.
func property(t *testing.T, s *apiextensionsv1.JSONSchemaProps, path ...string) *apiextensionsv1.JSONSchemaProps {
	t.Helper()
	for i, name := range path {
		p, ok := s.Properties[name]
		if !ok {
			t.Fatalf("schema has no property %v", path[:i+1])
		}
		s = &p
	}
	return s
}

// jsonStrings decodes JSON string values, such as an enum or a default.
func jsonStrings(t *testing.T, values ...apiextensionsv1.JSON) []string {
	t.Helper()
	out := make([]string, 0, len(values))
	for _, v := range values {
		var s string
		if err := json.Unmarshal(v.Raw, &s); err != nil {
			t.Fatalf("value %s is not a string: %v", v.Raw, err)
		}
		out = append(out, s)
	}
	return out
}

func TestCRDResource(t *testing.T) {
	crd := loadCRD(t)
	if got, want := crd.Name, "workloadpolicies."+GroupVersion.Group; got != want {
		t.Errorf("name = %q, want %q", got, want)
	}
	if got, want := crd.Spec.Group, GroupVersion.Group; got != want {
		t.Errorf("group = %q, want %q", got, want)
	}
	if got := crd.Spec.Scope; got != apiextensionsv1.ClusterScoped {
		t.Errorf("scope = %q, want %q", got, apiextensionsv1.ClusterScoped)
	}
	wantNames := apiextensionsv1.CustomResourceDefinitionNames{
		Kind: "WorkloadPolicy", ListKind: "WorkloadPolicyList",
		Plural: "workloadpolicies", Singular: "workloadpolicy",
		ShortNames: []string{"wlpol", "wpol"}, Categories: []string{"modelgate"},
	}
	if diff := cmp.Diff(wantNames, crd.Spec.Names); diff != "" {
		t.Errorf("names (-want +got):\n%s", diff)
	}

	v := v1Version(t, crd)
	if !v.Served || !v.Storage {
		t.Errorf("v1 served = %t, storage = %t, want both true", v.Served, v.Storage)
	}
	if v.Subresources == nil || v.Subresources.Status == nil {
		t.Error("v1 has no status subresource")
	}
	if v.Subresources != nil && v.Subresources.Scale != nil {
		t.Error("v1 has a scale subresource, want none")
	}
	wantColumns := []apiextensionsv1.CustomResourceColumnDefinition{
		{Name: "Action", Type: "string", JSONPath: ".spec.enforcementAction"},
		{Name: "Ready", Type: "string", JSONPath: `.status.conditions[?(@.type=="Ready")].status`},
		{Name: "Reason", Type: "string", JSONPath: `.status.conditions[?(@.type=="Ready")].reason`},
		{Name: "Failing", Type: "integer", Description: "Workloads the last audit found this policy denies", JSONPath: ".status.audit.fail"},
		{Name: "Excepted", Type: "integer", Description: "Workloads the last audit found this policy denies but a WorkloadPolicyException allows",
			Priority: 1, JSONPath: ".status.audit.skip"},
		{Name: "Age", Type: "date", JSONPath: ".metadata.creationTimestamp"},
	}
	if diff := cmp.Diff(wantColumns, v.AdditionalPrinterColumns); diff != "" {
		t.Errorf("printer columns (-want +got):\n%s", diff)
	}
}

func TestCRDSpecSchema(t *testing.T) {
	root := v1Version(t, loadCRD(t)).Schema.OpenAPIV3Schema
	if !slices.Contains(root.Required, "spec") {
		t.Errorf("required = %v, want spec in it", root.Required)
	}
	spec := property(t, root, "spec")
	if diff := cmp.Diff([]string{"rego"}, spec.Required); diff != "" {
		t.Errorf("spec.required (-want +got):\n%s", diff)
	}

	rego := property(t, spec, "rego")
	if rego.Type != "string" || ptr.Deref(rego.MinLength, 0) != 1 {
		t.Errorf("spec.rego: type %q, minLength %d, want a string with minLength 1", rego.Type, ptr.Deref(rego.MinLength, 0))
	}

	enums := map[string]struct {
		path []string
		enum []string
		def  string // "" for no default
	}{
		"enforcementAction": {
			path: []string{"enforcementAction"},
			enum: []string{string(EnforcementActionDeny), string(EnforcementActionWarn), string(EnforcementActionDryRun)},
			def:  string(EnforcementActionDeny),
		},
		"failurePolicy": {
			path: []string{"failurePolicy"},
			enum: []string{string(FailurePolicyDeny), string(FailurePolicyAllow)},
			def:  string(FailurePolicyDeny),
		},
	}
	for name, tc := range enums {
		t.Run(name, func(t *testing.T) {
			s := property(t, spec, tc.path...)
			if s.Type != "string" {
				t.Errorf("type = %q, want string", s.Type)
			}
			if diff := cmp.Diff(tc.enum, jsonStrings(t, s.Enum...)); diff != "" {
				t.Errorf("enum (-want +got):\n%s", diff)
			}
			if s.Default == nil {
				t.Fatalf("no default, want %q", tc.def)
			}
			if got := jsonStrings(t, *s.Default); got[0] != tc.def {
				t.Errorf("default = %q, want %q", got[0], tc.def)
			}
		})
	}

	t.Run("match", func(t *testing.T) {
		match := property(t, spec, "match")
		if len(match.Required) != 0 {
			t.Errorf("match.required = %v, want none: an empty match matches everything", match.Required)
		}
		kinds := property(t, match, "kinds")
		if kinds.Items == nil || kinds.Items.Schema == nil {
			t.Fatal("match.kinds has no item schema")
		}
		wantKinds := []string{"Pod", "Deployment", "StatefulSet", "Job", "CronJob", "AIInference", "ResourceClaim", "ResourceClaimTemplate"}
		if diff := cmp.Diff(wantKinds, jsonStrings(t, kinds.Items.Schema.Enum...)); diff != "" {
			t.Errorf("match.kinds item enum (-want +got):\n%s", diff)
		}
		for _, name := range []string{"kinds", "namespaces", "excludedNamespaces"} {
			if got := ptr.Deref(property(t, match, name).XListType, ""); got != "set" {
				t.Errorf("match.%s list type = %q, want set", name, got)
			}
		}
		for _, name := range []string{"namespaces", "excludedNamespaces"} {
			items := property(t, match, name).Items
			if items == nil || items.Schema == nil {
				t.Fatalf("match.%s has no item schema", name)
			}
			s := items.Schema
			if ptr.Deref(s.MaxLength, 0) != 63 || s.Pattern != `^[a-z0-9]([-a-z0-9]*[a-z0-9])?$` {
				t.Errorf("match.%s items: maxLength %d, pattern %q, want a DNS-1123 label (63, ^[a-z0-9]([-a-z0-9]*[a-z0-9])?$)",
					name, ptr.Deref(s.MaxLength, 0), s.Pattern)
			}
		}
		if sel := property(t, match, "namespaceSelector"); sel.Type != "object" {
			t.Errorf("match.namespaceSelector type = %q, want object", sel.Type)
		}
	})

	t.Run("parameters", func(t *testing.T) {
		params := property(t, spec, "parameters")
		if params.Type != "object" {
			t.Errorf("type = %q, want object", params.Type)
		}
		if !ptr.Deref(params.XPreserveUnknownFields, false) {
			t.Error("x-kubernetes-preserve-unknown-fields is not true: the API server would prune the parameters")
		}
	})
}

func TestCRDStatusSchema(t *testing.T) {
	status := property(t, v1Version(t, loadCRD(t)).Schema.OpenAPIV3Schema, "status")
	conds := property(t, status, "conditions")
	if got := ptr.Deref(conds.XListType, ""); got != "map" {
		t.Errorf("conditions list type = %q, want map", got)
	}
	if diff := cmp.Diff([]string{"type"}, conds.XListMapKeys); diff != "" {
		t.Errorf("conditions list map keys (-want +got):\n%s", diff)
	}
	if obs := property(t, status, "observedGeneration"); obs.Type != "integer" || obs.Format != "int64" {
		t.Errorf("observedGeneration: type %q, format %q, want an int64 integer", obs.Type, obs.Format)
	}
	errs := property(t, status, "errors")
	if errs.Items == nil || errs.Items.Schema == nil {
		t.Fatal("errors has no item schema")
	}
	for _, name := range []string{"line", "column", "message"} {
		property(t, errs.Items.Schema, name)
	}
}

// TestCRDDescriptions checks that every field under spec and status, down to
// the items of lists, has a description: it is what kubectl explain shows.
func TestCRDDescriptions(t *testing.T) {
	root := v1Version(t, loadCRD(t)).Schema.OpenAPIV3Schema
	var walk func(path string, s *apiextensionsv1.JSONSchemaProps)
	walk = func(path string, s *apiextensionsv1.JSONSchemaProps) {
		if s.Description == "" {
			t.Errorf("%s has no description", path)
		}
		for name, p := range s.Properties {
			walk(path+"."+name, &p)
		}
		if s.Items != nil && s.Items.Schema != nil {
			for name, p := range s.Items.Schema.Properties {
				walk(path+"[]."+name, &p)
			}
		}
	}
	for _, name := range []string{"spec", "status"} {
		walk(name, property(t, root, name))
	}
}
