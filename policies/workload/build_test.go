package workload

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/modelgate/modelgate/api/annotations"
	"github.com/modelgate/modelgate/test/harnesses/builders"
)

// sourceOf is the Source the webhook builds for a builders object.
func sourceOf(obj any) Source {
	s := Source{Operation: "CREATE", GPU: nvidia, Sealed: true}
	switch o := obj.(type) {
	case *corev1.Pod:
		s.Kind, s.APIVersion, s.Object, s.PodMeta, s.PodSpec = "Pod", "v1", &o.ObjectMeta, &o.ObjectMeta, &o.Spec
	case *appsv1.Deployment:
		s.Kind, s.APIVersion, s.Object, s.PodMeta, s.PodSpec = "Deployment", "apps/v1", &o.ObjectMeta, &o.Spec.Template.ObjectMeta, &o.Spec.Template.Spec
	case *appsv1.StatefulSet:
		s.Kind, s.APIVersion, s.Object, s.PodMeta, s.PodSpec = "StatefulSet", "apps/v1", &o.ObjectMeta, &o.Spec.Template.ObjectMeta, &o.Spec.Template.Spec
	case *batchv1.Job:
		s.Kind, s.APIVersion, s.Object, s.PodMeta, s.PodSpec = "Job", "batch/v1", &o.ObjectMeta, &o.Spec.Template.ObjectMeta, &o.Spec.Template.Spec
	case *batchv1.CronJob:
		tpl := &o.Spec.JobTemplate.Spec.Template
		s.Kind, s.APIVersion, s.Object, s.PodMeta, s.PodSpec = "CronJob", "batch/v1", &o.ObjectMeta, &tpl.ObjectMeta, &tpl.Spec
	}
	return s
}

func TestBuildKinds(t *testing.T) {
	opts := builders.Options{Namespace: "team-a", Name: "llama",
		Labels:              map[string]string{annotations.OwnerLabel: "alice", annotations.TeamLabel: "nlp"},
		Annotations:         map[string]string{annotations.Injected: testRecord},
		TemplateLabels:      map[string]string{"tier": "serving"},
		TemplateAnnotations: map[string]string{"note": "template"}}
	server := Container{Name: "server", Image: "registry.example.com/llm/server:1.0",
		Resources: Resources{Limits: map[string]string{}, Requests: map[string]string{}}, Ports: []int32{}, Claims: []string{}}
	base := View{Name: "llama", Namespace: "team-a", Operation: "CREATE",
		Labels:          map[string]string{annotations.OwnerLabel: "alice", annotations.TeamLabel: "nlp"},
		Annotations:     map[string]string{annotations.Injected: testRecord},
		PodLabels:       map[string]string{"app": "llama", "tier": "serving"},
		PodAnnotations:  map[string]string{"note": "template"},
		UserInfo:        UserInfo{Groups: []string{}},
		NamespaceLabels: map[string]string{},
		Owner:           "alice", Team: "nlp", Injected: true,
		Containers: []Container{server}, InitContainers: []Container{}, EphemeralContainers: []Container{},
		GPU: GPU{Resource: string(gpuResource), Products: []string{}, Claims: []string{}, Devices: []Device{}, UnresolvedClaims: []string{}},
	}
	for _, kind := range builders.Kinds {
		t.Run(kind, func(t *testing.T) {
			want := base
			want.Kind = kind
			switch kind {
			case "Pod":
				want.APIVersion = "v1"
				// A Pod's own metadata is its pod metadata.
				want.Labels = map[string]string{annotations.OwnerLabel: "alice", annotations.TeamLabel: "nlp", "tier": "serving"}
				want.Annotations = map[string]string{annotations.Injected: testRecord, "note": "template"}
				want.PodLabels, want.PodAnnotations = want.Labels, want.Annotations
			case "Deployment", "StatefulSet":
				want.APIVersion = "apps/v1"
			default:
				want.APIVersion = "batch/v1"
			}
			got := Build(sourceOf(builders.New(kind, opts)))
			if diff := cmp.Diff(&want, got); diff != "" {
				t.Errorf("Build(%s) (-want +got):\n%s", kind, diff)
			}
		})
	}
}

