package webhook

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/modelgate/modelgate/api/annotations"
	config "github.com/modelgate/modelgate/api/config/v1alpha1"
	"github.com/modelgate/modelgate/internal/seal"
	"github.com/modelgate/modelgate/mutators"
	"github.com/modelgate/modelgate/test/harnesses/builders"
)

// The flags of a FuzzReview input, bit by bit.
const (
	reviewUpdate      = 1 << iota // an UPDATE whose old object is the same object
	reviewNSEnabled               // the namespace opts every object in
	reviewTrusted                 // the requester is a template-copying controller
	reviewSealValid               // the metadata carrying the record gets a real seal
	reviewRecordOnPod             // the record and seal sit on the pod template, not the object
)

// reviewSpecs are the pod specs FuzzReview's objects carry: a user's
// serving Pod with one of each field modelgate may add beside (userPod), a
// vLLM server with what published GPU manifests declare (its GPU limit and
// toleration, probes, a port flag, a cache variable, a sidecar and an init
// container), and the builders' bare one-container spec.
var reviewSpecs = []func() corev1.PodSpec{
	func() corev1.PodSpec { return userPod(nil, nil).Spec },
	vllmSpec,
	func() corev1.PodSpec { return *builders.PodSpecOf(builders.New("Pod", builders.Options{})) },
}

// vllmSpec is a vLLM server as GPU manifests publish it.
func vllmSpec() corev1.PodSpec {
	gpu := corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}
	http := func(path string) *corev1.Probe {
		return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: path, Port: intstr.FromString("http")}},
			PeriodSeconds: 10, FailureThreshold: 3}
	}
	startup := http("/health")
	startup.FailureThreshold = 120
	return corev1.PodSpec{
		InitContainers: []corev1.Container{{Name: "fetch-config", Image: "registry.example.com/platform/config-fetcher:2.0",
			Args: []string{"--out=/config"}, VolumeMounts: []corev1.VolumeMount{{Name: "config", MountPath: "/config"}}}},
		Containers: []corev1.Container{
			{
				Name: "vllm", Image: "vllm/vllm-openai:v0.6.3",
				Args:  []string{"--model", "meta-llama/Llama-3.1-8B-Instruct", "--port", "8000"},
				Env:   []corev1.EnvVar{{Name: "HF_HUB_CACHE", Value: "/cache/hub"}, {Name: "HF_TOKEN", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "hf"}, Key: "token"}}}},
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8000, Protocol: corev1.ProtocolTCP}},
				Resources: corev1.ResourceRequirements{
					Limits:   corev1.ResourceList{"nvidia.com/gpu": gpu["nvidia.com/gpu"], corev1.ResourceMemory: resource.MustParse("32Gi")},
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("32Gi")},
				},
				VolumeMounts:   []corev1.VolumeMount{{Name: "cache", MountPath: "/cache"}, {Name: "config", MountPath: "/config", ReadOnly: true}},
				ReadinessProbe: http("/health"), LivenessProbe: http("/health"), StartupProbe: startup,
			},
			{
				Name: "metrics-exporter", Image: "registry.example.com/platform/metrics-exporter:1.4",
				Ports: []corev1.ContainerPort{{Name: "metrics", ContainerPort: 9090}},
				Env:   []corev1.EnvVar{{Name: "TARGET", Value: "http://localhost:8000/metrics"}},
			},
		},
		Volumes: []corev1.Volume{
			{Name: "cache", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "model-cache"}}},
			{Name: "config", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		},
		Tolerations: []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
		Affinity: &corev1.Affinity{
			NodeAffinity: &corev1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{
				Weight: 10, Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{
					{Key: "topology.kubernetes.io/zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"us-east-1a"}}}}}}},
			PodAntiAffinity: &corev1.PodAntiAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{
				Weight: 100, PodAffinityTerm: corev1.PodAffinityTerm{TopologyKey: "kubernetes.io/hostname",
					LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "server"}}}}}},
		},
	}
}

