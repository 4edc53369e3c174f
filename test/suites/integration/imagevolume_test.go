package integration_test

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/modelgate/modelgate/api/annotations"
	"github.com/modelgate/modelgate/test/harnesses/builders"
)

// Issue 31, item 3: models as image volumes, through the API server.
var _ = Describe("Models as image volumes", func() {
	const digest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	ctx := context.Background()
	pod := func(ns, name, model, mount string) *corev1.Pod {
		return builders.New("Pod", builders.Options{Namespace: ns, Name: name, Annotations: map[string]string{
			annotations.Inject: "true", annotations.Model: model, annotations.ModelMount: mount, annotations.ModelSize: "20Gi",
		}}).(*corev1.Pod)
	}

	It("mounts an oci:// model as an image volume with no loader and no ephemeral storage", func() {
		ns := namespace(ctx, nil)
		p := pod(ns, "imagevol", "oci://registry.example.com/models/llama@"+digest, "image-volume:/mnt/llama")
		Expect(admin.Create(ctx, p)).To(Succeed())
		Expect(p.Spec.InitContainers).To(BeEmpty())
		Expect(p.Spec.Volumes).To(ContainElement(corev1.Volume{Name: "model-store", VolumeSource: corev1.VolumeSource{
			Image: &corev1.ImageVolumeSource{Reference: "registry.example.com/models/llama@" + digest, PullPolicy: corev1.PullIfNotPresent}}}))
		c := p.Spec.Containers[0]
		Expect(c.VolumeMounts).To(ContainElement(corev1.VolumeMount{Name: "model-store", MountPath: "/mnt/llama", ReadOnly: true}))
		Expect(c.Resources.Requests).NotTo(HaveKey(corev1.ResourceEphemeralStorage))
	})

	It("refuses image-volume where no image can be had, naming the annotation, the value and what is accepted", func() {
		ns := namespace(ctx, nil)
		for model, want := range map[string]string{
			"s3://bucket/llama":            `"image-volume" mounts an OCI image: it needs an oci:// model, or an hf:// model packed into the Configuration's injection.imageVolumes.hubMirror; modelgate.io/model is s3://`,
			"hf://meta-llama/Llama-3.1-8B": "injection.imageVolumes.hubMirror, which is not set",
		} {
			err := admin.Create(ctx, pod(ns, "refused", model, "image-volume"))
			Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%s: %v", model, err)
			Expect(err.Error()).To(And(ContainSubstring(`metadata.annotations[modelgate.io/model-mount]: Invalid value: "image-volume"`), ContainSubstring(want)), model)
		}
	})
})
