package certmanager_test

import (
	"context"
	"errors"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/modelgate/modelgate/api/annotations"
)

// createPod, the steady load's admission (env.StartLoad), creates an
// opted-in Pod through the API server (a server-side dry run: every
// admission webhook is called, nothing is stored) and checks that
// modelgate's mutating webhook injected it.
func createPod(ctx context.Context, c client.Client) error {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceDefault, GenerateName: "load-", Annotations: map[string]string{
			annotations.Inject: "true",
			annotations.Model:  "hf://meta-llama/Llama-3.1-8B-Instruct@0e9e39f249a16976918f6564b8830bc894c89659",
			annotations.Engine: "vllm",
		}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "server", Image: "vllm/vllm-openai:v0.9.1"}}},
	}
	if err := c.Create(ctx, pod, client.DryRunAll); err != nil {
		return err
	}
	if _, ok := pod.Annotations[annotations.Injected]; !ok {
		return errors.New("the Pod came back without modelgate's injection")
	}
	return nil
}