// reviewObject builds an object of the kind with the spec, the annotations
// on its own metadata (objAnn) and on its pod template (tplAnn), and the
// labels on both; for a Pod, both sets of annotations go on the Pod.
func reviewObject(kind string, spec corev1.PodSpec, objAnn, tplAnn, labels map[string]string) client.Object {
	obj := object(kind, nsPlain, builders.Options{Annotations: objAnn, Labels: labels, TemplateAnnotations: tplAnn, TemplateLabels: labels})
	*builders.PodSpecOf(obj) = spec
	return obj
}

// keyValues reads "key=value" lines; a key without a '/' is a modelgate.io
// key ("gpu=1" is modelgate.io/gpu: "1").
func keyValues(s string) map[string]string {
	if s == "" {
		return nil
	}
	out := map[string]string{}
	for line := range strings.SplitSeq(s, "\n") {
		k, v, _ := strings.Cut(line, "=")
		if k == "" {
			continue
		}
		if !strings.Contains(k, "/") {
			k = annotations.Prefix + k
		}
		out[k] = v
	}
	return out
}

// reviewSeeds are real annotation sets: the samples', the docs' and the
// tests' workloads, and records modelgate writes and users forge.
var reviewSeeds = []struct {
	objAnn, tplAnn, labels, record, seal string
}{
	{tplAnn: "inject=true\nmodel=hf://meta-llama/Llama-3.1-8B-Instruct\nmodel-size=20Gi\nengine=vllm\ngpu=1\ngpu-product=NVIDIA-A100-SXM4-80GB,NVIDIA-H100-80GB-HBM3"},
	{objAnn: "inject=true", tplAnn: "model=s3://acme-ml-models/llama/70b\nmodel-cache=memory\nmodel-size=1Gi\ngpu=8\ngpu-memory=40000\nwarmup-timeout=1200"},
	{tplAnn: "inject=true\nmodel=hf://org/repo@0e9e39f249a16976918f6564b8830bc894c89659\nengine=sglang\nport=30000\nhealth-path=/health_generate\ncontainer=vllm"},
	{tplAnn: "inject=true\nmodel=pvc://model-cache/llama\nmodel-mount=/data/models\nengine=tgi"},
	{tplAnn: "inject=true\nmodel=oci://registry.acme.internal/models/llama:3.1\nmodel-cache=volume:cache\nengine=vllm"},
	{tplAnn: "inject=true\nmodel=gs://bucket/model\nmodel-credentials=gcs-reader\nmodel-credentials-keys=GOOGLE_APPLICATION_CREDENTIALS=key.json"},
	{tplAnn: "inject=true\nmodel=https://models.example.com/llama.tar\nmodel-cache=pvc:shared-cache\nengine=triton\nport=8001"},
	{tplAnn: "inject=true\nengine=custom\nport=9000\nhealth-path=/ready\ncontainer=server"},
	{objAnn: "inject=false", tplAnn: "inject=true\ngpu=1"},
	{tplAnn: "inject=maybe\ngpu=0\nmodel=ftp://x"},
	{tplAnn: "inject=true\nprofile=h100-serving"},
	{labels: "owner=mallory\nteam=ceo", tplAnn: "owner-full=mallory@evil.example"},
	{tplAnn: "inject=true\nmodel=hf://org/repo\ngpu=1", record: forgedRecord, labels: "owner=ceo"},
	{tplAnn: "gpu=1", record: forgedRecord},
	{record: `{"mutators":["owner-metadata","model-loader"],"settings":"0","owns":["initContainer/model-loader","volume/model-store","volumeMount/server/model-store"]}`, seal: "v1.AAAAAAAAAAAAAAAAAAAAAA"},
	{tplAnn: "inject=true\nmodel=hf://org/repo\nengine=vllm\ngpu=1", record: `{"mutators":[]}`, seal: "not-a-seal"},
}