func TestBuildPodMetaDefaultsToObject(t *testing.T) {
	meta := &metav1.ObjectMeta{Labels: map[string]string{"a": "1"}, Annotations: map[string]string{"b": "2"}}
	got := Build(Source{Kind: "Pod", Object: meta})
	if diff := cmp.Diff(meta.Labels, got.PodLabels); diff != "" {
		t.Errorf("podLabels (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(meta.Annotations, got.PodAnnotations); diff != "" {
		t.Errorf("podAnnotations (-want +got):\n%s", diff)
	}
}

func TestBuildDeployment(t *testing.T) {
	got := Build(vllmDeployment(t))
	want := &View{
		Kind: "Deployment", APIVersion: "apps/v1", Name: "llama", Namespace: "team-a", Operation: "CREATE",
		Labels:         vllmDeployment(t).Object.Labels,
		Annotations:    vllmDeployment(t).Object.Annotations,
		PodLabels:      map[string]string{"app": "llama"},
		PodAnnotations: map[string]string{"prometheus.io/scrape": "true"},
		// No Extra: authenticator scopes stay out of the view.
		UserInfo:         UserInfo{Username: "alice@example.com", Groups: []string{"team-a", "system:authenticated"}, UID: "u-1"},
		NamespaceLabels:  map[string]string{"kubernetes.io/metadata.name": "team-a", annotations.NamespaceTeam: "nlp"},
		Owner:            "alice-example.com",
		Team:             "nlp",
		Injected:         true,
		ServingContainer: "vllm",
		Containers: []Container{{
			Name: "vllm", Image: "vllm/vllm-openai:v0.6.0", GPUs: 1,
			Resources: Resources{
				Limits:   map[string]string{"nvidia.com/gpu": "1", "memory": "64Gi"},
				Requests: map[string]string{"nvidia.com/gpu": "1", "cpu": "4"},
			},
			SecurityContext: corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false),
				Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}, RunAsNonRoot: ptr.To(true)},
			Ports:          []int32{8000},
			ReadinessProbe: true, StartupProbe: true, Claims: []string{},
		}},
		InitContainers: []Container{{
			Name: "modelgate-loader", Image: "ghcr.io/modelgate/loader:v0.1.0",
			Resources: Resources{Limits: map[string]string{},
				Requests: map[string]string{"cpu": "500m", "memory": "512Mi"}},
			SecurityContext: corev1.SecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](65532),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
			Ports: []int32{}, Claims: []string{},
		}},
		EphemeralContainers: []Container{},
		GPU:                 GPU{Resource: "nvidia.com/gpu", Count: 1, Products: []string{"NVIDIA-A100-SXM4-80GB"}, MemoryMiB: 40960, Claims: []string{}, Devices: []Device{}, UnresolvedClaims: []string{}},
		Model: &Model{URI: "hf://meta-llama/Llama-3.1-8B@" + commit, Scheme: "hf",
			Path: "meta-llama/Llama-3.1-8B", Org: "meta-llama", Revision: commit, Pinned: true},
		Engine:  "vllm",
		Serving: true,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Build (-want +got):\n%s", diff)
	}
}

