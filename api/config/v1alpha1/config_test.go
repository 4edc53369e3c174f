package v1alpha1_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	config "github.com/modelgate/modelgate/api/config/v1alpha1"
)

const header = "apiVersion: config.modelgate.io/v1alpha1\nkind: Configuration\n"

// noPodNamespace makes the namespace default independent of the
// environment the tests run in.
func noPodNamespace(t *testing.T) {
	t.Helper()
	t.Setenv("POD_NAMESPACE", "")
}

func TestParseMinimal(t *testing.T) {
	noPodNamespace(t)
	got, err := config.Parse([]byte(header))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if diff := cmp.Diff(config.New(), got); diff != "" {
		t.Errorf("minimal document (-want +got):\n%s", diff)
	}
}

func TestParseOverrides(t *testing.T) {
	noPodNamespace(t)
	got, err := config.Parse([]byte(header + `
namespace: platform
webhook: {port: 8443, tlsMinVersion: "1.3", enableHTTP2: true}
injection:
  excludedNamespaces: [kube-system]
  trustedRequesters: {groups: ["platform:controllers"]}
  namespaceCacheWait: 500ms
shutdownGracePeriod: 1m
`))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	want := config.New()
	want.Namespace = "platform"
	want.Webhook.Port, want.Webhook.TLSMinVersion, want.Webhook.EnableHTTP2 = 8443, "1.3", true
	want.Injection.ExcludedNamespaces = []string{"kube-system"}
	want.Injection.TrustedRequesters = &config.TrustedRequesters{Groups: []string{"platform:controllers"}}
	want.Injection.NamespaceCacheWait = &metav1.Duration{Duration: 500 * time.Millisecond}
	want.ShutdownGracePeriod = &metav1.Duration{Duration: time.Minute}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Parse (-want +got):\n%s", diff)
	}
}

func TestParseErrors(t *testing.T) {
	cases := map[string]struct {
		doc      string
		contains []string
	}{
		"unknown field":          {doc: header + "webhook: {portt: 1}\n", contains: []string{"webhook.portt"}},
		"unknown top-level":      {doc: header + "metric: {bindAddress: \":1\"}\n", contains: []string{`"metric"`}},
		"mistyped field":         {doc: header + "webhook: {port: \"abc\"}\n", contains: []string{"webhook.port"}},
		"mistyped duration":      {doc: header + "shutdownGracePeriod: soon\n", contains: []string{"soon"}},
		"duplicate field":        {doc: header + "namespace: a\nnamespace: b\n", contains: []string{`"namespace"`}},
		"duplicate nested field": {doc: header + "webhook:\n  port: 1\n  port: 2\n", contains: []string{`"port"`}},
		"duplicate in JSON":      {doc: `{"apiVersion":"config.modelgate.io/v1alpha1","kind":"Configuration","namespace":"a","namespace":"b"}`, contains: []string{`"namespace"`}},
		"wrong apiVersion":       {doc: "apiVersion: config.modelgate.io/v1\nkind: Configuration\n", contains: []string{`"config.modelgate.io/v1"`, `"config.modelgate.io/v1alpha1"`}},
		"wrong kind":             {doc: "apiVersion: config.modelgate.io/v1alpha1\nkind: Config\n", contains: []string{`"Config"`}},
		"no type":                {doc: "namespace: a\n", contains: []string{"apiVersion"}},
		"empty":                  {doc: "", contains: []string{"apiVersion"}},
		"not YAML":               {doc: "apiVersion: [\n", contains: []string{"yaml: line 1"}},
		"invalid value":          {doc: header + "webhook: {port: 70000}\n", contains: []string{"webhook.port"}},
		"every invalid value": {
			doc:      header + "webhook: {tlsMinVersion: \"1.1\"}\nmetrics: {bindAddress: nope}\n",
			contains: []string{"webhook.tlsMinVersion", "metrics.bindAddress"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c, err := config.Parse([]byte(tc.doc))
			if err == nil {
				t.Fatalf("Parse succeeded with %+v, want an error", c)
			}
			if !errors.Is(err, config.ErrInvalid) {
				t.Errorf("error %v does not wrap ErrInvalid", err)
			}
			for _, s := range tc.contains {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not contain %q", err, s)
				}
			}
		})
	}
}

