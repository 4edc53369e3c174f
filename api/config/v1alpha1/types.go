// Package v1alpha1 is modelgate's runtime Configuration
// (config.modelgate.io/v1alpha1, kind Configuration): its types, the strict
// loader, the defaults (applied in one place, Default) and Validate.
package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/modelgate/modelgate/internal/seal"
)

// APIVersion and Kind identify a Configuration file.
const (
	Group      = "config.modelgate.io"
	Version    = "v1alpha1"
	APIVersion = Group + "/" + Version
	Kind       = "Configuration"
)

// Configuration is modelgate's runtime configuration. A Configuration is
// immutable once loaded: the webhook works from one snapshot of it.
type Configuration struct {
	metav1.TypeMeta `json:",inline"`

	// Namespace is the namespace modelgate runs in. It is never injected.
	// Defaults to the POD_NAMESPACE environment variable, else
	// "modelgate-system".
	Namespace string `json:"namespace,omitempty"`

	// Webhook is the admission webhook server.
	Webhook WebhookServer `json:"webhook,omitempty"`

	// Metrics is the Prometheus metrics endpoint.
	Metrics MetricsEndpoint `json:"metrics,omitempty"`

	// Health is the /healthz and /readyz endpoint.
	Health Endpoint `json:"health,omitempty"`

	// Injection tunes the mutating pipeline.
	Injection Injection `json:"injection,omitempty"`

	// Policy tunes the Rego policy engine behind the validating webhooks.
	Policy Policy `json:"policy,omitempty"`

	// Certificates says where the serving certificate comes from: files
	// (the default), cert-manager or self (docs/operations.md).
	Certificates Certificates `json:"certificates,omitempty"`

	// Controller is the AIInference controller.
	Controller Controller `json:"controller,omitempty"`

	// Audit is the periodic audit of running workloads.
	Audit Audit `json:"audit,omitempty"`

	// ShutdownGracePeriod is how long in-flight reviews may take to finish
	// once modelgate is asked to stop. Defaults to 30s.
	ShutdownGracePeriod *metav1.Duration `json:"shutdownGracePeriod,omitempty"`

	// DrainPeriod is how long modelgate goes on serving once it is asked to
	// stop, before it stops accepting connections and the shutdown grace
	// period starts: /readyz fails and every answer closes its connection,
	// so the API server moves to another replica without sending a review
	// to a connection as it is closed. It must cover the time the Service
	// takes to drop the terminating Pod from its endpoints. Defaults to
	// 10s; 0 stops at once.
	DrainPeriod *metav1.Duration `json:"drainPeriod,omitempty"`

	// RecordKey seals the reserved metadata modelgate writes (owner, team,
	// the injection record; see internal/seal). It is not part of the file:
	// the server loads the key its replicas share when it starts
	// (webhook.NewManager), and where it is nil (modelgate render, modelgate
	// test, unit tests) the handlers use the process's own key.
	RecordKey *seal.Key `json:"-"`
}

// WebhookServer configures the HTTPS server the API server calls.
type WebhookServer struct {
	// Port is the HTTPS port. Defaults to 9443.
	Port int32 `json:"port,omitempty"`
	// Host is the address to bind; empty binds every interface.
	Host string `json:"host,omitempty"`
	// CertDir holds the serving certificate and key; rotated files are
	// picked up without a restart. Defaults to
	// /tmp/k8s-webhook-server/serving-certs.
	CertDir string `json:"certDir,omitempty"`
	// CertName and KeyName are the file names in CertDir. Default tls.crt
	// and tls.key.
	CertName string `json:"certName,omitempty"`
	KeyName  string `json:"keyName,omitempty"`
	// TLSMinVersion is "1.2" (default) or "1.3".
	TLSMinVersion string `json:"tlsMinVersion,omitempty"`
	// EnableHTTP2 turns HTTP/2 on. It is off by default: HTTP/2 rapid-reset
	// and stream-multiplexing attacks (CVE-2023-44487, CVE-2023-39325) make
	// HTTP/1.1 the safer default for a server every API call may touch.
	EnableHTTP2 bool `json:"enableHTTP2,omitempty"`
	// ClientCAFile is the absolute path of a PEM CA bundle. Set, the
	// server requires every caller to present a client certificate, for
	// client authentication, that the bundle signed, and refuses any other
	// in the TLS handshake, before reading a byte of its request: only the
	// API server, given such a certificate in its admission configuration
	// (--admission-control-config-file), reaches the webhooks. The check
	// is per connection, so it covers every path of the port, /convert
	// included, which the API server calls without a client certificate
	// (kubernetes/kubernetes#131810): with it set, AIInferences can only be
	// read and written as v1, their stored version. The file is read again
	// when it changes. Empty (the default) authenticates no caller
	// (docs/operations.md, "Only the API server calls the webhooks").
	ClientCAFile string `json:"clientCAFile,omitempty"`
}