func TestBuildContainerFields(t *testing.T) {
	c := container("app", "", "")
	c.Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("0.5"),
		corev1.ResourceMemory: resource.MustParse("1024Mi")}
	c.SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true)}
	c.LivenessProbe = &corev1.Probe{}
	c.Ports = []corev1.ContainerPort{{ContainerPort: 8080}, {ContainerPort: 9090}}
	notPrivileged := container("sidecar", "", "")
	notPrivileged.SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(false)}
	got := Build(Source{PodSpec: &corev1.PodSpec{Containers: []corev1.Container{c, notPrivileged},
		HostNetwork: true, HostPID: true, HostIPC: true}})
	want := []Container{
		{Name: "app", Image: "registry.example.com/app:1",
			// Quantities in canonical form.
			Resources:       Resources{Limits: map[string]string{"cpu": "500m", "memory": "1Gi"}, Requests: map[string]string{}},
			SecurityContext: corev1.SecurityContext{Privileged: ptr.To(true)}, Privileged: true,
			Ports: []int32{8080, 9090}, LivenessProbe: true, Claims: []string{}},
		{Name: "sidecar", Image: "registry.example.com/sidecar:1",
			Resources:       Resources{Limits: map[string]string{}, Requests: map[string]string{}},
			SecurityContext: corev1.SecurityContext{Privileged: ptr.To(false)}, Ports: []int32{}, Claims: []string{}},
	}
	if diff := cmp.Diff(want, got.Containers); diff != "" {
		t.Errorf("containers (-want +got):\n%s", diff)
	}
	if !got.HostNetwork || !got.HostPID || !got.HostIPC {
		t.Errorf("host namespaces = %t, %t, %t, want all true", got.HostNetwork, got.HostPID, got.HostIPC)
	}
}

func TestBuildGPUCount(t *testing.T) {
	tests := map[string]struct {
		keys           GPUKeys
		containers     []corev1.Container
		initContainers []corev1.Container
		want           int64
		wantPer        []int64 // containers, then init containers
	}{
		"none":                {containers: []corev1.Container{container("a", "", "")}, want: 0, wantPer: []int64{0}},
		"limit":               {containers: []corev1.Container{container("a", "2", "")}, want: 2, wantPer: []int64{2}},
		"request only":        {containers: []corev1.Container{container("a", "", "3")}, want: 3, wantPer: []int64{3}},
		"limit over request":  {containers: []corev1.Container{container("a", "4", "1")}, want: 4, wantPer: []int64{4}},
		"sum over containers": {containers: []corev1.Container{container("a", "1", ""), container("b", "2", "2")}, want: 3, wantPer: []int64{1, 2}},
		"init container larger": {containers: []corev1.Container{container("a", "1", "")},
			initContainers: []corev1.Container{container("warm", "4", ""), container("prep", "2", "")}, want: 4, wantPer: []int64{1, 4, 2}},
		"init container smaller": {containers: []corev1.Container{container("a", "2", ""), container("b", "2", "")},
			initContainers: []corev1.Container{container("warm", "3", "")}, want: 4, wantPer: []int64{2, 2, 3}},
		"sidecar runs beside the app": {containers: []corev1.Container{container("a", "2", "")},
			initContainers: []corev1.Container{sidecar("proxy", "1")}, want: 3, wantPer: []int64{2, 1}},
		"init container beside earlier sidecar": {containers: []corev1.Container{container("a", "1", "")},
			initContainers: []corev1.Container{sidecar("proxy", "1"), container("warm", "4", "")}, want: 5, wantPer: []int64{1, 1, 4}},
		"init container before sidecar": {containers: []corev1.Container{container("a", "1", "")},
			initContainers: []corev1.Container{container("warm", "4", ""), sidecar("proxy", "1")}, want: 4, wantPer: []int64{1, 4, 1}},
		"other vendor's resource": {keys: GPUKeys{ResourceName: "amd.com/gpu"},
			containers: []corev1.Container{container("a", "2", "")}, want: 0, wantPer: []int64{0}},
		"no resource name": {keys: GPUKeys{ProductLabel: productLabel}, containers: []corev1.Container{container("a", "2", "")}, want: 0, wantPer: []int64{0}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			keys := tc.keys
			if keys.ResourceName == "" && keys.ProductLabel == "" {
				keys = nvidia
			}
			v := Build(Source{GPU: keys, PodSpec: &corev1.PodSpec{Containers: tc.containers, InitContainers: tc.initContainers}})
			if v.GPU.Count != tc.want {
				t.Errorf("gpu.count = %d, want %d", v.GPU.Count, tc.want)
			}
			var per []int64
			for _, c := range append(v.Containers, v.InitContainers...) {
				per = append(per, c.GPUs)
			}
			if diff := cmp.Diff(tc.wantPer, per); diff != "" {
				t.Errorf("gpus per container (-want +got):\n%s", diff)
			}
		})
	}
}

