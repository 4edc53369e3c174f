package annotations

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

var (
	templateAnnotations = field.NewPath("spec", "template", "metadata", "annotations")
	quantityEqual       = cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 })
)

// workload is a Deployment-like object's sources: its own annotations, then
// its pod template's.
func workload(object, template map[string]string) []Source {
	return []Source{
		{Path: objectAnnotations, Annotations: object},
		{Path: templateAnnotations, Annotations: template},
	}
}

// testProfiles are the Configuration's profiles the parser tests use.
var testProfiles = map[string]map[string]string{
	"a100": {GPU: "1", GPUProduct: "NVIDIA-A100-SXM4-80GB", Engine: "vllm", WarmupTimeout: "900"},
	"defaults-only": {
		GPUProduct: "H100", GPUMemory: "81920", Port: "9000", HealthPath: "/ready",
		ModelMount: "/mnt/model", ModelCache: "pvc:shared-cache", ModelSize: "8Gi", ModelCredentials: "hf-token",
	},
	"memory-cache":  {ModelCache: "memory"},
	"custom-port":   {Engine: "custom", Port: "8080"},
	"custom-engine": {Engine: "custom"},
	"broken":        {GPU: "many"},
	"engine-reads":  {ModelMount: "engine"},
}

func qty(s string) *resource.Quantity {
	q := resource.MustParse(s)
	return &q
}

// modelOnly is what a bare modelgate.io/model: s3://models/llama yields.
func modelOnly() *ModelSettings {
	return &ModelSettings{
		URI:       ModelURI{Raw: "s3://models/llama", Scheme: SchemeS3, Host: "models", Path: "llama"},
		MountPath: DefaultModelMount,
		Cache:     Cache{Medium: CacheDisk},
	}
}

var pvcModel = ModelURI{Raw: "pvc://models/llama", Scheme: SchemePVC, Claim: "models", Path: "llama"}