// Endpoint is a plain-HTTP listener.
type Endpoint struct {
	// BindAddress is host:port; "0" disables the endpoint.
	BindAddress string `json:"bindAddress,omitempty"`
}

// MetricsEndpoint is the Prometheus metrics endpoint.
type MetricsEndpoint struct {
	// BindAddress is host:port; "0" disables the endpoint. Defaults to
	// ":8443".
	BindAddress string `json:"bindAddress,omitempty"`
	// Secure serves the metrics over HTTPS, only to callers whose bearer
	// token the API server authenticates (TokenReview), or whose client
	// certificate ClientCAFile's CA signed, and who may get the
	// non-resource URL /metrics (SubjectAccessReview): the
	// modelgate-metrics-reader ClusterRole. false serves plain HTTP to
	// whoever reaches the port. Defaults to true.
	Secure *bool `json:"secure,omitempty"`
	// ClientCAFile is the absolute path of a PEM CA bundle: a caller whose
	// client certificate it signed is the user of the certificate's common
	// name, in the groups of its organizations, and gets the metrics if
	// that user may get /metrics, as a caller with a bearer token does.
	// The file is read again when it changes. Only with Secure. Empty (the
	// default) accepts bearer tokens alone.
	ClientCAFile string `json:"clientCAFile,omitempty"`
}

// Injection tunes which requests the mutating pipeline acts on.
type Injection struct {
	// ExcludedNamespaces are never injected, whatever their labels or the
	// objects' annotations say. modelgate's own namespace is always
	// excluded. Defaults to kube-system, kube-public and kube-node-lease.
	ExcludedNamespaces []string `json:"excludedNamespaces,omitempty"`

	// TrustedRequesters are the controllers that create objects from
	// templates; owner metadata they carry over from a template is kept.
	// Defaults to the kube-controller-manager's identities.
	TrustedRequesters *TrustedRequesters `json:"trustedRequesters,omitempty"`

	// NamespaceCacheWait is how long a review waits for a namespace that is
	// not yet in modelgate's cache (one created a moment ago). Defaults to
	// 2s; it must stay well under the webhook timeout.
	NamespaceCacheWait *metav1.Duration `json:"namespaceCacheWait,omitempty"`

	// Loader is the model-loader init container.
	Loader Loader `json:"loader,omitempty"`

	// ImageVolumes are the models mounted as image volumes (Kubernetes
	// 1.33+): the kubelet pulls the image once per node and mounts it
	// read-only, and no loader runs (docs/injection.md, "Models as image
	// volumes").
	ImageVolumes ImageVolumes `json:"imageVolumes,omitempty"`

	// GPU names the GPU vendor's resource, node labels and taint. Defaults
	// are NVIDIA's; another vendor is a configuration change.
	GPU GPU `json:"gpu,omitempty"`

	// Probes are the serving probe presets.
	Probes Probes `json:"probes,omitempty"`

	// Profiles are named sets of platform defaults for modelgate.io/
	// annotations, picked with modelgate.io/profile; the object's own
	// annotations override them. Keys are annotation names (for example
	// modelgate.io/gpu), values are annotation values.
	Profiles map[string]map[string]string `json:"profiles,omitempty"`
}