// forgedRecord claims, as a user could write it, every field userPod sets.
const forgedRecord = `{"mutators":["owner-metadata","model-loader","gpu-placement","serving-probes"],"settings":"0",` +
	`"owns":["limits/server/memory=1Gi","requests/server/cpu=500m","nodeAffinity/In/tenant.example.com/pool",` +
	`"toleration/NoSchedule/tenant","env/server/HF_TOKEN_PATH=/secrets/t","volume/scratch","volumeMount/server/scratch",` +
	`"readinessProbe/server","containerPort/server/9000/api","limits/vllm/nvidia.com/gpu=1","toleration/NoSchedule/nvidia.com/gpu",` +
	`"env/vllm/HF_HUB_CACHE=/cache/hub","readinessProbe/vllm","startupProbe/vllm","containerPort/vllm/8000/http"]}`

// FuzzReview admits whole AdmissionReviews, built from random and real
// modelgate.io annotations, labels and records (modelgate.io/injected, and
// modelgate.io/seal: random, or a real one over the metadata), on every
// kind the mutating webhook serves, through the real Mutating handler.
// Every answer is allowed or denied with a code from the house list, never
// 500. A patched object keeps every container, variable, volume, mount,
// resource, toleration, affinity term, probe and port the input had, with
// its value, except what a record modelgate can prove it wrote owns (a
// sealed record, or the old object's on an UPDATE). Admitting the result
// again, as a reinvocation of the same request and as an UPDATE that
// changes nothing, patches nothing.
func FuzzReview(f *testing.F) {
	for i, s := range reviewSeeds {
		for k := range builders.Kinds {
			f.Add(uint8(k), uint8(i%len(reviewSpecs)), s.objAnn, s.tplAnn, s.labels, s.record, s.seal, uint8((i+k)%32))
		}
	}
	// A sealed forged record: modelgate may take what it owns.
	f.Add(uint8(0), uint8(0), "", "inject=true\nmodel=hf://org/repo", "", forgedRecord, "", uint8(reviewSealValid))
	f.Add(uint8(1), uint8(1), "inject=true", "gpu=1\nengine=vllm", "", forgedRecord, "", uint8(reviewSealValid|reviewRecordOnPod|reviewUpdate))
	cfg := config.New()
	cfg.Injection.Profiles = map[string]map[string]string{
		"h100-serving": {annotations.GPU: "1", annotations.GPUProduct: "NVIDIA-H100-80GB-HBM3", annotations.Engine: "vllm"},
	}
	handlers := map[bool]*Mutating{
		false: NewMutating(cfg, everyNamespace(false), NewMetrics(nil)),
		true:  NewMutating(cfg, everyNamespace(true), NewMetrics(nil)),
	}
	key := recordKey(cfg)

	f.Fuzz(func(t *testing.T, kindIdx, specIdx uint8, objAnn, tplAnn, labels, record, sealValue string, flags uint8) {
		kind := builders.Kinds[int(kindIdx)%len(builders.Kinds)]
		spec := reviewSpecs[int(specIdx)%len(reviewSpecs)]()
		obj := reviewObject(kind, spec, keyValues(objAnn), keyValues(tplAnn), keyValues(labels))
		recordMeta := obj.(metav1.ObjectMetaAccessor).GetObjectMeta().(*metav1.ObjectMeta)
		if flags&reviewRecordOnPod != 0 {
			recordMeta = builders.PodTemplateMeta(obj)
		}
		if record != "" {
			metav1.SetMetaDataAnnotation(recordMeta, annotations.Injected, record)
		}
		switch {
		case flags&reviewSealValid != 0:
			metav1.SetMetaDataAnnotation(recordMeta, annotations.Seal, key.Sign(nsPlain, recordMeta))
		case sealValue != "":
			metav1.SetMetaDataAnnotation(recordMeta, annotations.Seal, sealValue)
		}
		raw := toJSON(t, obj)
		req := reviewRequest(kind, raw, flags)

		h := handlers[flags&reviewNSEnabled != 0]
		resp := h.Handle(context.Background(), req)
		if !resp.Allowed {
			checkDenial(t, kind, resp)
			return
		}
		out := applyPatch(t, raw, resp)
		if len(patchesOf(resp)) > 0 {
			after := decodeAs(t, kind, out)
			owned := provenOwned(obj, recordMeta, key, flags)
			if lost := lostUserFields(builders.PodSpecOf(obj), builders.PodSpecOf(after), owned); len(lost) > 0 {
				t.Fatalf("%s %s: the patch took away what the input had:\n  %s\ninput: %s\npatch: %s",
					kind, req.Operation, strings.Join(lost, "\n  "), raw, resp.Patch)
			}
		}
		// Admitted again as the API server would: a reinvocation of the same
		// request, then an UPDATE that changes nothing.
		again := req
		again.Object.Raw = out
		expectNoPatch(t, h, again, "reinvocation")
		noop := reviewRequest(kind, out, flags|reviewUpdate)
		expectNoPatch(t, h, noop, "UPDATE changing nothing")
	})
}