func TestBuildGPUPlacement(t *testing.T) {
	const a100, h100, l4 = "NVIDIA-A100-SXM4-80GB", "NVIDIA-H100-80GB-HBM3", "NVIDIA-L4"
	in := func(vs ...string) corev1.NodeSelectorRequirement {
		return req(productLabel, corev1.NodeSelectorOpIn, vs...)
	}
	gt := func(v string) corev1.NodeSelectorRequirement { return req(memoryLabel, corev1.NodeSelectorOpGt, v) }
	zone := req("topology.kubernetes.io/zone", corev1.NodeSelectorOpIn, "eu-west-1a")
	tests := map[string]struct {
		settings     annotations.GPUSettings
		affinity     *corev1.Affinity
		wantProducts []string
		wantMemory   int64
	}{
		"unconstrained": {wantProducts: []string{}},
		"from settings": {settings: annotations.GPUSettings{Count: 1, Products: []string{h100}, MinMemoryMiB: 81920},
			affinity: requiredAffinity(term(in(a100), gt("40959"))), wantProducts: []string{h100}, wantMemory: 81920},
		"from affinity": {affinity: requiredAffinity(term(in(l4, a100), gt("40959"))),
			wantProducts: []string{a100, l4}, wantMemory: 40960},
		"union over terms, sorted and unique": {affinity: requiredAffinity(term(in(h100, a100)), term(in(a100, l4))),
			wantProducts: []string{a100, h100, l4}},
		"intersection within a term": {affinity: requiredAffinity(term(in(h100, a100), in(a100, l4))),
			wantProducts: []string{a100}},
		"a term without the label admits any product": {affinity: requiredAffinity(term(in(a100), gt("40959")), term(zone)),
			wantProducts: []string{}},
		"empty terms match no node": {affinity: requiredAffinity(term(), term(in(a100), gt("40959"))),
			wantProducts: []string{a100}, wantMemory: 40960},
		"other operators do not constrain": {affinity: requiredAffinity(term(
			req(productLabel, corev1.NodeSelectorOpNotIn, l4), req(memoryLabel, corev1.NodeSelectorOpLt, "100000"))),
			wantProducts: []string{}},
		"largest Gt within a term": {affinity: requiredAffinity(term(gt("24575"), gt("40959"), zone)),
			wantProducts: []string{}, wantMemory: 40960},
		"smallest across terms": {affinity: requiredAffinity(term(gt("81919")), term(gt("40959"))),
			wantProducts: []string{}, wantMemory: 40960},
		"a term without Gt admits any memory": {affinity: requiredAffinity(term(gt("81919")), term(zone)),
			wantProducts: []string{}},
		"unparsable Gt ignored": {affinity: requiredAffinity(term(gt("80Gi"), gt("24575"))),
			wantProducts: []string{}, wantMemory: 24576},
		"preferred affinity ignored": {affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{Weight: 1, Preference: term(in(a100))}}}},
			wantProducts: []string{}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			v := Build(Source{GPU: nvidia, Settings: annotations.Settings{GPU: tc.settings},
				PodSpec: &corev1.PodSpec{Affinity: tc.affinity}})
			if diff := cmp.Diff(tc.wantProducts, v.GPU.Products); diff != "" {
				t.Errorf("gpu.products (-want +got):\n%s", diff)
			}
			if v.GPU.MemoryMiB != tc.wantMemory {
				t.Errorf("gpu.memoryMiB = %d, want %d", v.GPU.MemoryMiB, tc.wantMemory)
			}
		})
	}
}

