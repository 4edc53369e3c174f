// Package annotations is modelgate's annotation and label API: every key a
// user, a namespace or modelgate itself writes under modelgate.io/, and the
// parsers that turn their string values into typed settings.
//
// Values are parsed once, at the edge of the webhook; everything downstream
// works on the typed result. A bad value is an error that names the key, the
// value and what is accepted.
package annotations

// Prefix is the domain every modelgate key lives under.
const Prefix = "modelgate.io/"

// Keys that users put on workloads (Pods, Deployments, StatefulSets, Jobs,
// CronJobs), on the object's metadata or on its pod template's metadata.
const (
	// Inject opts an object in ("true") or out ("false"). On a workload it may
	// sit on the workload's metadata or on its pod template. "false" wins over
	// "true" and over a namespace-wide opt-in.
	Inject = Prefix + "inject"

	// Model is the model URI: s3://bucket/path, gs://bucket/path,
	// hf://org/repo[@revision], pvc://claim[/sub/path], https://host/path,
	// oci://registry/repo(:tag|@sha256:digest).
	Model = Prefix + "model"
	// ModelMount is where serving containers see the model (default
	// /models), mounted read-only; "image-volume" or "loader" (with an
	// optional ":<path>") picks how it gets there, and "engine" leaves the
	// model to the engine, which reads it from its source itself.
	ModelMount = Prefix + "model-mount"
	// ModelCache is "disk" (default), "memory", "pvc:<claim>" or
	// "volume:<name>". "memory" requires ModelSize: the model is a tmpfs
	// charged to the pod's memory. "volume:<name>" loads the model into a
	// volume of the pod's own that the serving container already mounts
	// (its cache on a PVC, say), at that mount's path, instead of a second
	// copy in a volume of modelgate's.
	ModelCache = Prefix + "model-cache"
	// ModelSize is a quantity (16Gi) sizing the cache volume and the
	// loader's ephemeral storage (disk) or memory (memory cache).
	ModelSize = Prefix + "model-size"
	// ModelCredentials names a Secret whose keys become the loader's
	// environment, and only the loader's.
	ModelCredentials = Prefix + "model-credentials"
	// ModelCredentialsKeys maps keys of the ModelCredentials Secret to the
	// variables the loader reads, as comma-separated VAR=key pairs
	// (HF_TOKEN=hf_api_token): each becomes an env entry of the loader
	// taking the key's value, besides the envFrom of the whole Secret. VAR
	// is one of LoaderCredentialVars. It requires ModelCredentials.
	ModelCredentialsKeys = Prefix + "model-credentials-keys"

	// GPU is the number of GPUs the target container gets (a positive
	// integer).
	GPU = Prefix + "gpu"
	// GPUProduct is a comma-separated list of acceptable GPU products (node
	// label values such as NVIDIA-H100-80GB-HBM3).
	GPUProduct = Prefix + "gpu-product"
	// GPUMemory is the minimum memory per GPU in MiB.
	GPUMemory = Prefix + "gpu-memory"
	// GPUAllocation is how the GPUs are allocated: "device-plugin" (the
	// extended resource, node affinity and the GPU taint's toleration) or
	// "dra" (a resource claim from a ResourceClaimTemplate whose CEL
	// selectors pick the product and memory). Unset, the Configuration's
	// injection.gpu.allocation decides.
	GPUAllocation = Prefix + "gpu-allocation"

	// Engine picks the serving probe preset: vllm, sglang, tgi, triton,
	// dynamo or custom.
	Engine = Prefix + "engine"
	// Port overrides the engine preset's serving port.
	Port = Prefix + "port"
	// HealthPath overrides the engine preset's readiness path.
	HealthPath = Prefix + "health-path"
	// WarmupTimeout is how many seconds the model may take to load and warm
	// up (default 300); the startup probe's budget covers it.
	WarmupTimeout = Prefix + "warmup-timeout"

	// Container names the container that serves the model, when it is
	// ambiguous.
	Container = Prefix + "container"
	// Profile names a profile from the Configuration: platform defaults for
	// any of the keys above, which the object's own annotations override.
	Profile = Prefix + "profile"
)

// SettingKeys are the annotations Parse reads into Settings (besides
// Inject), in the order errors are reported.
var SettingKeys = []string{
	Model, ModelMount, ModelCache, ModelSize, ModelCredentials, ModelCredentialsKeys,
	GPU, GPUProduct, GPUMemory, GPUAllocation,
	Engine, Port, HealthPath, WarmupTimeout,
	Container, Profile,
}

// Keys that modelgate writes. Users must not set them: on an opted-in object
// they are overwritten, and on any other object a hand-set value is rejected.
const (
	// Injected records what modelgate did to an object: the names of the
	// mutators that applied and a hash of the settings they used, as JSON.
	// modelgate trusts a record only where it can prove it wrote it: on the
	// old object of an UPDATE, or under a valid Seal.
	Injected = Prefix + "injected"

	// Seal is modelgate's signature (an HMAC under a key only its replicas
	// hold) over the namespace and the reserved metadata of the object or
	// template it sits on: the owner and team labels, OwnerFull and
	// Injected. A controller creating objects from a sealed template passes
	// the owner and the record on; anything unsealed is not trusted.
	Seal = Prefix + "seal"

	// OwnerLabel is the label holding the human (or service account) that
	// created the workload, as a valid label value.
	OwnerLabel = Prefix + "owner"

	// OwnerFull is the annotation holding the requester's full user name when
	// OwnerLabel had to be transformed to be a valid label value.
	OwnerFull = Prefix + "owner-full"

	// TeamLabel is the label holding the owning team, copied from the
	// namespace's TeamLabel label.
	TeamLabel = Prefix + "team"
)

// Keys that platform teams put on namespaces.
const (
	// NamespaceInjection set to InjectionEnabled opts every object in the
	// namespace in (objects can still opt out with Inject: "false").
	NamespaceInjection = Prefix + "injection"

	// NamespaceIgnore, with any value, makes modelgate ignore the namespace
	// entirely: the API server never calls modelgate for its objects.
	NamespaceIgnore = Prefix + "ignore"

	// NamespaceTeam is the namespace label whose value becomes the TeamLabel
	// of opted-in objects in that namespace.
	NamespaceTeam = TeamLabel
)

// InferenceLabel is on the children of an AIInference (its Deployment and
// Service, and the ReplicaSets and Pods of that Deployment), holding the
// AIInference's name: the Deployment's and the Service's selector, and
// what the AIInference controller's cache holds.
const InferenceLabel = "serving.modelgate.io/inference"

// InjectionEnabled is the NamespaceInjection value that opts a namespace in.
const InjectionEnabled = "enabled"

// ReservedLabels are the labels only modelgate may set on workloads.
var ReservedLabels = []string{OwnerLabel, TeamLabel}

// ReservedAnnotations are the annotations only modelgate may set on workloads.
var ReservedAnnotations = []string{OwnerFull, Injected, Seal}