// Loader configures the model-loader init container.
type Loader struct {
	// Image and Command run the loader. Default: modelgate's own image of
	// this release, ghcr.io/modelgate/modelgate:<version> (a build that is
	// not a release: :latest; see DefaultLoaderImage), running
	// "/modelgate load".
	Image   string   `json:"image,omitempty"`
	Command []string `json:"command,omitempty"`
	// Args, Command's arguments, is a template: "{{uri}}" becomes the model
	// URI and "{{dest}}" the directory the loader fills (the model mount
	// path, or the directory in the pod's own volume for model-cache
	// volume:<name>).
	// Unset, modelgate passes --uri=<model> --dest=<mount path>, as
	// `modelgate load` reads them.
	Args []string `json:"args,omitempty"`
	// SecurityContext is the loader container's. Defaults to the restricted
	// profile modelgate's loader runs under (non-root, read-only root
	// filesystem, no privilege escalation, every capability dropped,
	// RuntimeDefault seccomp); {} sets none.
	SecurityContext *corev1.SecurityContext `json:"securityContext,omitempty"`
	// Schemes replaces the loader per model URI scheme (s3, gs, hf, https,
	// oci). Each is a whole loader: it takes nothing from the fields above.
	Schemes map[string]LoaderImage `json:"schemes,omitempty"`
	// PullPolicy is the loader's image pull policy. Defaults to IfNotPresent.
	PullPolicy corev1.PullPolicy `json:"pullPolicy,omitempty"`
	// Resources are the loader's requests and limits.
	Resources *corev1.ResourceRequirements `json:"resources,omitempty"`
	// ImageVolumes mounts oci:// models as image volumes instead of running
	// the loader; needs Kubernetes 1.33+ with the ImageVolume feature.
	ImageVolumes bool `json:"imageVolumes,omitempty"`
	// Env is the environment every injected loader gets, set once for the
	// cluster: where models come from (HF_ENDPOINT, AWS_ENDPOINT_URL_S3,
	// AWS_REGION, a proxy), not who may read them. The values are written
	// into every Pod spec, so credentials are refused here: they stay in
	// the Secret modelgate.io/model-credentials names, whose keys reach the
	// loader as envFrom. Each is a default: written as MODELGATE_DEFAULT_
	// + name, which `modelgate load` applies only where the Pod sets no
	// such variable, so a key of that Secret, or one mapped by
	// modelgate.io/model-credentials-keys, wins. A scheme's loader
	// (Schemes) does not get it.
	Env []EnvVar `json:"env,omitempty"`
}

// ImageVolumes says which models are mounted as image volumes.
type ImageVolumes struct {
	// Repositories are patterns of oci:// model repositories
	// (registry/path, path.Match syntax: registry.example.com/models/*)
	// whose models are mounted as image volumes unless the object's
	// modelgate.io/model-mount says loader. A repository must hold
	// image-format artifacts that containerd can mount; ModelPack
	// artifacts cannot be (containerd#11381), and stay with the loader.
	Repositories []string `json:"repositories,omitempty"`
	// HubMirror is the registry and path prefix `modelgate pack` pushes
	// Hugging Face models to (registry.example.com/hf): an hf://org/name@rev
	// model with modelgate.io/model-mount: image-volume mounts the image
	// <hubMirror>/<org>/<name>:<rev> (lower case; rev main when none),
	// laid out as the loader lays out the Hub's cache. Empty: hf:// models
	// are always loaded.
	HubMirror string `json:"hubMirror,omitempty"`
}

// LoaderImage is a loader for one scheme: its image, command, args
// template and security context, as in Loader. Without a command the
// image's entrypoint runs; without args, modelgate passes --uri=<model>
// --dest=<mount path>; without a security context, the loader gets the
// restricted default (not Loader.SecurityContext).
type LoaderImage struct {
	Image           string                  `json:"image"`
	Command         []string                `json:"command,omitempty"`
	Args            []string                `json:"args,omitempty"`
	SecurityContext *corev1.SecurityContext `json:"securityContext,omitempty"`
}

// GPU names a GPU vendor's resource, node labels and taint.
type GPU struct {
	// ResourceName is the extended resource. Defaults to nvidia.com/gpu.
	ResourceName string `json:"resourceName,omitempty"`
	// ProductLabel is the node label holding the GPU product. Defaults to
	// nvidia.com/gpu.product (NVIDIA GPU Feature Discovery).
	ProductLabel string `json:"productLabel,omitempty"`
	// MemoryLabel is the node label holding memory per GPU in MiB. Defaults
	// to nvidia.com/gpu.memory.
	MemoryLabel string `json:"memoryLabel,omitempty"`
	// TaintKey is the taint GPU nodes carry. Defaults to nvidia.com/gpu.
	TaintKey string `json:"taintKey,omitempty"`
	// Allocation is how opted-in Pods get their GPUs when the object (or
	// its profile) sets no modelgate.io/gpu-allocation: "device-plugin"
	// (the default: ResourceName's limit, node affinity on the product and
	// memory labels, the taint's toleration) or "dra" (a resource claim;
	// see DRA and docs/injection.md, "GPUs through DRA").
	Allocation string `json:"allocation,omitempty"`
	// DRA names the DRA driver's device class, attributes and products.
	DRA GPUDRA `json:"dra,omitempty"`
}

