package annotations

import (
	"k8s.io/apimachinery/pkg/api/resource"
)

// Scheme is a model URI's scheme.
type Scheme string

// The supported model URI schemes.
const (
	SchemeS3    Scheme = "s3"
	SchemeGS    Scheme = "gs"
	SchemeHF    Scheme = "hf"
	SchemePVC   Scheme = "pvc"
	SchemeHTTPS Scheme = "https"
	SchemeOCI   Scheme = "oci"
)

// Schemes lists the supported schemes, in the order messages show them.
var Schemes = []Scheme{SchemeS3, SchemeGS, SchemeHF, SchemePVC, SchemeHTTPS, SchemeOCI}

// ModelURI is a parsed modelgate.io/model value.
type ModelURI struct {
	// Raw is the URI as written.
	Raw    string `json:"raw"`
	Scheme Scheme `json:"scheme"`
	// Host is the s3/gs bucket, the https host[:port], or the oci
	// registry[:port]; empty for hf and pvc.
	Host string `json:"host,omitempty"`
	// Path is the s3/gs object prefix, the https path, the hf "org/repo",
	// the oci repository, or the pvc sub path; never with a leading slash.
	Path string `json:"path,omitempty"`
	// Claim is the pvc claim name.
	Claim string `json:"claim,omitempty"`
	// Revision is the hf revision after '@' (branch, tag or commit).
	Revision string `json:"revision,omitempty"`
	// Tag and Digest are the oci reference's tag or sha256 digest.
	Tag    string `json:"tag,omitempty"`
	Digest string `json:"digest,omitempty"`
	// SHA256 is the expected SHA-256 of an https file (64 lower-case hex
	// digits), from a "#sha256=<hex>" fragment; empty when none.
	SHA256 string `json:"sha256,omitempty"`
}

// Pinned reports whether the URI names immutable content: an hf commit
// hash (40 hex digits) or an oci digest.
func (u ModelURI) Pinned() bool {
	switch u.Scheme {
	case SchemeHF:
		return isCommitHash(u.Revision)
	case SchemeOCI:
		return u.Digest != ""
	default:
		return false
	}
}

// CacheMedium is where a fetched model is kept.
type CacheMedium string

// The cache media of modelgate.io/model-cache.
const (
	CacheDisk   CacheMedium = "disk"
	CacheMemory CacheMedium = "memory"
	CachePVC    CacheMedium = "pvc"
	// CacheVolume is a volume of the pod's own that the serving container
	// already mounts (its model cache): the loader fills it, and no second
	// copy is made.
	CacheVolume CacheMedium = "volume"
)

// Cache is a parsed modelgate.io/model-cache value.
type Cache struct {
	Medium CacheMedium `json:"medium"`
	// Claim is the shared cache claim for CachePVC.
	Claim string `json:"claim,omitempty"`
	// Volume is the pod's volume for CacheVolume.
	Volume string `json:"volume,omitempty"`
}

// DefaultModelMount is where serving containers see the model by default.
const DefaultModelMount = "/models"

// ModelSettings is the model to load and how.
type ModelSettings struct {
	URI       ModelURI `json:"uri"`
	MountPath string   `json:"mountPath"`
	// Cache defaults to disk; a pvc:// model is mounted directly and
	// ignores it.
	Cache Cache `json:"cache"`
	// Size is nil when not given.
	Size *resource.Quantity `json:"size,omitempty"`
	// Credentials is a Secret name, empty for none.
	Credentials string `json:"credentials,omitempty"`
	// CredentialKeys map keys of the Credentials Secret to loader
	// variables, in the order written; empty without
	// modelgate.io/model-credentials-keys.
	CredentialKeys []CredentialKey `json:"credentialKeys,omitempty"`
	// Delivery is how the model reaches the pod, as modelgate.io/model-mount
	// says; empty leaves it to the Configuration.
	Delivery Delivery `json:"delivery,omitempty"`
}

// Delivery is how a model reaches the pod (modelgate.io/model-mount).
type Delivery string

// The deliveries.
const (
	// DeliveryImageVolume mounts an OCI image as a volume (Kubernetes'
	// image volumes): the kubelet pulls it once per node, no loader runs.
	DeliveryImageVolume Delivery = "image-volume"
	// DeliveryLoader runs modelgate's loader even where the Configuration
	// would mount the model as an image volume.
	DeliveryLoader Delivery = "loader"
	// DeliveryEngine leaves the model to the engine, which reads it from
	// its source itself (vLLM's --load-format runai_streamer on an s3://
	// model, say): modelgate adds no loader, volume or mount, and the
	// model is still the workload's for policies and warnings.
	DeliveryEngine Delivery = "engine"
)

// CredentialKey is one VAR=key pair of modelgate.io/model-credentials-keys:
// the loader's variable Env takes the value of the Secret's key Key.
type CredentialKey struct {
	Env string `json:"env"`
	Key string `json:"key"`
}

// GPUSettings is the GPU placement asked for. The zero value asks for
// nothing.
type GPUSettings struct {
	Count        int64    `json:"count,omitempty"`
	Products     []string `json:"products,omitempty"`
	MinMemoryMiB int64    `json:"minMemoryMiB,omitempty"`
	// Allocation is modelgate.io/gpu-allocation; empty leaves it to the
	// Configuration.
	Allocation Allocation `json:"allocation,omitempty"`
}

// Allocation is how a pod gets its GPUs (modelgate.io/gpu-allocation).
type Allocation string

// The GPU allocations.
const (
	// AllocationDevicePlugin asks for the device plugin's extended
	// resource and places the pod by node affinity.
	AllocationDevicePlugin Allocation = "device-plugin"
	// AllocationDRA asks through a resource claim (dynamic resource
	// allocation, resource.k8s.io/v1).
	AllocationDRA Allocation = "dra"
)

// GPUAllocations lists the allocations, in the order messages show them.
var GPUAllocations = []Allocation{AllocationDevicePlugin, AllocationDRA}

// EngineName is a serving engine, which picks probe presets.
type EngineName string

// The supported engines.
const (
	EngineVLLM   EngineName = "vllm"
	EngineSGLang EngineName = "sglang"
	EngineTGI    EngineName = "tgi"
	EngineTriton EngineName = "triton"
	// EngineDynamo is NVIDIA Dynamo: its frontend (python -m
	// dynamo.frontend) and its workers (python -m dynamo.vllm, ...), told
	// apart by their command lines.
	EngineDynamo EngineName = "dynamo"
	EngineCustom EngineName = "custom"
)

// Engines lists the supported engines, in the order messages show them.
var Engines = []EngineName{EngineVLLM, EngineSGLang, EngineTGI, EngineTriton, EngineDynamo, EngineCustom}

// DefaultWarmupTimeoutSeconds is how long a model may take to load and warm
// up unless modelgate.io/warmup-timeout says otherwise.
const DefaultWarmupTimeoutSeconds = 300

// ServingSettings is how the model is served. The zero Engine means no
// serving probes (a training job).
type ServingSettings struct {
	Engine EngineName `json:"engine,omitempty"`
	// Port and HealthPath are zero to use the engine preset's.
	Port       int32  `json:"port,omitempty"`
	HealthPath string `json:"healthPath,omitempty"`
	// WarmupTimeoutSeconds is always set (defaulted).
	WarmupTimeoutSeconds int32 `json:"warmupTimeoutSeconds"`
}
