package annotations

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/resource"
)

// anyParser adapts a typed parser to one table.
func anyParser[T any](parse func(string) (T, error)) func(string) (any, error) {
	return func(s string) (any, error) { return parse(s) }
}

func TestValueParsers(t *testing.T) {
	var (
		cache      = anyParser(ParseCache)
		port       = anyParser(ParsePort)
		healthPath = anyParser(ParseHealthPath)
		products   = anyParser(ParseProducts)
		engine     = anyParser(ParseEngine)
		mount      = anyParser(ParseMountPath)
		secret     = anyParser(ParseSecretName)
		container  = anyParser(ParseContainerName)
		profile    = anyParser(ParseProfileName)
		gpus       = anyParser(func(s string) (int64, error) { return ParsePositiveInt(s, MaxGPUs) })
	)
	const (
		cacheRule  = `must be "disk", "memory", "pvc:<claim>" or "volume:<name of a volume the serving container mounts>"`
		healthRule = `must be an HTTP path starting with "/" (for example /health), without spaces or non-ASCII characters, at most 256 characters`
		mountRule  = `must be an absolute, clean path other than "/" and without ':' (for example /models)`
	)
	cases := map[string]struct {
		parse func(string) (any, error)
		in    string
		want  any
		// wantErr is the whole message, or its start when it ends with '*'.
		wantErr string
	}{
		"cache disk":              {parse: cache, in: "disk", want: Cache{Medium: CacheDisk}},
		"cache memory":            {parse: cache, in: "memory", want: Cache{Medium: CacheMemory}},
		"cache pvc":               {parse: cache, in: "pvc:model-cache", want: Cache{Medium: CachePVC, Claim: "model-cache"}},
		"cache upper case":        {parse: cache, in: "Disk", wantErr: cacheRule},
		"cache empty":             {parse: cache, in: "", wantErr: cacheRule},
		"cache pvc without claim": {parse: cache, in: "pvc:", wantErr: `claim "" in "pvc:<claim>" is not a valid PersistentVolumeClaim name: *`},
		"cache volume":            {parse: cache, in: "volume:hf-cache", want: Cache{Medium: CacheVolume, Volume: "hf-cache"}},
		"cache volume bad name":   {parse: cache, in: "volume:HF.cache", wantErr: `volume "HF.cache" in "volume:<name>" is not a valid volume name: *`},
		"cache volume empty":      {parse: cache, in: "volume:", wantErr: `volume "" in "volume:<name>" is not a valid volume name: *`},
		"cache pvc bad claim":     {parse: cache, in: "pvc:Cache", wantErr: `claim "Cache" in "pvc:<claim>" is not a valid PersistentVolumeClaim name: *`},

		"gpus one":           {parse: gpus, in: "1", want: int64(1)},
		"gpus max":           {parse: gpus, in: "64", want: int64(64)},
		"gpus leading zero":  {parse: gpus, in: "08", want: int64(8)},
		"gpus zero":          {parse: gpus, in: "0", wantErr: "must be an integer from 1 to 64"},
		"gpus over max":      {parse: gpus, in: "65", wantErr: "must be an integer from 1 to 64"},
		"gpus negative":      {parse: gpus, in: "-1", wantErr: "must be an integer from 1 to 64"},
		"gpus plus sign":     {parse: gpus, in: "+2", wantErr: "must be an integer from 1 to 64"},
		"gpus padded":        {parse: gpus, in: " 2", wantErr: "must be an integer from 1 to 64"},
		"gpus fraction":      {parse: gpus, in: "1.5", wantErr: "must be an integer from 1 to 64"},
		"gpus overflow":      {parse: gpus, in: "99999999999999999999", wantErr: "must be an integer from 1 to 64"},
		"gpus empty":         {parse: gpus, in: "", wantErr: "must be an integer from 1 to 64"},
		"port":               {parse: port, in: "8000", want: int32(8000)},
		"port max":           {parse: port, in: "65535", want: int32(65535)},
		"port over max":      {parse: port, in: "65536", wantErr: "must be a port number from 1 to 65535"},
		"port name":          {parse: port, in: "http", wantErr: "must be a port number from 1 to 65535"},
		"health path":        {parse: healthPath, in: "/v2/health/ready", want: "/v2/health/ready"},
		"health query":       {parse: healthPath, in: "/health?full=1", want: "/health?full=1"},
		"health relative":    {parse: healthPath, in: "health", wantErr: healthRule},
		"health space":       {parse: healthPath, in: "/he alth", wantErr: healthRule},
		"health tab":         {parse: healthPath, in: "/health\t", wantErr: healthRule},
		"health too long":    {parse: healthPath, in: "/" + strings.Repeat("a", 256), wantErr: healthRule},
		"products one":       {parse: products, in: "NVIDIA-H100-80GB-HBM3", want: []string{"NVIDIA-H100-80GB-HBM3"}},
		"products trimmed":   {parse: products, in: " H100 , A100,H100,A100 ", want: []string{"H100", "A100"}},
		"products empty":     {parse: products, in: " ", wantErr: "must list at least one GPU product, separated by commas"},
		"products hole":      {parse: products, in: "H100,,A100", wantErr: "must be a comma-separated list of GPU products without empty entries"},
		"products trailing":  {parse: products, in: "H100,", wantErr: "must be a comma-separated list of GPU products without empty entries"},
		"products bad value": {parse: products, in: "H100,NVIDIA H100", wantErr: `product "NVIDIA H100" is not a valid label value: *`},
		"products too long":  {parse: products, in: strings.Repeat("a", 64), wantErr: `product "` + strings.Repeat("a", 64) + `" is not a valid label value: *`},
		"engine vllm":        {parse: engine, in: "vllm", want: EngineVLLM},
		"engine custom":      {parse: engine, in: "custom", want: EngineCustom},
		"engine upper case":  {parse: engine, in: "vLLM", wantErr: "must be one of: vllm, sglang, tgi, triton, dynamo, custom"},
		"engine empty":       {parse: engine, in: "", wantErr: "must be one of: vllm, sglang, tgi, triton, dynamo, custom"},
		"mount":              {parse: mount, in: "/mnt/models", want: "/mnt/models"},
		"mount root":         {parse: mount, in: "/", wantErr: mountRule},
		"mount relative":     {parse: mount, in: "models", wantErr: mountRule},
		"mount unclean":      {parse: mount, in: "/models/", wantErr: mountRule},
		"mount dot dot":      {parse: mount, in: "/models/../etc", wantErr: mountRule},
		"mount colon":        {parse: mount, in: "/models:ro", wantErr: mountRule},
		"mount empty":        {parse: mount, in: "", wantErr: mountRule},
		"mount control":      {parse: mount, in: "/models\n", wantErr: "must not contain control characters or invalid UTF-8"},
		"mount bad utf-8":    {parse: mount, in: "/models\xff", wantErr: "must not contain control characters or invalid UTF-8"},
		"secret":             {parse: secret, in: "hf.token", want: "hf.token"},
		"secret bad":         {parse: secret, in: "HF_TOKEN", wantErr: "must be a Secret name: *"},
		"container":          {parse: container, in: "server", want: "server"},
		"container dotted":   {parse: container, in: "my.server", wantErr: "must be a container name: must not contain dots"},
		"profile":            {parse: profile, in: "h100-large", want: "h100-large"},
		"profile empty":      {parse: profile, in: "", wantErr: "must be a profile name: *"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := tc.parse(tc.in)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("parse(%q) error: %v", tc.in, err)
				}
				if diff := cmp.Diff(tc.want, got); diff != "" {
					t.Errorf("parse(%q) (-want +got):\n%s", tc.in, diff)
				}
				return
			}
			if err == nil {
				t.Fatalf("parse(%q) = %v, want an error", tc.in, got)
			}
			if start, ok := strings.CutSuffix(tc.wantErr, "*"); ok {
				if !strings.HasPrefix(err.Error(), start) {
					t.Errorf("error = %q, want it to start with %q", err, start)
				}
			} else if err.Error() != tc.wantErr {
				t.Errorf("error = %q, want %q", err, tc.wantErr)
			}
		})
	}
}