func TestParserParse(t *testing.T) {
	const warmup = DefaultWarmupTimeoutSeconds
	cases := map[string]struct {
		sources []Source
		want    Settings
	}{
		"inject only": {
			sources: workload(nil, map[string]string{Inject: "true", "app": "x"}),
			want:    Settings{Choice: OptIn},
		},
		"model only, defaulted": {
			sources: workload(nil, map[string]string{Model: "s3://models/llama"}),
			want:    Settings{Model: modelOnly(), Serving: ServingSettings{WarmupTimeoutSeconds: warmup}},
		},
		"every key": {
			sources: workload(nil, map[string]string{
				Inject: "true", Model: "hf://org/repo@main", ModelMount: "/mnt/m", ModelCache: "pvc:cache",
				ModelSize: "16Gi", ModelCredentials: "hf-token", GPU: "2", GPUProduct: "H100, A100,H100",
				GPUMemory: "81920", Engine: "custom", Port: "8000", HealthPath: "/health",
				WarmupTimeout: "600", Container: "server",
			}),
			want: Settings{
				Choice: OptIn,
				Model: &ModelSettings{
					URI:       ModelURI{Raw: "hf://org/repo@main", Scheme: SchemeHF, Path: "org/repo", Revision: "main"},
					MountPath: "/mnt/m", Cache: Cache{Medium: CachePVC, Claim: "cache"}, Size: qty("16Gi"), Credentials: "hf-token",
				},
				GPU:       GPUSettings{Count: 2, Products: []string{"H100", "A100"}, MinMemoryMiB: 81920},
				Serving:   ServingSettings{Engine: EngineCustom, Port: 8000, HealthPath: "/health", WarmupTimeoutSeconds: 600},
				Container: "server",
			},
		},
		"template overrides object, keys merge": {
			sources: workload(
				map[string]string{GPU: "1", Engine: "vllm", Container: "server"},
				map[string]string{GPU: "4", Container: "main"}),
			want: Settings{
				GPU:       GPUSettings{Count: 4},
				Serving:   ServingSettings{Engine: EngineVLLM, WarmupTimeoutSeconds: warmup},
				Container: "main",
			},
		},
		"pod template is last": {
			sources: []Source{
				{Path: objectAnnotations, Annotations: map[string]string{GPU: "1"}},
				{Path: field.NewPath("spec", "jobTemplate", "metadata", "annotations"), Annotations: map[string]string{GPU: "2"}},
				{Path: field.NewPath("spec", "jobTemplate", "spec", "template", "metadata", "annotations"), Annotations: map[string]string{GPU: "3"}},
			},
			want: Settings{GPU: GPUSettings{Count: 3}, Serving: ServingSettings{WarmupTimeoutSeconds: warmup}},
		},
		"overridden bad value is not parsed": {
			sources: workload(map[string]string{GPU: "many"}, map[string]string{GPU: "2"}),
			want:    Settings{GPU: GPUSettings{Count: 2}, Serving: ServingSettings{WarmupTimeoutSeconds: warmup}},
		},
		"profile defaults": {
			sources: workload(nil, map[string]string{Profile: "a100"}),
			want: Settings{
				GPU:     GPUSettings{Count: 1, Products: []string{"NVIDIA-A100-SXM4-80GB"}},
				Serving: ServingSettings{Engine: EngineVLLM, WarmupTimeoutSeconds: 900},
				Profile: "a100",
			},
		},
		"object overrides profile wherever it sits": {
			sources: workload(map[string]string{GPU: "4", WarmupTimeout: "60"}, map[string]string{Profile: "a100", Engine: "tgi"}),
			want: Settings{
				GPU:     GPUSettings{Count: 4, Products: []string{"NVIDIA-A100-SXM4-80GB"}},
				Serving: ServingSettings{Engine: EngineTGI, WarmupTimeoutSeconds: 60},
				Profile: "a100",
			},
		},
		"profile dependents without their prerequisites do not apply": {
			sources: workload(nil, map[string]string{Profile: "defaults-only"}),
			want:    Settings{Profile: "defaults-only", Serving: ServingSettings{WarmupTimeoutSeconds: warmup}},
		},
		"profile dependents apply once the object sets the prerequisites": {
			sources: workload(nil, map[string]string{Profile: "defaults-only", Model: "s3://models/llama", GPU: "1", Engine: "vllm"}),
			want: Settings{
				Model: &ModelSettings{
					URI: modelOnly().URI, MountPath: "/mnt/model", Cache: Cache{Medium: CachePVC, Claim: "shared-cache"},
					Size: qty("8Gi"), Credentials: "hf-token",
				},
				GPU:     GPUSettings{Count: 1, Products: []string{"H100"}, MinMemoryMiB: 81920},
				Serving: ServingSettings{Engine: EngineVLLM, Port: 9000, HealthPath: "/ready", WarmupTimeoutSeconds: warmup},
				Profile: "defaults-only",
			},
		},
		"profile cache and credentials do not apply to a pvc model": {
			sources: workload(nil, map[string]string{Profile: "defaults-only", Model: pvcModel.Raw}),
			want: Settings{
				Model:   &ModelSettings{URI: pvcModel, MountPath: "/mnt/model", Cache: Cache{Medium: CacheDisk}, Size: qty("8Gi")},
				Serving: ServingSettings{WarmupTimeoutSeconds: warmup},
				Profile: "defaults-only",
			},
		},
		"memory cache with a size": {
			sources: workload(nil, map[string]string{Model: "s3://models/llama", ModelCache: "memory", ModelSize: "20Gi"}),
			want: Settings{
				Model:   &ModelSettings{URI: modelOnly().URI, MountPath: DefaultModelMount, Cache: Cache{Medium: CacheMemory}, Size: qty("20Gi")},
				Serving: ServingSettings{WarmupTimeoutSeconds: warmup},
			},
		},
		"a profile's memory cache without a size does not apply": {
			sources: workload(nil, map[string]string{Profile: "memory-cache", Model: "s3://models/llama"}),
			want:    Settings{Model: modelOnly(), Serving: ServingSettings{WarmupTimeoutSeconds: warmup}, Profile: "memory-cache"},
		},
		"a profile's memory cache applies once the object sets a size": {
			sources: workload(nil, map[string]string{Profile: "memory-cache", Model: "s3://models/llama", ModelSize: "4Gi"}),
			want: Settings{
				Model:   &ModelSettings{URI: modelOnly().URI, MountPath: DefaultModelMount, Cache: Cache{Medium: CacheMemory}, Size: qty("4Gi")},
				Serving: ServingSettings{WarmupTimeoutSeconds: warmup},
				Profile: "memory-cache",
			},
		},
		"the engine reads the model itself": {
			sources: workload(nil, map[string]string{Model: "s3://models/llama", ModelMount: "engine", ModelSize: "20Gi"}),
			want: Settings{
				Model:   &ModelSettings{URI: modelOnly().URI, MountPath: DefaultModelMount, Cache: Cache{Medium: CacheDisk}, Size: qty("20Gi"), Delivery: DeliveryEngine},
				Serving: ServingSettings{WarmupTimeoutSeconds: warmup},
			},
		},
		"a profile's engine delivery gives way to the object's own cache": {
			sources: workload(nil, map[string]string{Profile: "engine-reads", Model: "s3://models/llama", ModelCache: "memory", ModelSize: "4Gi"}),
			want: Settings{
				Model:   &ModelSettings{URI: modelOnly().URI, MountPath: DefaultModelMount, Cache: Cache{Medium: CacheMemory}, Size: qty("4Gi")},
				Serving: ServingSettings{WarmupTimeoutSeconds: warmup},
				Profile: "engine-reads",
			},
		},
		"the object's engine delivery drops a profile's cache and credentials": {
			sources: workload(nil, map[string]string{Profile: "defaults-only", Model: "s3://models/llama", ModelMount: "engine"}),
			want: Settings{
				Model:   &ModelSettings{URI: modelOnly().URI, MountPath: DefaultModelMount, Cache: Cache{Medium: CacheDisk}, Size: qty("8Gi"), Delivery: DeliveryEngine},
				Serving: ServingSettings{WarmupTimeoutSeconds: warmup, Port: 0},
				Profile: "defaults-only",
			},
		},
		"custom engine with a profile port and the object's health path": {
			sources: workload(nil, map[string]string{Profile: "custom-port", HealthPath: "/ok"}),
			want: Settings{
				Serving: ServingSettings{Engine: EngineCustom, Port: 8080, HealthPath: "/ok", WarmupTimeoutSeconds: warmup},
				Profile: "custom-port",
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, errs := Parser{Profiles: testProfiles}.Parse(tc.sources...)
			if len(errs) > 0 {
				t.Fatalf("unexpected errors: %v", errs)
			}
			// Origins have their own test (TestParserOrigins).
			if diff := cmp.Diff(tc.want, got, quantityEqual, cmpopts.IgnoreFields(Settings{}, "Origins")); diff != "" {
				t.Errorf("settings (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParserParseErrors(t *testing.T) {
	obj := func(key string) *field.Path { return objectAnnotations.Key(key) }
	tmpl := func(key string) *field.Path { return templateAnnotations.Key(key) }
	cases := map[string]struct {
		parser  Parser
		sources []Source
		want    field.ErrorList
	}{
		"every problem at once, on its own path": {
			sources: workload(
				map[string]string{Model: "ftp://host/model", GPU: "2", Inject: "maybe"},
				map[string]string{GPU: "0", Engine: "vLLM", Port: "http", Container: "Server"}),
			want: field.ErrorList{
				field.NotSupported(obj(Inject), "maybe", InjectValues),
				field.Invalid(obj(Model), "ftp://host/model", `unsupported scheme "ftp" (supported: s3, gs, hf, pvc, https, oci)`),
				field.Invalid(tmpl(GPU), "0", "must be an integer from 1 to 64"),
				field.NotSupported(tmpl(Engine), "vLLM", Engines),
				field.Invalid(tmpl(Port), "http", "must be a port number from 1 to 65535"),
				field.Invalid(tmpl(Container), "Server", "must be a container name: a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"),
			},
		},
		"what the engine reads itself has no cache or credentials of modelgate's": {
			sources: workload(nil, map[string]string{
				Model: "s3://models/llama", ModelMount: "engine", ModelCache: "memory", ModelSize: "1Gi", ModelCredentials: "creds",
			}),
			want: field.ErrorList{
				field.Invalid(tmpl(ModelCache), "memory", `modelgate.io/model-mount: "engine" leaves the model to the engine: modelgate loads nothing and keeps no cache`),
				field.Invalid(tmpl(ModelCredentials), "creds", `modelgate.io/model-mount: "engine" leaves the model to the engine: give the engine its credentials; modelgate's are for its loader, which does not run`),
			},
		},
		"a claim is not read by the engine": {
			sources: workload(nil, map[string]string{Model: "pvc://weights/llama", ModelMount: "engine"}),
			want: field.ErrorList{
				field.Invalid(tmpl(ModelMount), "engine", `a pvc:// model is mounted directly: the engine cannot read a claim itself, so "engine" does not apply`),
			},
		},
		"model settings require a model": {
			sources: workload(nil, map[string]string{
				ModelMount: "/m", ModelCache: "memory", ModelSize: "1Gi", ModelCredentials: "creds",
			}),
			want: field.ErrorList{
				field.Invalid(tmpl(ModelMount), "/m", "requires modelgate.io/model"),
				field.Invalid(tmpl(ModelCache), "memory", "requires modelgate.io/model"),
				field.Invalid(tmpl(ModelSize), "1Gi", "requires modelgate.io/model"),
				field.Invalid(tmpl(ModelCredentials), "creds", "requires modelgate.io/model"),
			},
		},
		"a bad value that also lacks its prerequisite": {
			sources: workload(nil, map[string]string{ModelSize: "lots"}),
			want: field.ErrorList{
				field.Invalid(tmpl(ModelSize), "lots", "must be a size from 1 to 1Pi bytes, such as 16Gi or 500M"),
				field.Invalid(tmpl(ModelSize), "lots", "requires modelgate.io/model"),
			},
		},
		"gpu settings require gpu": {
			sources: workload(map[string]string{GPUProduct: "H100"}, map[string]string{GPUMemory: "1024"}),
			want: field.ErrorList{
				field.Invalid(obj(GPUProduct), "H100", "requires modelgate.io/gpu"),
				field.Invalid(tmpl(GPUMemory), "1024", "requires modelgate.io/gpu"),
			},
		},
		"serving settings require an engine": {
			sources: workload(nil, map[string]string{Port: "8000", HealthPath: "/health", WarmupTimeout: "60"}),
			want: field.ErrorList{
				field.Invalid(tmpl(Port), "8000", "requires modelgate.io/engine"),
				field.Invalid(tmpl(HealthPath), "/health", "requires modelgate.io/engine"),
			},
		},
		"custom engine without port or health path": {
			sources: workload(nil, map[string]string{Engine: "custom"}),
			want: field.ErrorList{field.Invalid(tmpl(Engine), "custom",
				`engine "custom" has no presets and requires modelgate.io/port and modelgate.io/health-path`)},
		},
		"custom engine without health path": {
			sources: workload(map[string]string{Port: "8000"}, map[string]string{Engine: "custom"}),
			want: field.ErrorList{field.Invalid(tmpl(Engine), "custom",
				`engine "custom" has no presets and requires modelgate.io/health-path`)},
		},
		"custom engine from a profile": {
			parser:  Parser{Profiles: testProfiles},
			sources: workload(nil, map[string]string{Profile: "custom-engine", Port: "8000"}),
			want: field.ErrorList{field.Invalid(tmpl(Profile), "custom-engine",
				`profile "custom-engine" sets modelgate.io/engine to "custom", which has no presets and requires modelgate.io/health-path`)},
		},
		"pvc model with a cache or credentials": {
			sources: workload(nil, map[string]string{Model: "pvc://models", ModelCache: "pvc:cache", ModelCredentials: "creds"}),
			want: field.ErrorList{
				field.Invalid(tmpl(ModelCache), "pvc:cache", "a pvc:// model is mounted directly and has no cache"),
				field.Invalid(tmpl(ModelCredentials), "creds", "a pvc:// model is mounted directly and needs no credentials"),
			},
		},
		"pvc model with a memory cache": {
			sources: workload(map[string]string{Model: "pvc://models"}, map[string]string{ModelCache: "memory"}),
			want: field.ErrorList{
				field.Invalid(tmpl(ModelCache), "memory", "a pvc:// model is mounted directly and has no cache"),
			},
		},
		"memory cache without a size": {
			sources: workload(map[string]string{Model: "s3://models/llama"}, map[string]string{ModelCache: "memory"}),
			want: field.ErrorList{field.Invalid(tmpl(ModelCache), "memory",
				"requires modelgate.io/model-size: a model kept in memory is a tmpfs volume charged to the pod's memory, "+
					"and its size sets the volume's limit and the loader's memory")},
		},
		"memory cache with a bad size: the size's error only": {
			sources: workload(nil, map[string]string{Model: "s3://models/llama", ModelCache: "memory", ModelSize: "lots"}),
			want: field.ErrorList{
				field.Invalid(tmpl(ModelSize), "lots", "must be a size from 1 to 1Pi bytes, such as 16Gi or 500M"),
			},
		},
		"unknown profile": {
			parser:  Parser{Profiles: testProfiles},
			sources: workload(map[string]string{Profile: "h100"}, nil),
			want: field.ErrorList{field.NotSupported(obj(Profile), "h100",
				[]string{"a100", "broken", "custom-engine", "custom-port", "defaults-only", "engine-reads", "memory-cache"})},
		},
		"profile with no profiles configured": {
			sources: workload(map[string]string{Profile: "a100"}, nil),
			want:    field.ErrorList{field.Invalid(obj(Profile), "a100", "no profiles are configured")},
		},
		"unvalidated profile with a bad value": {
			parser:  Parser{Profiles: testProfiles},
			sources: workload(nil, map[string]string{Profile: "broken"}),
			want: field.ErrorList{field.Invalid(tmpl(Profile), "broken",
				`profile "broken" sets modelgate.io/gpu to "many": must be an integer from 1 to 64`)},
		},
		"a signed URL: the parameter named, no value echoed": {
			sources: workload(nil, map[string]string{Model: "https://b.s3.amazonaws.com/m.gguf?X-Amz-Expires=60&X-Amz-Credential=AKIA1&X-Amz-Signature=f00d"}),
			want: field.ErrorList{field.Invalid(tmpl(Model), "https://b.s3.amazonaws.com/m.gguf?X-Amz-Expires=60&X-Amz-Credential=redacted&X-Amz-Signature=redacted",
				`must not carry a credential in its query (parameter "X-Amz-Credential"): a credential in a pod spec is readable by anyone `+
					"who can read the pod; put it in a Secret named by modelgate.io/model-credentials, or use an unsigned URL")},
		},
		"a token in a fragment is not echoed": {
			sources: workload(nil, map[string]string{Model: "https://host/m.gguf#access_token=f00d"}),
			want: field.ErrorList{field.Invalid(tmpl(Model), "https://host/m.gguf#redacted",
				"fragment must be #sha256=<64 lower-case hex digits>, the expected SHA-256 of the file (as pip writes it); no other fragment is accepted")},
		},
		"credentials in the model are not echoed": {
			sources: workload(nil, map[string]string{Model: "https://user:secret@host/m"}),
			want: field.ErrorList{field.Invalid(tmpl(Model), "https://redacted@host/m",
				"must not contain credentials (user:password@); put them in a Secret and name it in modelgate.io/model-credentials")},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, errs := tc.parser.Parse(tc.sources...)
			if diff := cmp.Diff(tc.want, errs); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParserValidateProfile(t *testing.T) {
	path := field.NewPath("profiles").Key("gpu")
	cases := map[string]struct {
		name   string
		values map[string]string
		want   field.ErrorList
	}{
		"valid":    {name: "gpu", values: testProfiles["defaults-only"]},
		"empty":    {name: "gpu"},
		"bad name": {name: "GPU", values: map[string]string{GPU: "1"}, want: field.ErrorList{field.Invalid(path, "GPU", "must be a profile name: a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')")}},
		"keys a profile may not set, sorted": {
			name:   "gpu",
			values: map[string]string{Profile: "other", "modelgate.io/gpus": "1", Inject: "true"},
			want: field.ErrorList{
				field.NotSupported(path.Key("modelgate.io/gpus"), "modelgate.io/gpus", profileKeys()),
				field.NotSupported(path.Key(Inject), Inject, profileKeys()),
				field.NotSupported(path.Key(Profile), Profile, profileKeys()),
			},
		},
		"bad values, and no cross-key rules": {
			name:   "gpu",
			values: map[string]string{GPU: "0", Engine: "VLLM", Port: "1", GPUProduct: "A100", Model: "s3://x"},
			want: field.ErrorList{
				field.NotSupported(path.Key(Engine), "VLLM", Engines),
				field.Invalid(path.Key(GPU), "0", "must be an integer from 1 to 64"),
				field.Invalid(path.Key(Model), "s3://x", `bucket "x" must be 3 to 63 characters of a-z, 0-9, '.', '-' and '_', starting and ending with a letter or digit`),
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			errs := Parser{Profiles: testProfiles}.ValidateProfile(tc.name, tc.values, path)
			if diff := cmp.Diff(tc.want, errs); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSettingsHashFollowsSettings(t *testing.T) {
	annos := map[string]string{Model: "s3://models/llama", GPU: "1"}
	pod, _ := Parse(Source{Path: objectAnnotations, Annotations: annos})
	deployment, _ := Parse(workload(map[string]string{Inject: "true"}, annos)...)
	if pod.Hash() != deployment.Hash() {
		t.Errorf("equal settings hash differently: %q vs %q", pod.Hash(), deployment.Hash())
	}
	more, _ := Parse(Source{Path: objectAnnotations, Annotations: map[string]string{Model: "s3://models/llama", GPU: "2"}})
	if more.Hash() == pod.Hash() {
		t.Errorf("different settings hash alike: %q", pod.Hash())
	}
	if (Settings{}).Hash() == pod.Hash() {
		t.Errorf("settings hash like the zero Settings: %q", pod.Hash())
	}
}

func TestParserOrigins(t *testing.T) {
	got, errs := Parser{Profiles: testProfiles}.Parse(workload(
		map[string]string{Profile: "a100", Model: "s3://models/llama"},
		map[string]string{GPU: "4"})...)
	if len(errs) > 0 {
		t.Fatalf("unexpected errors: %v", errs)
	}
	str := func(o Origin) [2]string { return [2]string{o.Path.String(), o.Profile} }
	profilePath := objectAnnotations.Key(Profile).String()
	want := map[string][2]string{
		Model:         {objectAnnotations.Key(Model).String(), ""},
		GPU:           {templateAnnotations.Key(GPU).String(), ""},
		GPUProduct:    {profilePath, "a100"},
		Engine:        {profilePath, "a100"},
		WarmupTimeout: {profilePath, "a100"},
	}
	gotStr := map[string][2]string{}
	for k, o := range got.Origins {
		gotStr[k] = str(o)
	}
	if diff := cmp.Diff(want, gotStr); diff != "" {
		t.Errorf("origins (-want +got):\n%s", diff)
	}
	if !got.Explicit(GPU) || got.Explicit(Engine) || !got.Set(Engine) || got.Set(Port) {
		t.Errorf("Explicit/Set disagree with the origins: %v", gotStr)
	}
	if p := got.Origin(Port).Path.String(); p != objectAnnotations.Key(Port).String() {
		t.Errorf("Origin of an unset key: path %s", p)
	}
}
