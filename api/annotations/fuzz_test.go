package annotations

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// FuzzParse feeds arbitrary annotation keys and values, and an arbitrary
// modelgate.io/inject value, through Parse.
func FuzzParse(f *testing.F) {
	f.Add("app", "server", true, "true")
	f.Add(Inject, "false", false, "")
	f.Add(Injected, `{"mutators":["owner-metadata"],"settings":"44136fa355b3"}`, true, "maybe")
	f.Add(OwnerLabel, "alice", true, "TRUE")
	f.Add("", "", true, "")
	f.Add("example.com/x", "\xff\xfe", true, "tru\x00e")
	f.Fuzz(func(t *testing.T, key, value string, hasInject bool, inject string) {
		m := map[string]string{key: value}
		if hasInject {
			m[Inject] = inject
		}
		p := field.NewPath("spec", "template", "metadata", "annotations")
		s, all := Parse(Source{Path: field.NewPath("metadata", "annotations")}, Source{Path: p, Annotations: m})
		// key may be a setting key with a bad value: only Inject is checked here.
		var errs field.ErrorList
		for _, e := range all {
			if e.Field == p.Key(Inject).String() {
				errs = append(errs, e)
			}
		}

		v, present := m[Inject]
		valid := !present || v == "true" || v == "false"
		if valid && len(errs) > 0 {
			t.Fatalf("Parse(%q) errors on a valid value: %v", m, errs)
		}
		if !valid && len(errs) != 1 {
			t.Fatalf("Parse(%q) = %d errors, want 1", m, len(errs))
		}
		if len(errs) > 0 {
			return
		}
		want := map[string]Choice{"": Unset, "true": OptIn, "false": OptOut}[v]
		if s.Choice != want {
			t.Fatalf("Parse(%q) choice = %v, want %v", m, s.Choice, want)
		}
	})
}

// FuzzParseModelURI checks that any string either fails cleanly or parses
// into a URI that keeps the input, has a supported scheme and parses again
// to the same thing.
func FuzzParseModelURI(f *testing.F) {
	for _, s := range []string{
		"s3://models/llama-3-8b",
		"hf://meta-llama/Llama-3.1-8B-Instruct@5206a32e0bd3067aef1ce90f5528ade7d866253f",
		"oci://ghcr.io/org/model:v1",
		"oci://localhost:5000/model:v1@" + ociDigest,
		"pvc://models/llama",
		"https://huggingface.co/x/resolve/main/model.safetensors",
		"https://user:pass@host/x?sig=1",
		"https://bucket.s3.us-east-1.amazonaws.com/llama/model.safetensors?X-Amz-Algorithm=AWS4-HMAC-SHA256" +
			"&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20250101%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Date=20250101T000000Z" +
			"&X-Amz-Expires=3600&X-Amz-SignedHeaders=host&X-Amz-Signature=fe5f80f77d5fa3beca038a248ff027d0445342fe2855ddc963176630326f1024",
		"https://storage.googleapis.com/models/llama.gguf?X-Goog-Algorithm=GOOG4-RSA-SHA256&X-Goog-Credential=sa%40p.iam.gserviceaccount.com" +
			"%2F20250101%2Fauto%2Fstorage%2Fgoog4_request&X-Goog-Expires=900&X-Goog-SignedHeaders=host&X-Goog-Signature=0a1b2c",
		"https://d111111abcdef8.cloudfront.net/m.gguf?Expires=1735689600&Signature=nitfHRCrtziwO2HwPfWw~yYDhUF5EwRunQA-j19DzZr&Key-Pair-Id=K2JCJMDEHXQW5F",
		"https://acct.blob.core.windows.net/models/m.gguf?sv=2022-11-02&ss=b&srt=o&sp=r&se=2025-01-01T00:00:00Z&sig=abc%3D",
		"https://host/m.gguf?a=1;token=t",
		"https://host/m.gguf?X%2DAmz%2DSignature=x",
		"https://files.example.com/llama-3.1-8b-q4_k_m.gguf#sha256=9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
		"https://host/m#sha256=9F86D081884C7D659A2FEAA0C55AD015A3BF4F1B2B0B822CD15D6C15B0F00A08",
		"https://host/m#access_token=t",
		"https://host/m?#",
		"https://[::1]:8443/m%2e%2e/x",
		"gs://b/p",
		"junk",
		"",
		"ftp://",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		_ = RedactURI(s)
		u, err := ParseModelURI(s)
		if err != nil {
			if u != (ModelURI{}) {
				t.Fatalf("ParseModelURI(%q) returned %+v with error %v", s, u, err)
			}
			return
		}
		if u.Scheme == SchemeHTTPS {
			rest, _, _ := strings.Cut(s, "#")
			if _, q, ok := strings.Cut(rest, "?"); ok && credentialInQuery(q) != "" {
				t.Fatalf("ParseModelURI(%q) accepted a credential in the query", s)
			}
		}
		if u.SHA256 != "" && (u.Scheme != SchemeHTTPS || !strings.HasSuffix(s, "#sha256="+u.SHA256)) {
			t.Fatalf("ParseModelURI(%q).SHA256 = %q, want it only from an https #sha256= fragment", s, u.SHA256)
		}
		if u.Raw != s {
			t.Fatalf("ParseModelURI(%q).Raw = %q", s, u.Raw)
		}
		if !slices.Contains(Schemes, u.Scheme) || !strings.HasPrefix(s, string(u.Scheme)+"://") {
			t.Fatalf("ParseModelURI(%q).Scheme = %q", s, u.Scheme)
		}
		if strings.HasPrefix(u.Path, "/") || slices.Contains(strings.Split(u.Path, "/"), "..") {
			t.Fatalf("ParseModelURI(%q).Path = %q, want a relative path without \"..\"", s, u.Path)
		}
		if u.Pinned() != (isCommitHash(u.Revision) || u.Digest != "") {
			t.Fatalf("ParseModelURI(%q).Pinned() = %v for %+v", s, u.Pinned(), u)
		}
		again, err := ParseModelURI(u.Raw)
		if err != nil || again != u {
			t.Fatalf("ParseModelURI(%q) again = %+v, %v; want %+v", s, again, err, u)
		}
		b, err := json.Marshal(u)
		if err != nil {
			t.Fatal(err)
		}
		var back ModelURI
		if err := json.Unmarshal(b, &back); err != nil || back != u {
			t.Fatalf("ModelURI %+v does not round-trip through JSON: %+v, %v", u, back, err)
		}
	})
}

