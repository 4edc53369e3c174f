// Package workload builds the normalized view of an admitted workload that
// Rego policies see as input.workload: one shape for Pods, Deployments,
// StatefulSets, Jobs and CronJobs, and for the ResourceClaims and
// ResourceClaimTemplates their GPUs may come from, with every key always
// present.
//
// Build turns the decoded pieces into a View; View.Value turns the View
// into OPA's value form directly, without the JSON round trip (encode, then
// decode into interface{}, then convert) that ast.InterfaceToValue needs.
// The View's JSON tags are the contract; a test proves the two forms agree.
package workload

import (
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/modelgate/modelgate/api/annotations"
	"github.com/modelgate/modelgate/internal/gpuclaim"
)

// Source is what a View is built from: the pieces the webhook (or the
// offline render command) decoded from one admission request.
type Source struct {
	// Kind and APIVersion are the object's, for example Deployment and
	// apps/v1.
	Kind, APIVersion string
	// Operation is the admission operation, CREATE or UPDATE.
	Operation string
	// Object is the object's own metadata; nil reads as empty.
	Object *metav1.ObjectMeta
	// PodMeta is the pod template's metadata, or the Pod's own (then equal
	// to Object); nil means Object.
	PodMeta *metav1.ObjectMeta
	// PodSpec is the pod (template) spec; nil reads as empty.
	PodSpec *corev1.PodSpec
	// Claim is, for a ResourceClaim or a ResourceClaimTemplate, the claim spec it asks for (a template's spec.spec): the view's
	// devices are its requests, named after the object, and its GPU count
	// theirs. nil for a workload.
	Claim *resourcev1.ResourceClaimSpec
	// Settings are the object's parsed modelgate.io/* annotations; a zero
	// or partial value is fine.
	Settings annotations.Settings
	// ServingContainer names the container that serves the model, "" when
	// none.
	ServingContainer string
	// UserInfo is the requester.
	UserInfo authenticationv1.UserInfo
	// NamespaceLabels are the labels of the object's namespace.
	NamespaceLabels map[string]string
	// GPU names the GPU resource and node labels, from the Configuration.
	GPU GPUKeys
	// Claims finds what the pod's resource claims ask for; nil knows none
	// but the template modelgate's own GPU settings stand for.
	Claims ClaimResolver
	// Sealed reports that modelgate sealed the object's reserved metadata
	// (internal/seal): only then do its owner, team and injection record
	// reach the view, so a hand-written one reads as absent.
	Sealed bool
	// Reads, when set, reports the top-level keys the view will be read
	// by (ValueOf and AppendKey with the same function): a key it leaves
	// out may be left zero. nil builds every key.
	Reads func(key string) bool
}

// GPUKeys are the GPU vendor's names, from the Configuration. NVIDIA's are
// nvidia.com/gpu, nvidia.com/gpu.product and nvidia.com/gpu.memory. An empty
// name reads nothing: no GPUs counted, or no affinity label looked at.
type GPUKeys struct {
	// ResourceName is the extended resource containers ask GPUs with.
	ResourceName corev1.ResourceName
	// ProductLabel is the node label holding the GPU product.
	ProductLabel string
	// MemoryLabel is the node label holding memory per GPU in MiB.
	MemoryLabel string
	// DRA names the driver's device class, attributes and products: the
	// template modelgate's GPU settings stand for is known without a
	// lookup.
	DRA gpuclaim.Options
	// GPUDeviceClasses are the device classes whose devices count as GPUs.
	GPUDeviceClasses []string
}

// View is input.workload. Its JSON tags are the policy input contract; Build
// fills every field (no nil maps or slices; Model is nil when no model is
// named). A View shares maps and slices with its Source: treat both as
// read-only.
type View struct {
	Kind       string `json:"kind"`
	APIVersion string `json:"apiVersion"`
	Name       string `json:"name"`
	Namespace  string `json:"namespace"`
	// Operation is CREATE or UPDATE.
	Operation string `json:"operation"`
	// Labels and Annotations are the object's own metadata.
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
	// PodLabels and PodAnnotations are the pod template's metadata (for a
	// Pod, the same as Labels and Annotations).
	PodLabels      map[string]string `json:"podLabels"`
	PodAnnotations map[string]string `json:"podAnnotations"`
	// UserInfo is the requester.
	UserInfo UserInfo `json:"userInfo"`
	// NamespaceLabels are the labels of the object's namespace.
	NamespaceLabels map[string]string `json:"namespaceLabels"`
	// Owner and Team are the object's modelgate.io/owner and
	// modelgate.io/team labels, "" when absent or not sealed by modelgate.
	Owner string `json:"owner"`
	Team  string `json:"team"`
	// Injected reports that the object carries an injection record
	// modelgate sealed.
	Injected bool `json:"injected"`
	// ServingContainer names the container that serves the model, "" when
	// none.
	ServingContainer string `json:"servingContainer"`
	HostNetwork      bool   `json:"hostNetwork"`
	HostPID          bool   `json:"hostPID"`
	HostIPC          bool   `json:"hostIPC"`
	// Containers and InitContainers are in spec order.
	Containers     []Container `json:"containers"`
	InitContainers []Container `json:"initContainers"`
	// EphemeralContainers are the containers kubectl debug added, in spec
	// order; they hold no resources (gpus is 0, resources empty).
	EphemeralContainers []Container `json:"ephemeralContainers"`
	GPU                 GPU         `json:"gpu"`
	// Model is nil (null) when the object names no valid model.
	Model *Model `json:"model"`
	// Engine is the modelgate.io/engine, "" when none.
	Engine string `json:"engine"`
	// Serving reports Engine != "".
	Serving bool `json:"serving"`
}