func TestValidate(t *testing.T) {
	cases := map[string]struct {
		edit       func(c *config.Configuration)
		wantFields []string
	}{
		"defaults":  {edit: func(*config.Configuration) {}},
		"self mode": {edit: func(c *config.Configuration) { c.Certificates.Mode = config.CertificatesSelf }},
		"unknown certificate mode": {
			edit: func(c *config.Configuration) { c.Certificates.Mode = "vault" }, wantFields: []string{"certificates.mode"},
		},
		"certificate names and addresses": {
			edit: func(c *config.Configuration) {
				s := &c.Certificates.Self
				s.SecretName, s.ServiceName, s.ExtraDNSNames, s.IPAddresses = "Bad_Secret", "", []string{"ok.example.com", "no way"}, []string{"127.0.0.1", "::1", "localhost"}
			},
			wantFields: []string{"certificates.self.secretName", "certificates.self.serviceName", "certificates.self.extraDNSNames[1]", "certificates.self.ipAddresses[2]"},
		},
		"certificate lifetimes that cannot rotate safely": {
			edit: func(c *config.Configuration) {
				s := &c.Certificates.Self
				s.ServingLifetime.Duration, s.RenewBefore.Duration = 24*time.Hour, 48*time.Hour
				s.CALifetime.Duration, s.InjectionGrace.Duration, s.CheckInterval.Duration = 72*time.Hour, 72*time.Hour, 48*time.Hour
			},
			wantFields: []string{"certificates.self.renewBefore", "certificates.self.caLifetime", "certificates.self.injectionGrace", "certificates.self.checkInterval"},
		},
		"metrics disabled": {edit: func(c *config.Configuration) { c.Metrics.BindAddress = "0" }},
		"metrics client CA over HTTPS": {
			edit: func(c *config.Configuration) { c.Metrics.ClientCAFile = "/etc/modelgate/metrics-client-ca/ca.crt" },
		},
		"metrics client CA over plain HTTP": {
			edit: func(c *config.Configuration) {
				c.Metrics.Secure, c.Metrics.ClientCAFile = ptr.To(false), "/etc/modelgate/metrics-client-ca/ca.crt"
			},
			wantFields: []string{"metrics.clientCAFile"},
		},
		"metrics client CA at a relative path": {
			edit: func(c *config.Configuration) { c.Metrics.ClientCAFile = "metrics-client-ca/ca.crt" }, wantFields: []string{"metrics.clientCAFile"},
		},
		"webhook client CA": {
			edit: func(c *config.Configuration) { c.Webhook.ClientCAFile = "/etc/modelgate-webhook-client-ca/ca.crt" },
		},
		"webhook client CA at a relative path": {
			edit: func(c *config.Configuration) { c.Webhook.ClientCAFile = "webhook-client-ca/ca.crt" }, wantFields: []string{"webhook.clientCAFile"},
		},
		"cache wait at the limit, with an evaluation that still fits": {edit: func(c *config.Configuration) {
			c.Injection.NamespaceCacheWait.Duration, c.Policy.EvaluationTimeout.Duration = 3*time.Second, 1500*time.Millisecond
		}},
		// Issue 15, item 9: each in its range, together over the timeout.
		"cache wait and evaluation over the webhook timeout together": {
			edit: func(c *config.Configuration) {
				c.Injection.NamespaceCacheWait.Duration, c.Policy.EvaluationTimeout.Duration = 2*time.Second, 4*time.Second
			},
			wantFields: []string{"policy.evaluationTimeout"},
		},
		"no cache wait": {edit: func(c *config.Configuration) { c.Injection.NamespaceCacheWait.Duration = 0 }},
		"bad namespace": {edit: func(c *config.Configuration) { c.Namespace = "Bad_NS" }, wantFields: []string{"namespace"}},
		"port too high": {edit: func(c *config.Configuration) { c.Webhook.Port = 70000 }, wantFields: []string{"webhook.port"}},
		"negative port": {edit: func(c *config.Configuration) { c.Webhook.Port = -1 }, wantFields: []string{"webhook.port"}},
		"old TLS":       {edit: func(c *config.Configuration) { c.Webhook.TLSMinVersion = "1.1" }, wantFields: []string{"webhook.tlsMinVersion"}},
		"bind address not host:port": {
			edit: func(c *config.Configuration) { c.Metrics.BindAddress = "nope" }, wantFields: []string{"metrics.bindAddress"},
		},
		"bind address port out of range": {
			edit: func(c *config.Configuration) { c.Health.BindAddress = ":99999" }, wantFields: []string{"health.bindAddress"},
		},
		"bind address port not a number": {
			edit: func(c *config.Configuration) { c.Health.BindAddress = "localhost:http" }, wantFields: []string{"health.bindAddress"},
		},
		"negative grace period": {
			edit: func(c *config.Configuration) { c.ShutdownGracePeriod.Duration = -time.Second }, wantFields: []string{"shutdownGracePeriod"},
		},
		"negative drain period": {
			edit: func(c *config.Configuration) { c.DrainPeriod.Duration = -time.Second }, wantFields: []string{"drainPeriod"},
		},
		"bad excluded namespace": {
			edit:       func(c *config.Configuration) { c.Injection.ExcludedNamespaces = []string{"kube-system", "Bad_NS"} },
			wantFields: []string{"injection.excludedNamespaces[1]"},
		},
		"cache wait too long": {
			edit:       func(c *config.Configuration) { c.Injection.NamespaceCacheWait.Duration = 10 * time.Second },
			wantFields: []string{"injection.namespaceCacheWait"},
		},
		"negative cache wait": {
			edit:       func(c *config.Configuration) { c.Injection.NamespaceCacheWait.Duration = -time.Second },
			wantFields: []string{"injection.namespaceCacheWait"},
		},
		"short username prefix": {
			edit: func(c *config.Configuration) {
				c.Injection.TrustedRequesters.UsernamePrefixes = []string{"system:serviceaccount:kube-system:", "sys"}
			},
			wantFields: []string{"injection.trustedRequesters.usernamePrefixes[1]"},
		},
		"controller off, engine presets that are valid": {
			edit: func(c *config.Configuration) {
				c.Controller.Enabled = ptr.To(false)
				c.Controller.Engines = map[string]config.EnginePreset{
					"vllm":   {Image: "registry.example/vllm:1", Args: []string{"--model={{model}}", "--port", "{{port}}"}},
					"custom": {Image: "registry.example/engine:2", Env: []config.EnvVar{{Name: "MODEL", Value: "{{model}}"}}},
				}
			},
		},
		"controller settings that cannot work": {
			edit: func(c *config.Configuration) {
				c.Controller.ServiceAccountName = "Bad SA"
				c.Controller.Engines = map[string]config.EnginePreset{
					"llamacpp": {Image: "x"},
					"sglang":   {Image: "", Args: []string{"--model-path", "{{modelpath}}"}},
					"tgi":      {Image: "ghcr.io/tgi:2", Env: []config.EnvVar{{Name: "1BAD", Value: "{{port}}"}}},
				}
			},
			wantFields: []string{"controller.serviceAccountName", "controller.engines", "controller.engines[sglang].image",
				"controller.engines[sglang].args[1]", "controller.engines[tgi].env[0].name"},
		},
		"every problem at once": {
			edit: func(c *config.Configuration) {
				c.Webhook.Port = 70000
				c.Webhook.TLSMinVersion = "1.1"
				c.Metrics.BindAddress = "nope"
				c.Injection.ExcludedNamespaces = []string{"Bad_NS"}
				c.Injection.NamespaceCacheWait.Duration = 10 * time.Second
				c.Injection.TrustedRequesters.UsernamePrefixes = []string{"sys"}
			},
			wantFields: []string{
				"webhook.port", "webhook.tlsMinVersion", "metrics.bindAddress", "injection.excludedNamespaces[0]",
				"injection.namespaceCacheWait", "injection.trustedRequesters.usernamePrefixes[0]",
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := config.New()
			tc.edit(c)
			var got []string
			for _, e := range c.Validate() {
				got = append(got, e.Field)
			}
			if diff := cmp.Diff(tc.wantFields, got); diff != "" {
				t.Errorf("invalid fields (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDefault(t *testing.T) {
	t.Run("keeps set values", func(t *testing.T) {
		noPodNamespace(t)
		c := &config.Configuration{Namespace: "platform", Webhook: config.WebhookServer{Port: 8443}}
		config.Default(c)
		want := config.New()
		want.Namespace, want.Webhook.Port = "platform", 8443
		if diff := cmp.Diff(want, c); diff != "" {
			t.Errorf("Default (-want +got):\n%s", diff)
		}
	})
	t.Run("namespace from POD_NAMESPACE", func(t *testing.T) {
		t.Setenv("POD_NAMESPACE", "from-env")
		if got := config.New().Namespace; got != "from-env" {
			t.Errorf("namespace = %q, want from-env", got)
		}
	})
	t.Run("metrics on :8443, secure unless turned off", func(t *testing.T) {
		c := config.New()
		if c.Metrics.BindAddress != ":8443" || c.Metrics.Secure == nil || !*c.Metrics.Secure {
			t.Errorf("metrics default to %q secure=%v, want \":8443\" secure=true", c.Metrics.BindAddress, c.Metrics.Secure)
		}
		got, err := config.Parse([]byte(header + "metrics: {bindAddress: \"127.0.0.1:8080\", secure: false}\n"))
		if err != nil {
			t.Fatalf("Parse: %v", err)
		}
		if got.Metrics.BindAddress != "127.0.0.1:8080" || got.Metrics.Secure == nil || *got.Metrics.Secure {
			t.Errorf("metrics %q secure=%v, want the document's 127.0.0.1:8080 secure=false kept", got.Metrics.BindAddress, got.Metrics.Secure)
		}
	})
	t.Run("default excluded namespaces are a copy", func(t *testing.T) {
		config.New().Injection.ExcludedNamespaces[0] = "changed"
		if got := config.New().Injection.ExcludedNamespaces[0]; got != config.DefaultExcludedNamespaces[0] {
			t.Errorf("New shares its slice with DefaultExcludedNamespaces: got %q", got)
		}
	})
}

func TestLoad(t *testing.T) {
	noPodNamespace(t)
	dir := t.TempDir()
	t.Run("missing file", func(t *testing.T) {
		_, err := config.Load(filepath.Join(dir, "absent.yaml"))
		if !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("error %v does not wrap fs.ErrNotExist", err)
		}
		if errors.Is(err, config.ErrInvalid) {
			t.Errorf("error %v wraps ErrInvalid for an unreadable file", err)
		}
	})
	t.Run("invalid file", func(t *testing.T) {
		path := filepath.Join(dir, "bad.yaml")
		if err := os.WriteFile(path, []byte(header+"webhook: {portt: 1}\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := config.Load(path)
		if !errors.Is(err, config.ErrInvalid) || !strings.Contains(err.Error(), path) {
			t.Errorf("error %v: want one wrapping ErrInvalid and naming %s", err, path)
		}
	})
	t.Run("valid file", func(t *testing.T) {
		path := filepath.Join(dir, "good.yaml")
		if err := os.WriteFile(path, []byte(header), 0o600); err != nil {
			t.Fatal(err)
		}
		got, err := config.Load(path)
		if err != nil {
			t.Fatalf("Load: %v", err)
		}
		if diff := cmp.Diff(config.New(), got); diff != "" {
			t.Errorf("Load (-want +got):\n%s", diff)
		}
	})
}

// TestShippedConfiguration holds the shipped file to its promise: it spells
// out every default, so it decodes to config.New() before and after defaults.
func TestShippedConfiguration(t *testing.T) {
	noPodNamespace(t)
	const path = "../../../config/manager/configuration.yaml"
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		t.Skipf("%s not present", path)
	}
	if err != nil {
		t.Fatal(err)
	}
	got, err := config.Load(path)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if diff := cmp.Diff(config.New(), got); diff != "" {
		t.Errorf("shipped configuration after defaults (-defaults +file):\n%s", diff)
	}
	var raw config.Configuration
	if err := yaml.UnmarshalStrict(data, &raw); err != nil {
		t.Fatalf("strict decode: %v", err)
	}
	// The loader image is the one default left out: it is the build's own
	// release, which a file shared by every release cannot name.
	want := config.New()
	want.Injection.Loader.Image = ""
	if diff := cmp.Diff(want, &raw); diff != "" {
		t.Errorf("shipped configuration leaves defaults unstated (-defaults +file as written):\n%s", diff)
	}
}

func TestDefaultLoaderImage(t *testing.T) {
	cases := map[string]struct {
		version, want string
	}{
		"release":                    {version: "v1.4.2", want: "ghcr.io/modelgate/modelgate:v1.4.2"},
		"release candidate":          {version: "v1.5.0-rc.1", want: "ghcr.io/modelgate/modelgate:v1.5.0-rc.1"},
		"go build, go test":          {version: "dev", want: "ghcr.io/modelgate/modelgate:latest"},
		"between tags":               {version: "v1.4.2-7-g0c1d2e3", want: "ghcr.io/modelgate/modelgate:latest"},
		"modified tree at a release": {version: "v1.4.2-dirty", want: "ghcr.io/modelgate/modelgate:latest"},
		"no tag":                     {version: "0c1d2e3", want: "ghcr.io/modelgate/modelgate:latest"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := config.DefaultLoaderImage(tc.version); got != tc.want {
				t.Errorf("DefaultLoaderImage(%q) = %q, want %q", tc.version, got, tc.want)
			}
		})
	}
	// Tests are not a release build: New defaults to the newest release.
	if got, want := config.New().Injection.Loader.Image, "ghcr.io/modelgate/modelgate:latest"; got != want {
		t.Errorf("New().Injection.Loader.Image = %q, want %q", got, want)
	}
}

// metrics.clientCAFile's errors name the field and the value, and say what
// is accepted.
func TestValidateClientCAFileMessage(t *testing.T) {
	for name, tc := range map[string]struct {
		secure bool
		file   string
		want   string
	}{
		"over plain HTTP": {
			file: "/etc/ca/ca.crt",
			want: `metrics.clientCAFile: Invalid value: "/etc/ca/ca.crt": must be empty when metrics.secure is false: client certificates are only checked over HTTPS`,
		},
		"relative": {
			secure: true, file: "ca/ca.crt",
			want: `metrics.clientCAFile: Invalid value: "ca/ca.crt": must be an absolute path`,
		},
	} {
		t.Run(name, func(t *testing.T) {
			c := config.New()
			c.Metrics.Secure, c.Metrics.ClientCAFile = ptr.To(tc.secure), tc.file
			errs := c.Validate()
			if len(errs) != 1 || errs[0].Error() != tc.want {
				t.Errorf("Validate() = %v\nwant [%s]", errs, tc.want)
			}
		})
	}
}

// webhook.clientCAFile's error names the field and the value, and says
// what is accepted.
func TestValidateWebhookClientCAFileMessage(t *testing.T) {
	c := config.New()
	c.Webhook.ClientCAFile = "ca/ca.crt"
	want := `webhook.clientCAFile: Invalid value: "ca/ca.crt": must be an absolute path`
	if errs := c.Validate(); len(errs) != 1 || errs[0].Error() != want {
		t.Errorf("Validate() = %v\nwant [%s]", errs, want)
	}
}

// The budget error shows its arithmetic.
func TestValidateBudgetMessage(t *testing.T) {
	c := config.New()
	c.Injection.NamespaceCacheWait.Duration, c.Policy.EvaluationTimeout.Duration = 2*time.Second, 4*time.Second
	errs := c.Validate()
	if len(errs) != 1 {
		t.Fatalf("Validate() = %v, want one error", errs)
	}
	want := "injection.namespaceCacheWait (2s) + policy.evaluationTimeout (4s) + 500ms for the rest of a review = 6.5s, " +
		"over the webhooks' timeoutSeconds (5s): the API server would give up on the review first; lower either"
	if errs[0].Detail != want {
		t.Errorf("detail %q\nwant %q", errs[0].Detail, want)
	}
}