// reviewRequest is the admission request of raw as the flags say: an
// UPDATE from the same object, and by a trusted controller or alice.
func reviewRequest(kind string, raw []byte, flags uint8) admission.Request {
	user := authenticationv1.UserInfo{Username: alice, Groups: []string{"system:authenticated"}}
	if flags&reviewTrusted != 0 {
		user = authenticationv1.UserInfo{Username: rsCtrl, Groups: []string{"system:serviceaccounts", "system:authenticated"}}
	}
	req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		UID: "0df28fbd-5f5f-4a9e-9c8a-7b6a6b1c1c1c", Kind: gvks[kind], Namespace: nsPlain, Name: "server",
		Operation: admissionv1.Create, UserInfo: user, Object: runtime.RawExtension{Raw: raw},
	}}
	if flags&reviewUpdate != 0 {
		req.Operation = admissionv1.Update
		req.OldObject = runtime.RawExtension{Raw: raw}
	}
	return req
}

// checkDenial fails unless a denial carries a code from the house list.
func checkDenial(t *testing.T, kind string, resp admission.Response) {
	t.Helper()
	if resp.Result == nil {
		t.Fatalf("%s: denied without a Result", kind)
	}
	switch resp.Result.Code {
	case http.StatusBadRequest, http.StatusForbidden, http.StatusUnprocessableEntity:
	default:
		t.Fatalf("%s: denied with code %d (%s), want 400, 403 or 422", kind, resp.Result.Code, resp.Result.Message)
	}
}

// expectNoPatch admits req and fails unless it is allowed without a patch.
func expectNoPatch(t *testing.T, h *Mutating, req admission.Request, what string) {
	t.Helper()
	resp := h.Handle(context.Background(), req)
	if !resp.Allowed || len(patchesOf(resp)) > 0 {
		msg := ""
		if resp.Result != nil {
			msg = fmt.Sprintf("%d %s", resp.Result.Code, resp.Result.Message)
		}
		t.Fatalf("%s %s of the admitted object: allowed=%v patch=%s result=%q, want allowed without a patch\nobject: %s",
			req.Kind.Kind, what, resp.Allowed, resp.Patch, msg, req.Object.Raw)
	}
}

// provenOwned returns whether a record modelgate can prove it wrote owns a
// part: the record under a valid seal, or, on an UPDATE, the old object's
// (which is the input itself here).
func provenOwned(obj client.Object, recordMeta *metav1.ObjectMeta, key *seal.Key, flags uint8) func(string) bool {
	var owns []string
	objMeta := obj.(metav1.ObjectMetaAccessor).GetObjectMeta().(*metav1.ObjectMeta)
	for _, m := range []*metav1.ObjectMeta{objMeta, builders.PodTemplateMeta(obj)} {
		r, ok := mutators.ParseRecord(m.Annotations[annotations.Injected])
		if ok && (flags&reviewUpdate != 0 || (m == recordMeta && key.Verify(nsPlain, m))) {
			owns = append(owns, r.Owns...)
		}
	}
	return func(part string) bool { return slices.Contains(owns, part) }
}