func TestBuildModel(t *testing.T) {
	const digest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	tests := map[string]struct {
		uri  string
		want Model
	}{
		"hf pinned": {uri: "hf://meta-llama/Llama-3.1-8B@" + commit, want: Model{Scheme: "hf",
			Path: "meta-llama/Llama-3.1-8B", Org: "meta-llama", Revision: commit, Pinned: true}},
		"hf branch": {uri: "hf://mistralai/Mistral-7B-v0.1@main", want: Model{Scheme: "hf",
			Path: "mistralai/Mistral-7B-v0.1", Org: "mistralai", Revision: "main"}},
		"hf no revision": {uri: "hf://google/gemma-2b", want: Model{Scheme: "hf", Path: "google/gemma-2b", Org: "google"}},
		"s3":             {uri: "s3://models-bucket/llama/8b", want: Model{Scheme: "s3", Bucket: "models-bucket", Path: "llama/8b"}},
		"gs":             {uri: "gs://ml-models/bert", want: Model{Scheme: "gs", Bucket: "ml-models", Path: "bert"}},
		"https": {uri: "https://models.example.com:8443/llm/model.safetensors",
			want: Model{Scheme: "https", Host: "models.example.com:8443", Path: "llm/model.safetensors"}},
		"oci tag": {uri: "oci://ghcr.io/org/model:v1", want: Model{Scheme: "oci", Host: "ghcr.io", Path: "org/model", Tag: "v1"}},
		"oci digest": {uri: "oci://registry.example.com:5000/org/model@" + digest,
			want: Model{Scheme: "oci", Host: "registry.example.com:5000", Path: "org/model", Digest: digest, Pinned: true}},
		"pvc": {uri: "pvc://shared-models/llama/8b", want: Model{Scheme: "pvc", Claim: "shared-models", Path: "llama/8b"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			v := Build(Source{Settings: annotations.Settings{Model: parseModel(t, tc.uri)}})
			want := tc.want
			want.URI = tc.uri
			if diff := cmp.Diff(&want, v.Model); diff != "" {
				t.Errorf("model (-want +got):\n%s", diff)
			}
			b, err := json.Marshal(v)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(b), "hf-token") {
				t.Errorf("the view names the model credentials: %s", b)
			}
		})
	}
	if v := Build(Source{}); v.Model != nil {
		t.Errorf("model = %+v without a model, want nil", v.Model)
	}
}

func TestBuildEngine(t *testing.T) {
	for _, engine := range []annotations.EngineName{"", annotations.EngineVLLM, annotations.EngineCustom} {
		v := Build(Source{Settings: annotations.Settings{Serving: annotations.ServingSettings{Engine: engine}}})
		if v.Engine != string(engine) || v.Serving != (engine != "") {
			t.Errorf("engine %q: view has engine %q, serving %t", engine, v.Engine, v.Serving)
		}
	}
}

// testRecord is an injection record as modelgate writes it.
const testRecord = `{"mutators":["owner-metadata"],"settings":"0a1b2c3d4e5f"}`

// Owner, team and the injection record reach the view only where modelgate
// sealed them: a hand-written owner or record reads as absent, and so does
// a sealed value that is not a record.
func TestBuildTrustsOnlySealedMetadata(t *testing.T) {
	meta := &metav1.ObjectMeta{
		Labels:      map[string]string{annotations.OwnerLabel: "ceo", annotations.TeamLabel: "finance"},
		Annotations: map[string]string{annotations.Injected: testRecord},
	}
	type trusted struct {
		Owner, Team string
		Injected    bool
	}
	for name, tc := range map[string]struct {
		sealed bool
		record string
		want   trusted
	}{
		"unsealed":                  {record: testRecord, want: trusted{}},
		"unsealed unparsable":       {record: "yes", want: trusted{}},
		"sealed":                    {sealed: true, record: testRecord, want: trusted{Owner: "ceo", Team: "finance", Injected: true}},
		"sealed value not a record": {sealed: true, record: "yes", want: trusted{Owner: "ceo", Team: "finance"}},
	} {
		t.Run(name, func(t *testing.T) {
			m := meta.DeepCopy()
			m.Annotations[annotations.Injected] = tc.record
			v := Build(Source{Kind: "Pod", Object: m, Sealed: tc.sealed})
			if diff := cmp.Diff(tc.want, trusted{v.Owner, v.Team, v.Injected}); diff != "" {
				t.Errorf("trusted fields (-want +got):\n%s", diff)
			}
		})
	}
}