// UserInfo is the requester, without the authenticator's extra fields.
type UserInfo struct {
	Username string   `json:"username"`
	Groups   []string `json:"groups"`
	UID      string   `json:"uid"`
}

// Container is one container or init container.
type Container struct {
	Name  string `json:"name"`
	Image string `json:"image"`
	// GPUs is the GPU devices the container holds: the GPU resource's
	// limit, else its request, plus every NVIDIA MIG instance
	// (nvidia.com/mig-*), plus the GPU devices (ExactCount) of the resource
	// claims it uses; 0 when none.
	GPUs int64 `json:"gpus"`
	// Claims are the names of the pod's resource claims (dynamic resource
	// allocation) the container uses, in spec order; gpu.devices says what
	// each asks for.
	Claims    []string  `json:"claims"`
	Resources Resources `json:"resources"`
	// SecurityContext is the container's, in Kubernetes' JSON form; the
	// zero value ({}) when unset.
	SecurityContext corev1.SecurityContext `json:"securityContext"`
	// Privileged reports securityContext.privileged == true.
	Privileged bool `json:"privileged"`
	// Ports are the container ports, in spec order.
	Ports []int32 `json:"ports"`
	// ReadinessProbe, StartupProbe and LivenessProbe report whether each
	// probe is set.
	ReadinessProbe bool `json:"readinessProbe"`
	StartupProbe   bool `json:"startupProbe"`
	LivenessProbe  bool `json:"livenessProbe"`
}

// Resources are a container's limits and requests, quantities in their
// canonical string form ("64Gi", "500m").
type Resources struct {
	Limits   map[string]string `json:"limits"`
	Requests map[string]string `json:"requests"`
}

// GPU is the pod's GPU ask and placement.
type GPU struct {
	// Resource is the GPU resource name from the Configuration.
	Resource string `json:"resource"`
	// Count is the GPUs the pod holds: the Kubernetes effective request
	// (the sum over containers, at least any single init container's).
	Count int64 `json:"count"`
	// Products are the acceptable GPU products: modelgate.io/gpu-product's
	// in its order, else those the required node affinity admits, sorted;
	// empty when unconstrained.
	Products []string `json:"products"`
	// MemoryMiB is the minimum memory per GPU; 0 when unconstrained.
	MemoryMiB int64 `json:"memoryMiB"`
	// Claims are the names of the pod's resource claims
	// (spec.resourceClaims, dynamic resource allocation), in spec order.
	Claims []string `json:"claims"`
	// Devices are the device requests of those claims, in spec order:
	// GPUs (counted in Count, as the containers that use the claim hold
	// them) and other drivers' devices.
	Devices []Device `json:"devices"`
	// UnresolvedClaims are the claims whose template or ResourceClaim
	// modelgate could not find, so what they ask for is unknown.
	UnresolvedClaims []string `json:"unresolvedClaims"`
}

// Model is the parsed modelgate.io/model URI. It never holds credentials.
type Model struct {
	URI    string `json:"uri"`
	Scheme string `json:"scheme"`
	// Bucket is the s3/gs bucket.
	Bucket string `json:"bucket"`
	// Host is the https host[:port] or the oci registry[:port].
	Host string `json:"host"`
	// Path is the s3/gs prefix, https path, hf "org/repo", oci repository
	// or pvc sub path.
	Path string `json:"path"`
	// Org is the hf organization (the first path segment).
	Org string `json:"org"`
	// Claim is the pvc claim.
	Claim string `json:"claim"`
	// Revision is the hf revision after '@'.
	Revision string `json:"revision"`
	// Tag and Digest are the oci tag or sha256 digest.
	Tag    string `json:"tag"`
	Digest string `json:"digest"`
	// Pinned reports an hf commit revision or an oci digest.
	Pinned bool `json:"pinned"`
}