// lostUserFields lists each field of the input's pod spec that the output
// lacks or has with another value, unless owned says a proven record owns
// it (parts named as mutators/parts.go names them).
func lostUserFields(in, out *corev1.PodSpec, owned func(string) bool) []string {
	var lost []string
	miss := func(part, format string, args ...any) {
		if part == "" || !owned(part) {
			lost = append(lost, fmt.Sprintf(format, args...))
		}
	}
	for _, list := range []struct {
		kind    string
		in, out []corev1.Container
	}{{"initContainer", in.InitContainers, out.InitContainers}, {"container", in.Containers, out.Containers}} {
		for _, ic := range list.in {
			i := slices.IndexFunc(list.out, func(c corev1.Container) bool { return c.Name == ic.Name })
			if i < 0 {
				miss(list.kind+"/"+ic.Name, "%s %s", list.kind, ic.Name)
				continue
			}
			lost = append(lost, lostContainerFields(&ic, &list.out[i], owned)...)
		}
	}
	for _, v := range in.Volumes {
		if !slices.ContainsFunc(out.Volumes, func(o corev1.Volume) bool { return equality.Semantic.DeepEqual(o, v) }) {
			miss("volume/"+v.Name, "volume %s", v.Name)
		}
	}
	for _, tol := range in.Tolerations {
		if !slices.ContainsFunc(out.Tolerations, func(o corev1.Toleration) bool { return equality.Semantic.DeepEqual(o, tol) }) {
			miss("toleration/"+string(tol.Effect)+"/"+tol.Key, "toleration %s", tol.Key)
		}
	}
	for k, v := range in.NodeSelector {
		if out.NodeSelector[k] != v {
			miss("", "nodeSelector %s=%s", k, v)
		}
	}
	lostAffinity(in.Affinity, out.Affinity, miss)
	return lost
}

// lostContainerFields lists what of the input container ic the output
// container oc lacks.
func lostContainerFields(ic, oc *corev1.Container, owned func(string) bool) []string {
	var lost []string
	miss := func(part, format string, args ...any) {
		if part == "" || !owned(part) {
			lost = append(lost, fmt.Sprintf("container %s: ", ic.Name)+fmt.Sprintf(format, args...))
		}
	}
	c := ic.Name
	if ic.Image != oc.Image || !equality.Semantic.DeepEqual(ic.Command, oc.Command) || !equality.Semantic.DeepEqual(ic.Args, oc.Args) {
		miss("", "image, command or args")
	}
	for _, e := range ic.Env {
		if !slices.ContainsFunc(oc.Env, func(o corev1.EnvVar) bool { return equality.Semantic.DeepEqual(o, e) }) {
			miss("env/"+c+"/"+e.Name+"="+e.Value, "env %s=%s", e.Name, e.Value)
		}
	}
	for _, e := range ic.EnvFrom {
		if !slices.ContainsFunc(oc.EnvFrom, func(o corev1.EnvFromSource) bool { return equality.Semantic.DeepEqual(o, e) }) {
			miss("", "envFrom %+v", e)
		}
	}
	for _, p := range ic.Ports {
		if !slices.ContainsFunc(oc.Ports, func(o corev1.ContainerPort) bool { return equality.Semantic.DeepEqual(o, p) }) {
			miss(fmt.Sprintf("containerPort/%s/%d/%s", c, p.ContainerPort, p.Name), "port %s %d", p.Name, p.ContainerPort)
		}
	}
	for _, m := range ic.VolumeMounts {
		if !slices.ContainsFunc(oc.VolumeMounts, func(o corev1.VolumeMount) bool { return equality.Semantic.DeepEqual(o, m) }) {
			miss("volumeMount/"+c+"/"+m.Name, "volumeMount %s", m.Name)
		}
	}
	for _, list := range []struct {
		name    string
		in, out corev1.ResourceList
	}{{"limits", ic.Resources.Limits, oc.Resources.Limits}, {"requests", ic.Resources.Requests, oc.Resources.Requests}} {
		for r, q := range list.in {
			if got, ok := list.out[r]; !ok || got.Cmp(q) != 0 {
				miss(fmt.Sprintf("%s/%s/%s=%s", list.name, c, r, q.String()), "%s %s=%s", list.name, r, q.String())
			}
		}
	}
	for _, p := range []struct {
		name    string
		in, out *corev1.Probe
	}{{"readinessProbe", ic.ReadinessProbe, oc.ReadinessProbe}, {"livenessProbe", ic.LivenessProbe, oc.LivenessProbe}, {"startupProbe", ic.StartupProbe, oc.StartupProbe}} {
		if p.in != nil && !equality.Semantic.DeepEqual(p.in, p.out) {
			part := p.name + "/" + c
			if p.name == "livenessProbe" {
				part = "" // modelgate owns no liveness probe
			}
			miss(part, "%s", p.name)
		}
	}
	return lost
}