func TestParseQuantity(t *testing.T) {
	const rule = "must be a size from 1 to 1Pi bytes, such as 16Gi or 500M"
	cases := map[string]struct {
		in      string
		want    string // as String() writes it
		wantErr bool
	}{
		"binary":         {in: "16Gi", want: "16Gi"},
		"decimal":        {in: "500M", want: "500M"},
		"bytes":          {in: "1024", want: "1024"},
		"exponent":       {in: "1e9", want: "1e9"},
		"fraction":       {in: "1.5Gi", want: "1536Mi"},
		"tiny":           {in: "1e-30", wantErr: true},
		"far exponent":   {in: "92233720E6854755807", wantErr: true},
		"int32 exponent": {in: "2E6024865272343", wantErr: true},
		"long":           {in: "0000000000000000000000000000000001", wantErr: true},
		"sub-byte":       {in: "500m", wantErr: true},
		"zero":           {in: "0", wantErr: true},
		"negative":       {in: "-1Gi", wantErr: true},
		"max":            {in: "1Pi", want: "1Pi"},
		"over max":       {in: "1025Ti", wantErr: true},
		"overflow":       {in: "10000000000000000000000", wantErr: true},
		"unit typo":      {in: "16GB", wantErr: true},
		"empty":          {in: "", wantErr: true},
		"space":          {in: "16 Gi", wantErr: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := ParseQuantity(tc.in)
			if tc.wantErr {
				if err == nil || err.Error() != rule {
					t.Fatalf("ParseQuantity(%q) = %v, %v; want error %q", tc.in, got.String(), err, rule)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseQuantity(%q) error: %v", tc.in, err)
			}
			if want := resource.MustParse(tc.want); got.Cmp(want) != 0 || got.String() != tc.want {
				t.Errorf("ParseQuantity(%q) = %s, want %s", tc.in, got.String(), tc.want)
			}
		})
	}
}