// TestBuildReadsOnlyWhatIsRead: a view built for the keys a set reads
// leaves the record unparsed when no policy reads injected, and equals the
// whole view in every key that is read.
func TestBuildReadsOnlyWhatIsRead(t *testing.T) {
	meta := &metav1.ObjectMeta{
		Labels:      map[string]string{annotations.OwnerLabel: "ceo"},
		Annotations: map[string]string{annotations.Injected: testRecord},
	}
	whole := Build(Source{Kind: "Pod", Object: meta, Sealed: true})
	for name, reads := range map[string]func(string) bool{
		"injected read":     func(k string) bool { return k == "injected" || k == "owner" },
		"injected not read": func(k string) bool { return k == "owner" },
	} {
		t.Run(name, func(t *testing.T) {
			v := Build(Source{Kind: "Pod", Object: meta, Sealed: true, Reads: reads})
			if diff := cmp.Diff(whole.ValueOf(reads).String(), v.ValueOf(reads).String()); diff != "" {
				t.Errorf("the value of the keys read (-whole +built for them):\n%s", diff)
			}
			if got := v.Injected; got != reads("injected") {
				t.Errorf("Injected = %t, want it built only when read", got)
			}
		})
	}
}

// GPUs a pod asks for other than by the configured resource still count:
// NVIDIA MIG instances are GPU devices, dynamic resource allocation claims
// are listed, and containers kubectl debug adds are in the view.
func TestBuildAccelerators(t *testing.T) {
	mig := corev1.Container{Name: "mig", Resources: corev1.ResourceRequirements{
		Limits:   corev1.ResourceList{"nvidia.com/mig-1g.10gb": resource.MustParse("2"), gpuResource: resource.MustParse("1")},
		Requests: corev1.ResourceList{"nvidia.com/mig-3g.40gb": resource.MustParse("1")},
	}}
	dra := corev1.Container{Name: "dra", Resources: corev1.ResourceRequirements{
		Claims: []corev1.ResourceClaim{{Name: "gpu"}, {Name: "nic"}},
	}}
	spec := &corev1.PodSpec{
		Containers:     []corev1.Container{mig, dra},
		ResourceClaims: []corev1.PodResourceClaim{{Name: "gpu"}, {Name: "nic"}},
		EphemeralContainers: []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{
			Name: "debugger", Image: "busybox", SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)},
		}}},
	}
	v := Build(Source{GPU: nvidia, PodSpec: spec})
	if got := v.Containers[0].GPUs; got != 4 {
		t.Errorf("MIG container gpus = %d, want 4 (1 GPU, 2 + 1 MIG instances)", got)
	}
	if v.GPU.Count != 4 {
		t.Errorf("gpu.count = %d, want 4", v.GPU.Count)
	}
	if diff := cmp.Diff([]string{"gpu", "nic"}, v.Containers[1].Claims); diff != "" {
		t.Errorf("container claims (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"gpu", "nic"}, v.GPU.Claims); diff != "" {
		t.Errorf("gpu.claims (-want +got):\n%s", diff)
	}
	if len(v.EphemeralContainers) != 1 || v.EphemeralContainers[0].Name != "debugger" || !v.EphemeralContainers[0].Privileged {
		t.Errorf("ephemeralContainers = %+v, want the privileged debugger", v.EphemeralContainers)
	}
	// Without a configured resource, MIG instances still count.
	if got := Build(Source{PodSpec: spec}).GPU.Count; got != 3 {
		t.Errorf("gpu.count without a configured resource = %d, want 3", got)
	}
}