// lostAffinity reports to miss the affinity terms of in that out lacks: each
// requirement of a required node term (modelgate may add its own beside,
// in every term), every preferred node term, and every pod (anti-)affinity
// term.
func lostAffinity(in, out *corev1.Affinity, miss func(part, format string, args ...any)) {
	if in == nil {
		return
	}
	if out == nil {
		out = &corev1.Affinity{}
	}
	if na := in.NodeAffinity; na != nil {
		outNA := out.NodeAffinity
		if outNA == nil {
			outNA = &corev1.NodeAffinity{}
		}
		if req := na.RequiredDuringSchedulingIgnoredDuringExecution; req != nil {
			var outTerms []corev1.NodeSelectorTerm
			if outNA.RequiredDuringSchedulingIgnoredDuringExecution != nil {
				outTerms = outNA.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
			}
			for _, term := range req.NodeSelectorTerms {
				for _, r := range term.MatchExpressions {
					found := slices.ContainsFunc(outTerms, func(o corev1.NodeSelectorTerm) bool {
						return slices.ContainsFunc(o.MatchExpressions, func(x corev1.NodeSelectorRequirement) bool { return equality.Semantic.DeepEqual(x, r) })
					})
					if !found {
						miss("nodeAffinity/"+string(r.Operator)+"/"+r.Key, "required node affinity %s %s %v", r.Key, r.Operator, r.Values)
					}
				}
			}
		}
		for _, p := range na.PreferredDuringSchedulingIgnoredDuringExecution {
			if !slices.ContainsFunc(outNA.PreferredDuringSchedulingIgnoredDuringExecution, func(o corev1.PreferredSchedulingTerm) bool { return equality.Semantic.DeepEqual(o, p) }) {
				miss("", "preferred node affinity %+v", p)
			}
		}
	}
	if !podAffinityKept(in.PodAffinity, out.PodAffinity) {
		miss("", "pod affinity")
	}
	if !podAntiAffinityKept(in.PodAntiAffinity, out.PodAntiAffinity) {
		miss("", "pod anti-affinity")
	}
}

func podAffinityKept(in, out *corev1.PodAffinity) bool {
	if in == nil {
		return true
	}
	return out != nil && termsKept(in.RequiredDuringSchedulingIgnoredDuringExecution, out.RequiredDuringSchedulingIgnoredDuringExecution) &&
		termsKept(in.PreferredDuringSchedulingIgnoredDuringExecution, out.PreferredDuringSchedulingIgnoredDuringExecution)
}

func podAntiAffinityKept(in, out *corev1.PodAntiAffinity) bool {
	if in == nil {
		return true
	}
	return out != nil && termsKept(in.RequiredDuringSchedulingIgnoredDuringExecution, out.RequiredDuringSchedulingIgnoredDuringExecution) &&
		termsKept(in.PreferredDuringSchedulingIgnoredDuringExecution, out.PreferredDuringSchedulingIgnoredDuringExecution)
}

// termsKept reports whether every term of in is in out.
func termsKept[T any](in, out []T) bool {
	for _, t := range in {
		if !slices.ContainsFunc(out, func(o T) bool { return equality.Semantic.DeepEqual(o, t) }) {
			return false
		}
	}
	return true
}