// FuzzParseQuantityAndInts checks the numeric parsers' bounds.
func FuzzParseQuantityAndInts(f *testing.F) {
	for _, s := range []string{"16Gi", "500M", "1e9", "0", "-1", "+1", "007", "64", "65", "65535", "99999999999999999999", "1.5", " 2", "0x10", "", "1Pi", "10000000000000000000000", "92233720E6854755807", "1e-2147483647"} {
		f.Add(s, int64(64))
	}
	f.Add("1", int64(0))
	f.Add("9223372036854775807", int64(9223372036854775807))
	f.Fuzz(func(t *testing.T, s string, maxValue int64) {
		if q, err := ParseQuantity(s); err == nil {
			if q.Cmp(minModelSize) < 0 || q.Cmp(maxModelSize) > 0 {
				t.Fatalf("ParseQuantity(%q) = %s, out of range", s, q.String())
			}
			if back, err := resource.ParseQuantity(q.String()); err != nil || back.Cmp(q) != 0 {
				t.Fatalf("ParseQuantity(%q) = %s, which parses back to %s, %v", s, q.String(), back.String(), err)
			}
		}
		for _, bound := range []int64{maxValue, MaxGPUs, MaxGPUMemoryMiB, MaxWarmupTimeoutSeconds} {
			n, err := ParsePositiveInt(s, bound)
			if err != nil {
				continue
			}
			if n < 1 || n > bound {
				t.Fatalf("ParsePositiveInt(%q, %d) = %d, out of range", s, bound, n)
			}
			if strconv.FormatInt(n, 10) != strings.TrimLeft(s, "0") {
				t.Fatalf("ParsePositiveInt(%q, %d) = %d, which is not what s says", s, bound, n)
			}
		}
		if p, err := ParsePort(s); err == nil && (p < 1 || p > 65535) {
			t.Fatalf("ParsePort(%q) = %d, out of range", s, p)
		}
	})
}

// FuzzParseProducts checks that accepted products are usable as node label
// values.
func FuzzParseProducts(f *testing.F) {
	for _, s := range []string{"NVIDIA-H100-80GB-HBM3", " H100 , A100,H100", "H100,,A100", ",", "", "NVIDIA H100", "a.b_c-d"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		products, err := ParseProducts(s)
		if err != nil {
			if products != nil {
				t.Fatalf("ParseProducts(%q) = %q with error %v", s, products, err)
			}
			return
		}
		if len(products) == 0 {
			t.Fatalf("ParseProducts(%q) accepted no products", s)
		}
		for i, p := range products {
			if p == "" || len(validation.IsValidLabelValue(p)) > 0 {
				t.Fatalf("ParseProducts(%q) accepted %q, not a label value", s, p)
			}
			if slices.Contains(products[:i], p) {
				t.Fatalf("ParseProducts(%q) = %q, with a duplicate", s, products)
			}
		}
		if again, err := ParseProducts(strings.Join(products, ",")); err != nil || !slices.Equal(again, products) {
			t.Fatalf("ParseProducts(%q) = %q, which parses back to %q, %v", s, products, again, err)
		}
	})
}