// GPUDRA names what the ResourceClaimTemplates modelgate makes select on.
// Defaults are NVIDIA's DRA driver's (k8s-dra-driver-gpu).
type GPUDRA struct {
	// Driver is the driver's name, the domain of its device attributes and
	// capacities. Defaults to gpu.nvidia.com.
	Driver string `json:"driver,omitempty"`
	// DeviceClassName is the DeviceClass the claims ask from. Defaults to
	// gpu.nvidia.com.
	DeviceClassName string `json:"deviceClassName,omitempty"`
	// ProductAttribute is the device attribute that names the product.
	// Defaults to productName.
	ProductAttribute string `json:"productAttribute,omitempty"`
	// MemoryCapacity is the device capacity holding memory per GPU.
	// Defaults to memory.
	MemoryCapacity string `json:"memoryCapacity,omitempty"`
	// Products maps modelgate.io/gpu-product's values (GPU Feature
	// Discovery's node label values) to the product attribute's values.
	// Set, it replaces the default table, NVIDIA's data-centre GPUs
	// (internal/gpuclaim.DefaultProducts); a product it does not map is
	// refused when a Pod asks for it through DRA.
	Products map[string]string `json:"products,omitempty"`
	// GPUDeviceClasses are the device classes whose devices the policy
	// view counts as GPUs (input.workload.gpu.count), as it counts the
	// device plugin's resource and MIG instances. Defaults to
	// [gpu.nvidia.com, mig.nvidia.com]; DeviceClassName is always one.
	GPUDeviceClasses []string `json:"gpuDeviceClasses,omitempty"`
}

// Probes configures the serving probes.
type Probes struct {
	// PeriodSeconds is the readiness and startup probes' period. Defaults
	// to 5.
	PeriodSeconds int32 `json:"periodSeconds,omitempty"`
	// Presets override or add engine presets (port and readiness path),
	// keyed by engine name: vllm, sglang, tgi, triton, dynamo.
	Presets map[string]ProbePreset `json:"presets,omitempty"`
}

// ProbePreset is an engine's serving port and readiness path.
type ProbePreset struct {
	Port int32  `json:"port"`
	Path string `json:"path"`
}

// TrustedRequesters matches the identities of template-copying controllers.
type TrustedRequesters struct {
	// Usernames match exactly.
	Usernames []string `json:"usernames,omitempty"`
	// UsernamePrefixes match the start of the user name.
	UsernamePrefixes []string `json:"usernamePrefixes,omitempty"`
	// Groups match any of the requester's groups.
	Groups []string `json:"groups,omitempty"`
}

// Policy tunes the Rego policy engine.
type Policy struct {
	// EvaluationTimeout bounds the evaluation of every policy for one
	// review; a policy still running at the deadline fails and its
	// failurePolicy decides. Defaults to 2s; it must stay under the 5s
	// webhook timeout.
	EvaluationTimeout *metav1.Duration `json:"evaluationTimeout,omitempty"`
	// Directory holds policies as .rego files, each with an optional
	// <name>.yaml of settings beside it (enforcementAction, failurePolicy,
	// match, parameters), reloaded when the files change: a mounted
	// ConfigMap, or a GitOps checkout. Empty loads none. The --policy-dir
	// flag overrides it.
	Directory string `json:"directory,omitempty"`
	// Exceptions bounds WorkloadPolicyExceptions.
	Exceptions Exceptions `json:"exceptions,omitempty"`
	// DecisionCache answers a validating review that is the same as an
	// earlier one in everything the policies in force can read with the
	// earlier decision, without evaluating (docs/performance.md, "The
	// decision cache").
	DecisionCache DecisionCache `json:"decisionCache,omitempty"`
	// Backstop puts the ValidatingAdmissionPolicies made of the
	// WorkloadPolicies' CEL forms in force: their bindings are applied, so
	// the API server enforces those forms itself, also while modelgate is
	// down (docs/policies.md, "Writing the CEL form"). Without it the
	// policies are applied unbound, for the API server to type-check.
	// Defaults to false.
	Backstop *bool `json:"backstop,omitempty"`
}

// DecisionCache sizes the validating webhook's cache of policy decisions.
type DecisionCache struct {
	// MaxBytes bounds the cache's estimated size in memory; the least
	// recently used decisions go first. "0" turns the cache off. Defaults
	// to 32Mi (the decisions of about 8,800 distinct workloads under the
	// library's 8 policies: 1.9 KB each, counted under each of the two keys
	// a decision is found by); at most 1Gi.
	MaxBytes *resource.Quantity `json:"maxBytes,omitempty"`
}

