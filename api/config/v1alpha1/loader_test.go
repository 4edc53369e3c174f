package v1alpha1_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	config "github.com/modelgate/modelgate/api/config/v1alpha1"
)

// A per-scheme loader that runs a stock image: an args template and a
// security context of its own; a scheme without one gets the restricted
// default, not the default loader's.
func TestParseLoaderArgsAndSecurityContext(t *testing.T) {
	noPodNamespace(t)
	got, err := config.Parse([]byte(header + `
injection:
  loader:
    args: ["--source={{uri}}", "--target={{dest}}"]
    securityContext: {runAsUser: 1000, runAsNonRoot: true}
    schemes:
      gs:
        image: google/cloud-sdk:slim
        command: [gcloud]
        args: [storage, cp, --recursive, "{{uri}}/*", "{{dest}}"]
        securityContext:
          runAsUser: 0
          runAsNonRoot: false
          allowPrivilegeEscalation: false
          seccompProfile: {type: RuntimeDefault}
      hf: {image: registry.example.com/hf-loader:1}
`))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	want := config.New()
	l := &want.Injection.Loader
	l.Args = []string{"--source={{uri}}", "--target={{dest}}"}
	l.SecurityContext = &corev1.SecurityContext{RunAsUser: ptr.To[int64](1000), RunAsNonRoot: ptr.To(true)}
	l.Schemes = map[string]config.LoaderImage{
		"gs": {
			Image: "google/cloud-sdk:slim", Command: []string{"gcloud"},
			Args: []string{"storage", "cp", "--recursive", "{{uri}}/*", "{{dest}}"},
			SecurityContext: &corev1.SecurityContext{
				RunAsUser: ptr.To[int64](0), RunAsNonRoot: ptr.To(false), AllowPrivilegeEscalation: ptr.To(false),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
		},
		"hf": {Image: "registry.example.com/hf-loader:1", SecurityContext: config.DefaultLoaderSecurityContext()},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Parse (-want +got):\n%s", diff)
	}
}

func TestDefaultLoaderSecurityContext(t *testing.T) {
	c := config.New()
	if diff := cmp.Diff(config.DefaultLoaderSecurityContext(), c.Injection.Loader.SecurityContext); diff != "" {
		t.Errorf("default security context (-want +got):\n%s", diff)
	}
	// {} is kept as written: the loader gets no security context.
	c = &config.Configuration{Injection: config.Injection{Loader: config.Loader{SecurityContext: &corev1.SecurityContext{}}}}
	config.Default(c)
	if sc := c.Injection.Loader.SecurityContext; sc == nil || *sc != (corev1.SecurityContext{}) {
		t.Errorf("Default replaced an empty security context with %+v", sc)
	}
	// Each default is a copy.
	*config.New().Injection.Loader.SecurityContext.RunAsNonRoot = false
	if !*config.New().Injection.Loader.SecurityContext.RunAsNonRoot {
		t.Error("New shares its security context")
	}
}

func TestValidateLoaderArgs(t *testing.T) {
	cases := map[string]struct {
		edit       func(l *config.Loader)
		wantFields []string
		wantMsg    string
	}{
		"placeholders": {edit: func(l *config.Loader) {
			l.Args = []string{"{{uri}}", "{{dest}}"}
			l.Schemes = map[string]config.LoaderImage{"gs": {Image: "i", Args: []string{"cp", "-r", "{{uri}}", "{{dest}}"}}}
		}},
		"unknown placeholder in a scheme's args": {
			edit: func(l *config.Loader) {
				l.Schemes = map[string]config.LoaderImage{"gs": {Image: "i", Args: []string{"cp", "{{path}}", "{{uri}}"}}}
			},
			wantFields: []string{"injection.loader.schemes[gs].args[1]"},
			wantMsg:    `injection.loader.schemes[gs].args[1]: Invalid value: "{{path}}": unknown placeholder {{path}}: the placeholders are {{uri}} and {{dest}}`,
		},
		"no uri in the default's args": {
			edit:       func(l *config.Loader) { l.Args = []string{"{{dest}}"} },
			wantFields: []string{"injection.loader.args"},
			wantMsg:    "must use {{uri}} in at least one argument",
		},
		"empty args": {
			edit:       func(l *config.Loader) { l.Args = []string{} },
			wantFields: []string{"injection.loader.args"},
		},
		"every scheme, in order": {
			edit: func(l *config.Loader) {
				l.Schemes = map[string]config.LoaderImage{
					"s3": {Image: "i", Args: []string{"{{uri"}},
					"gs": {Image: "", Args: []string{"{{uri}}", "{{ dest }}"}},
				}
			},
			wantFields: []string{"injection.loader.schemes[gs].image", "injection.loader.schemes[gs].args[1]", "injection.loader.schemes[s3].args[0]"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := config.New()
			tc.edit(&c.Injection.Loader)
			expectInvalid(t, c.Validate(), tc.wantFields, tc.wantMsg)
		})
	}
}

func TestValidateLoaderEnv(t *testing.T) {
	cases := map[string]struct {
		env        []config.EnvVar
		wantFields []string
		wantMsg    string
	}{
		"endpoints": {env: []config.EnvVar{{Name: "HF_ENDPOINT", Value: "http://127.0.0.1:8080"}, {Name: "AWS_ENDPOINT_URL_S3", Value: "http://127.0.0.1:9000"}, {Name: "AWS_REGION", Value: "us-east-1"}}},
		"a name that is no variable's": {
			env:        []config.EnvVar{{Name: "HF=ENDPOINT", Value: "x"}},
			wantFields: []string{"injection.loader.env[0].name"},
		},
		"twice": {
			env:        []config.EnvVar{{Name: "AWS_REGION", Value: "a"}, {Name: "AWS_REGION", Value: "b"}},
			wantFields: []string{"injection.loader.env[1].name"},
		},
		"the Pod's UID, which modelgate sets": {
			env:        []config.EnvVar{{Name: "MODELGATE_POD_UID", Value: "x"}},
			wantFields: []string{"injection.loader.env[0].name"},
			wantMsg:    "modelgate sets MODELGATE_POD_UID itself",
		},
		"credentials": {
			env:        []config.EnvVar{{Name: "HF_TOKEN", Value: "hf_x"}, {Name: "HF_ENDPOINT", Value: "http://hub"}, {Name: "AWS_SECRET_ACCESS_KEY", Value: "s"}, {Name: "secretKey", Value: "s"}},
			wantFields: []string{"injection.loader.env[0].name", "injection.loader.env[2].name", "injection.loader.env[3].name"},
			wantMsg:    "HF_TOKEN is a credential and would be written into every Pod spec: put it in the Secret that modelgate.io/model-credentials names",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := config.New()
			c.Injection.Loader.Env = tc.env
			expectInvalid(t, c.Validate(), tc.wantFields, tc.wantMsg)
		})
	}
}

func TestParseLoaderSecurityContextStrict(t *testing.T) {
	_, err := config.Parse([]byte(header + "injection:\n  loader:\n    securityContext: {runAsRoot: true}\n"))
	if !errors.Is(err, config.ErrInvalid) || !strings.Contains(err.Error(), "injection.loader.securityContext.runAsRoot") {
		t.Errorf("Parse = %v, want an error naming injection.loader.securityContext.runAsRoot", err)
	}
}

// expectInvalid checks that errs name exactly wantFields, in order, and
// say wantMsg (when not empty).
func expectInvalid(t *testing.T, errs field.ErrorList, wantFields []string, wantMsg string) {
	t.Helper()
	var got []string
	for _, e := range errs {
		got = append(got, e.Field)
	}
	if diff := cmp.Diff(wantFields, got); diff != "" {
		t.Errorf("invalid fields (-want +got):\n%s", diff)
	}
	if wantMsg != "" && !strings.Contains(errs.ToAggregate().Error(), wantMsg) {
		t.Errorf("errors %v do not say %q", errs, wantMsg)
	}
}
