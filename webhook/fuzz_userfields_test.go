package webhook

import (
	"context"
	"encoding/json"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/modelgate/modelgate/api/annotations"
	config "github.com/modelgate/modelgate/api/config/v1alpha1"
)

// userPod is a Pod a user wrote, with one of each field modelgate may add
// beside: resources, env, a volume and its mount, a toleration, a required
// node affinity term, probes and a port.
func userPod(a map[string]string, labels map[string]string) *corev1.Pod {
	probe := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/ready", Port: intstr.FromInt32(9000)}}}
	return &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: "server", Namespace: nsPlain, Annotations: a, Labels: labels},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name: "server", Image: "vllm/vllm-openai:v0.6.3", Args: []string{"--port", "9000"},
				Env:   []corev1.EnvVar{{Name: "HF_TOKEN_PATH", Value: "/secrets/t"}, {Name: "HF_HUB_OFFLINE", Value: "0"}},
				Ports: []corev1.ContainerPort{{Name: "api", ContainerPort: 9000}},
				Resources: corev1.ResourceRequirements{
					Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")},
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")},
				},
				VolumeMounts:   []corev1.VolumeMount{{Name: "scratch", MountPath: "/scratch"}},
				ReadinessProbe: probe,
			}},
			Volumes:     []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
			Tolerations: []corev1.Toleration{{Key: "tenant", Operator: corev1.TolerationOpEqual, Value: "a", Effect: corev1.TaintEffectNoSchedule}},
			Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
					MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "tenant.example.com/pool", Operator: corev1.NodeSelectorOpIn, Values: []string{"a"}}},
				}}},
			}},
		},
	}
}

// FuzzUserFieldsSurvive admits a user's Pod with random modelgate.io
// annotations, owner labels and a random injection record (never sealed:
// a fuzzer cannot make an HMAC), and checks that every field the user
// wrote is still there, with its value, after the patch: modelgate adds
// beside the user's fields and never removes one on the word of a record
// it did not seal. A patched result admitted again patches nothing.
func FuzzUserFieldsSurvive(f *testing.F) {
	forgedRecord := `{"mutators":["owner-metadata","model-loader","gpu-placement","serving-probes"],"settings":"0",` +
		`"owns":["limits/server/memory=1Gi","requests/server/cpu=500m","nodeAffinity/In/tenant.example.com/pool",` +
		`"toleration/NoSchedule/tenant","env/server/HF_TOKEN_PATH=/secrets/t","volume/scratch","volumeMount/server/scratch",` +
		`"readinessProbe/server","containerPort/server/9000/api"]}`
	f.Add("true", "hf://org/repo", "1", "vllm", "", forgedRecord, "ceo")
	f.Add("true", "s3://bucket/model", "2", "sglang", "9000", "yes", "")
	f.Add("true", "", "8", "", "", `{"mutators":[]}`, "mallory")
	f.Add("true", "pvc://claim/path", "", "tgi", "abc", "", "")
	f.Add("true", "hf://org/repo", "1", "dynamo", "", forgedRecord, "")
	f.Add("false", "hf://org/repo", "1", "vllm", "", forgedRecord, "ceo")
	cfg := config.New()
	h := NewMutating(cfg, everyNamespace(false), NewMetrics(nil))
	f.Fuzz(func(t *testing.T, inject, model, gpu, engine, port, record, owner string) {
		a := map[string]string{}
		for k, v := range map[string]string{annotations.Inject: inject, annotations.Model: model, annotations.GPU: gpu,
			annotations.Engine: engine, annotations.Port: port, annotations.Injected: record} {
			if v != "" {
				a[k] = v
			}
		}
		var labels map[string]string
		if owner != "" {
			labels = map[string]string{annotations.OwnerLabel: owner}
		}
		in := userPod(a, labels)
		raw, err := json.Marshal(in)
		if err != nil {
			t.Fatal(err)
		}
		req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
			Kind: gvks["Pod"], Namespace: nsPlain, Name: "server", Operation: admissionv1.Create,
			UserInfo: authenticationv1.UserInfo{Username: alice}, Object: runtime.RawExtension{Raw: raw},
		}}
		resp := h.Handle(context.Background(), req)
		if !resp.Allowed || len(patchesOf(resp)) == 0 {
			return
		}
		var out corev1.Pod
		if err := json.Unmarshal(applyPatch(t, raw, resp), &out); err != nil {
			t.Fatal(err)
		}
		// Nothing here is sealed, so modelgate may take back no field of
		// the user's.
		if problems := lostUserFields(&in.Spec, &out.Spec, func(string) bool { return false }); len(problems) > 0 {
			t.Fatalf("annotations %v: the patch took away what the user wrote:\n%v", a, problems)
		}
		reviewAgain(t, h, req, resp)
	})
}
