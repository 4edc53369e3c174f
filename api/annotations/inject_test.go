package annotations

import (
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

var objectAnnotations = field.NewPath("metadata", "annotations")

func TestParseInject(t *testing.T) {
	cases := map[string]struct {
		annotations map[string]string
		want        Choice
		wantErr     bool
	}{
		"absent":         {annotations: map[string]string{"other": "x"}, want: Unset},
		"nil map":        {annotations: nil, want: Unset},
		"true":           {annotations: map[string]string{Inject: "true"}, want: OptIn},
		"false":          {annotations: map[string]string{Inject: "false"}, want: OptOut},
		"maybe":          {annotations: map[string]string{Inject: "maybe"}, wantErr: true},
		"empty":          {annotations: map[string]string{Inject: ""}, wantErr: true},
		"upper case":     {annotations: map[string]string{Inject: "TRUE"}, wantErr: true},
		"padded":         {annotations: map[string]string{Inject: " true"}, wantErr: true},
		"other key only": {annotations: map[string]string{Prefix + "injected": "true"}, want: Unset},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := ParseInject(tc.annotations, objectAnnotations)
			if got != tc.want {
				t.Errorf("choice = %v, want %v", got, tc.want)
			}
			if !tc.wantErr {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("expected an error, got none")
			}
			if err.Type != field.ErrorTypeNotSupported {
				t.Errorf("error type = %q, want %q", err.Type, field.ErrorTypeNotSupported)
			}
			if want := "metadata.annotations[modelgate.io/inject]"; err.Field != want {
				t.Errorf("error field = %q, want %q", err.Field, want)
			}
			if err.BadValue != tc.annotations[Inject] {
				t.Errorf("error bad value = %#v, want %q", err.BadValue, tc.annotations[Inject])
			}
			for _, accepted := range []string{`"true"`, `"false"`} {
				if !strings.Contains(err.Error(), accepted) {
					t.Errorf("error %q does not list accepted value %s", err.Error(), accepted)
				}
			}
		})
	}
}

func TestChoiceString(t *testing.T) {
	cases := map[string]struct {
		choice Choice
		want   string
	}{
		"unset":   {choice: Unset, want: ""},
		"opt in":  {choice: OptIn, want: "true"},
		"opt out": {choice: OptOut, want: "false"},
		"unknown": {choice: Choice(42), want: ""},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := tc.choice.String(); got != tc.want {
				t.Errorf("String() = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestCombine(t *testing.T) {
	cases := map[string]struct {
		choices []Choice
		want    Choice
	}{
		"none":                 {choices: nil, want: Unset},
		"all unset":            {choices: []Choice{Unset, Unset}, want: Unset},
		"one opt in":           {choices: []Choice{Unset, OptIn}, want: OptIn},
		"opt in on object":     {choices: []Choice{OptIn, Unset, Unset}, want: OptIn},
		"opt out wins first":   {choices: []Choice{OptOut, OptIn}, want: OptOut},
		"opt out wins last":    {choices: []Choice{OptIn, Unset, OptOut}, want: OptOut},
		"opt out among unsets": {choices: []Choice{Unset, OptOut, Unset}, want: OptOut},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := Combine(tc.choices...); got != tc.want {
				t.Errorf("Combine(%v) = %v, want %v", tc.choices, got, tc.want)
			}
		})
	}
}

func TestDecide(t *testing.T) {
	enabled := map[string]string{NamespaceInjection: InjectionEnabled}
	cases := map[string]struct {
		choice Choice
		labels map[string]string
		want   bool
	}{
		"unset, namespace enabled":      {choice: Unset, labels: enabled, want: true},
		"unset, namespace unlabelled":   {choice: Unset, labels: nil, want: false},
		"unset, namespace disabled":     {choice: Unset, labels: map[string]string{NamespaceInjection: "disabled"}, want: false},
		"unset, namespace ENABLED":      {choice: Unset, labels: map[string]string{NamespaceInjection: "Enabled"}, want: false},
		"unset, other label enabled":    {choice: Unset, labels: map[string]string{"injection": InjectionEnabled}, want: false},
		"opt in, namespace unlabelled":  {choice: OptIn, labels: nil, want: true},
		"opt in, namespace enabled":     {choice: OptIn, labels: enabled, want: true},
		"opt out, namespace enabled":    {choice: OptOut, labels: enabled, want: false},
		"opt out, namespace unlabelled": {choice: OptOut, labels: nil, want: false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := Decide(tc.choice, tc.labels); got != tc.want {
				t.Errorf("Decide(%v, %v) = %v, want %v", tc.choice, tc.labels, got, tc.want)
			}
		})
	}
}