// FuzzParseCredentialKeys checks that accepted pairs name loader variables
// once, with valid Secret keys, and format back to a value that parses to
// the same pairs.
func FuzzParseCredentialKeys(f *testing.F) {
	for _, s := range []string{
		"HF_TOKEN=hf_api_token",
		"AWS_ACCESS_KEY_ID=accessKey,AWS_SECRET_ACCESS_KEY=secretKey",
		" AWS_ACCESS_KEY_ID = access_key_id , AWS_SECRET_ACCESS_KEY=secret_access_key,AWS_SESSION_TOKEN=session_token",
		"GOOGLE_APPLICATION_CREDENTIALS_JSON=key.json",
		"OCI_USERNAME=username,OCI_PASSWORD=password",
		"HF_TOKEN=a,HF_TOKEN=b",
		"HF_TOKEN=hf/token",
		"HF_TOKEN==",
		"token",
		",",
		"",
		"HF_TOKEN=\xff",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		keys, err := ParseCredentialKeys(s)
		if err != nil {
			if keys != nil {
				t.Fatalf("ParseCredentialKeys(%q) = %v with error %v", s, keys, err)
			}
			return
		}
		if len(keys) == 0 {
			t.Fatalf("ParseCredentialKeys(%q) accepted no pairs", s)
		}
		for i, k := range keys {
			if !slices.Contains(LoaderCredentialVars, k.Env) {
				t.Fatalf("ParseCredentialKeys(%q) accepted variable %q", s, k.Env)
			}
			if len(validation.IsConfigMapKey(k.Key)) > 0 {
				t.Fatalf("ParseCredentialKeys(%q) accepted key %q, not a Secret key", s, k.Key)
			}
			for _, prev := range keys[:i] {
				if prev.Env == k.Env {
					t.Fatalf("ParseCredentialKeys(%q) = %v, with %s twice", s, keys, k.Env)
				}
			}
		}
		again, err := ParseCredentialKeys(FormatCredentialKeys(keys))
		if err != nil || !slices.Equal(again, keys) {
			t.Fatalf("ParseCredentialKeys(%q) = %v, which formats and parses back to %v, %v", s, keys, again, err)
		}
	})
}

// fuzzKeys are the keys FuzzParser picks from.
var fuzzKeys = append(slices.Clone(SettingKeys), Inject)

// fuzzSeed encodes annotations for FuzzParser: a key index per value (the
// high bit puts it on the pod template), and the values joined by NUL.
func fuzzSeed(object, template map[string]string) (keys []byte, joined string) {
	var values []string
	for bit, m := range []map[string]string{object, template} {
		for i, k := range fuzzKeys {
			if v, ok := m[k]; ok {
				keys = append(keys, byte(i|bit<<7))
				values = append(values, v)
			}
		}
	}
	return keys, strings.Join(values, "\x00")
}

// FuzzParser feeds random settings on an object and its template through a
// Parser with profiles: it never panics, errors name the annotations, and
// settings parsed without errors are consistent and round-trip through JSON.
func FuzzParser(f *testing.F) {
	for _, seed := range [][2]map[string]string{
		{nil, map[string]string{Inject: "true", Model: "s3://models/llama", GPU: "1", Engine: "vllm"}},
		{map[string]string{Profile: "a100"}, map[string]string{GPU: "4", ModelSize: "16Gi"}},
		{map[string]string{Model: "pvc://models/llama"}, map[string]string{ModelCache: "pvc:cache", Profile: "defaults-only"}},
		{nil, map[string]string{Engine: "custom", Port: "8080", HealthPath: "/health", WarmupTimeout: "600"}},
		{map[string]string{GPUProduct: "H100,A100", GPUMemory: "81920"}, map[string]string{Container: "server"}},
		{nil, map[string]string{Model: "hf://org/repo@" + hfCommit, ModelMount: "/mnt/m", ModelCredentials: "hf"}},
		{map[string]string{ModelCredentialsKeys: "HF_TOKEN=token"}, map[string]string{Model: "hf://org/repo", ModelCredentials: "hf",
			ModelCredentialsKeys: "HF_TOKEN=hf_api_token,HUGGING_FACE_HUB_TOKEN=hf_api_token"}},
		{nil, map[string]string{Model: "s3://models/llama", ModelCredentials: "minio",
			ModelCredentialsKeys: "AWS_ACCESS_KEY_ID=accessKey, AWS_SECRET_ACCESS_KEY=secretKey,AWS_ACCESS_KEY_ID=x"}},
		{nil, map[string]string{Model: "pvc://models/llama", ModelCredentialsKeys: "GOOGLE_APPLICATION_CREDENTIALS_JSON=key.json"}},
		{map[string]string{Model: "ftp://x"}, map[string]string{GPU: "0", Profile: "nope"}},
		{nil, map[string]string{Model: "oci://registry.example.com/m@sha256:" + strings.Repeat("ab", 32), ModelMount: "image-volume:/mnt/m"}},
		{map[string]string{ModelMount: "loader"}, map[string]string{Model: "s3://models/llama", GPU: "2", GPUAllocation: "dra"}},
		{nil, map[string]string{Model: "pvc://models/llama", ModelMount: "image-volume", GPUAllocation: "device-plugin"}},
		{nil, map[string]string{Model: "s3://models/llama", ModelMount: "engine", ModelCache: "memory", Engine: "dynamo", Port: "9090"}},
	} {
		keys, joined := fuzzSeed(seed[0], seed[1])
		f.Add(keys, joined)
	}
	parser := Parser{Profiles: testProfiles}
	f.Fuzz(func(t *testing.T, keys []byte, joined string) {
		values := strings.Split(joined, "\x00")
		object, template := map[string]string{}, map[string]string{}
		for i, b := range keys {
			m := object
			if b&0x80 != 0 {
				m = template
			}
			m[fuzzKeys[int(b&0x7f)%len(fuzzKeys)]] = values[i%len(values)]
		}
		s, errs := parser.Parse(workload(object, template)...)
		for _, e := range errs {
			if !strings.HasPrefix(e.Field, objectAnnotations.String()+"[") && !strings.HasPrefix(e.Field, templateAnnotations.String()+"[") {
				t.Fatalf("error %v is not on an annotation", e)
			}
		}
		if len(errs) > 0 {
			return
		}
		checkSettings(t, s)
	})
}