// Exceptions bounds WorkloadPolicyExceptions (docs/policies.md,
// "Exceptions").
type Exceptions struct {
	// MaxDuration is how far ahead an exception's expiresAt may be when
	// it is created or its expiresAt changed. Defaults to 2160h (90
	// days); between 1h and 8760h (a year).
	MaxDuration *metav1.Duration `json:"maxDuration,omitempty"`
	// ClockSkew is how far apart the clocks of modelgate's replicas, the
	// API server and the machines running the CLI may be: an exception
	// stops applying ClockSkew before its expiresAt by the local clock, so
	// that no replica whose clock is behind by up to ClockSkew applies it
	// after it expired. Defaults to 1m; between 0s and 10m.
	ClockSkew *metav1.Duration `json:"clockSkew,omitempty"`
}

// Audit configures the periodic audit: one replica (the leader, see
// Controller.LeaderElection) judges every workload of the cluster with the
// policies and Configuration in force and writes the results as
// wgpolicyk8s.io/v1alpha2 PolicyReports, one per namespace, in metrics and
// in each WorkloadPolicy's status.audit (docs/policies.md, "Audit").
type Audit struct {
	// Enabled runs the audit. Defaults to true.
	Enabled *bool `json:"enabled,omitempty"`
	// Interval is the time from the start of one pass to the start of the
	// next. Defaults to 10m; at least 1m.
	Interval *metav1.Duration `json:"interval,omitempty"`
	// ObjectsPerSecond bounds how fast a pass judges workloads (and so the
	// CPU it takes from the webhooks on the leader). Defaults to 50.
	ObjectsPerSecond int32 `json:"objectsPerSecond,omitempty"`
	// MaxResultsPerReport bounds the results of one PolicyReport, failures
	// first; the summary counts all. Defaults to 500, at most 5000.
	MaxResultsPerReport int32 `json:"maxResultsPerReport,omitempty"`
	// Reports are the kinds of report written, one of each per namespace,
	// with the same results: "wgpolicyk8s" (wgpolicyk8s.io/v1alpha2
	// PolicyReport) and "openreports" (openreports.io/v1alpha1 Report).
	// Defaults to [wgpolicyk8s]. A kind whose CRD is not installed is
	// skipped with a log line.
	Reports []string `json:"reports,omitempty"`
}

// The kinds of report the audit can write (Audit.Reports).
const (
	ReportsWGPolicy    = "wgpolicyk8s"
	ReportsOpenReports = "openreports"
)

// Controller configures the AIInference controller, which turns each
// AIInference into a Deployment and a Service that the mutating webhook
// then decorates like any opted-in Deployment.
type Controller struct {
	// Enabled runs the controller. Defaults to true; false serves the
	// webhooks alone: AIInferences are still defaulted, validated and
	// converted, but nothing creates their Pods or writes their status.
	Enabled *bool `json:"enabled,omitempty"`
	// LeaderElection makes one replica at a time reconcile (a Lease in
	// modelgate's namespace), while every replica serves the webhooks.
	// Defaults to true; turn it off only where one replica runs.
	LeaderElection *bool `json:"leaderElection,omitempty"`
	// ServiceAccountName is the service account modelgate runs as, in
	// Namespace. The webhook trusts it as it trusts the controllers that
	// copy templates: the owner and team modelgate sealed on an
	// AIInference pass onto the Deployment the controller writes, instead
	// of the controller's own name. Defaults to modelgate.
	ServiceAccountName string `json:"serviceAccountName,omitempty"`
	// Engines replace the built-in engine presets (docs/api/aiinference.md),
	// keyed by spec.engine.name: vllm, sglang, tgi, triton or custom.
	Engines map[string]EnginePreset `json:"engines,omitempty"`
}

// EnginePreset is how the controller starts an engine whose AIInference
// sets no image of its own. In command and args, {{model}} becomes what
// the engine loads (the Hugging Face repository id for hf:// models, read
// from the cache the loader fills; otherwise the directory the model is
// mounted at) and {{port}} the serving port. A preset replaces the
// built-in one of its name as a whole.
type EnginePreset struct {
	Image   string   `json:"image"`
	Command []string `json:"command,omitempty"`
	Args    []string `json:"args,omitempty"`
	// Env comes before the AIInference's spec.engine.env, which wins for a
	// variable both set.
	Env []EnvVar `json:"env,omitempty"`
}

// EnvVar is an environment variable with a literal value.
type EnvVar struct {
	Name  string `json:"name"`
	Value string `json:"value,omitempty"`
}