func TestParse(t *testing.T) {
	objPath := field.NewPath("metadata", "annotations")
	jobPath := field.NewPath("spec", "jobTemplate", "metadata", "annotations")
	podPath := field.NewPath("spec", "jobTemplate", "spec", "template", "metadata", "annotations")
	src := func(p *field.Path, v string) Source {
		if v == "-" {
			return Source{Path: p}
		}
		return Source{Path: p, Annotations: map[string]string{Inject: v}}
	}
	cases := map[string]struct {
		sources    []Source
		want       Choice
		wantFields []string
	}{
		"no sources":          {want: Unset},
		"nothing set":         {sources: []Source{src(objPath, "-"), src(podPath, "-")}, want: Unset},
		"opt in on template":  {sources: []Source{src(objPath, "-"), src(podPath, "true")}, want: OptIn},
		"opt out on template": {sources: []Source{src(objPath, "true"), src(podPath, "false")}, want: OptOut},
		"one bad source": {
			sources:    []Source{src(objPath, "true"), src(podPath, "yes")},
			want:       OptIn,
			wantFields: []string{"spec.jobTemplate.spec.template.metadata.annotations[modelgate.io/inject]"},
		},
		"two bad sources": {
			sources: []Source{src(objPath, "maybe"), src(jobPath, "true"), src(podPath, "TRUE")},
			want:    OptIn,
			wantFields: []string{
				"metadata.annotations[modelgate.io/inject]",
				"spec.jobTemplate.spec.template.metadata.annotations[modelgate.io/inject]",
			},
		},
		"every source bad": {
			sources: []Source{src(objPath, ""), src(jobPath, "1"), src(podPath, "no")},
			want:    Unset,
			wantFields: []string{
				"metadata.annotations[modelgate.io/inject]",
				"spec.jobTemplate.metadata.annotations[modelgate.io/inject]",
				"spec.jobTemplate.spec.template.metadata.annotations[modelgate.io/inject]",
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, errs := Parse(tc.sources...)
			if got.Choice != tc.want {
				t.Errorf("choice = %v, want %v", got.Choice, tc.want)
			}
			var fields []string
			for _, e := range errs {
				fields = append(fields, e.Field)
			}
			if diff := cmp.Diff(tc.wantFields, fields); diff != "" {
				t.Errorf("error fields (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSettingsHash(t *testing.T) {
	hexDigits := regexp.MustCompile(`^[0-9a-f]{12}$`)
	for name, s := range map[string]Settings{
		"zero":    {},
		"opt in":  {Choice: OptIn},
		"opt out": {Choice: OptOut},
	} {
		t.Run(name, func(t *testing.T) {
			h := s.Hash()
			if !hexDigits.MatchString(h) {
				t.Errorf("Hash() = %q, want 12 lower-case hex digits", h)
			}
			if again := s.Hash(); again != h {
				t.Errorf("Hash() not stable: %q then %q", h, again)
			}
		})
	}
	// The choice is how the object opted in, not what was injected: a Pod
	// stamped from an opted-in template must get the same record whether it
	// carries the annotation or its namespace opted it in.
	if a, b := (Settings{Choice: OptIn}).Hash(), (Settings{}).Hash(); a != b {
		t.Errorf("Hash depends on Choice: %q vs %q", a, b)
	}
}

func TestIsReservedLabel(t *testing.T) {
	cases := map[string]struct {
		key  string
		want bool
	}{
		"owner":                       {key: OwnerLabel, want: true},
		"team":                        {key: TeamLabel, want: true},
		"owner-full is an annotation": {key: OwnerFull, want: false},
		"inject":                      {key: Inject, want: false},
		"unrelated":                   {key: "app", want: false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := IsReservedLabel(tc.key); got != tc.want {
				t.Errorf("IsReservedLabel(%q) = %v, want %v", tc.key, got, tc.want)
			}
		})
	}
}