// checkSettings checks the invariants of settings parsed without errors.
func checkSettings(t *testing.T, s Settings) {
	t.Helper()
	if s.Model != nil && (!slices.Contains(Schemes, s.Model.URI.Scheme) || s.Model.MountPath == "" || s.Model.Cache.Medium == "") {
		t.Fatalf("incomplete model settings: %+v", s.Model)
	}
	if s.GPU.Count == 0 && (s.GPU.Products != nil || s.GPU.MinMemoryMiB != 0) {
		t.Fatalf("GPU settings without GPUs: %+v", s.GPU)
	}
	if s.Serving.Engine == "" && (s.Serving.Port != 0 || s.Serving.HealthPath != "") {
		t.Fatalf("serving settings without an engine: %+v", s.Serving)
	}
	if s.Serving.Engine == EngineCustom && (s.Serving.Port == 0 || s.Serving.HealthPath == "") {
		t.Fatalf("custom engine without a port and health path: %+v", s.Serving)
	}
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatalf("json.Marshal(%+v): %v", s, err)
	}
	var back Settings
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatalf("json.Unmarshal(%s): %v", b, err)
	}
	back.Choice = s.Choice
	if (s.Model != nil) != s.Set(Model) || (s.GPU.Count > 0) != s.Set(GPU) || (s.Serving.Engine != "") != s.Set(Engine) {
		t.Fatalf("origins %v disagree with the settings %+v", s.Origins, s)
	}
	// Origins are not part of the JSON form.
	if diff := cmp.Diff(s, back, quantityEqual, cmpopts.IgnoreFields(Settings{}, "Origins")); diff != "" {
		t.Fatalf("settings do not round-trip through JSON %s (-parsed +decoded):\n%s", b, diff)
	}
	if back.Hash() != s.Hash() {
		t.Fatalf("hash changed through JSON: %q vs %q", s.Hash(), back.Hash())
	}
}

// FuzzParseModelMount checks that any string either fails or parses into
// a delivery and a clean absolute path (or none) that parse again to the
// same.
func FuzzParseModelMount(f *testing.F) {
	for _, seed := range []string{"/models", "image-volume", "image-volume:/mnt/m", "loader:/data", "loader:", "image-volume:/", "/a:b", "loader:/x/../y", "engine", "engine:/m"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		mount, d, err := ParseModelMount(s)
		if err != nil {
			return
		}
		if mount != "" {
			if _, err := ParseMountPath(mount); err != nil {
				t.Fatalf("ParseModelMount(%q) = path %q, which ParseMountPath refuses: %v", s, mount, err)
			}
		}
		again := mount
		if d != "" {
			again = string(d)
			if mount != "" {
				again += ":" + mount
			}
		}
		m2, d2, err := ParseModelMount(again)
		if err != nil || m2 != mount || d2 != d {
			t.Fatalf("ParseModelMount(%q) = %q, %q; its form %q parses to %q, %q, %v", s, mount, d, again, m2, d2, err)
		}
	})
}
