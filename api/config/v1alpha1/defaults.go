package v1alpha1

import (
	"os"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/modelgate/modelgate/api/annotations"
	"github.com/modelgate/modelgate/internal/gpuclaim"
	"github.com/modelgate/modelgate/internal/version"
)

// Default values, applied by Default.
const (
	DefaultNamespace           = "modelgate-system"
	DefaultWebhookPort         = 9443
	DefaultCertDir             = "/tmp/k8s-webhook-server/serving-certs"
	DefaultCertName            = "tls.crt"
	DefaultKeyName             = "tls.key"
	DefaultTLSMinVersion       = "1.2"
	DefaultMetricsBindAddress  = ":8443"
	DefaultHealthBindAddress   = ":8081"
	DefaultShutdownGracePeriod = 30 * time.Second
	DefaultDrainPeriod         = 10 * time.Second
	DefaultNamespaceCacheWait  = 2 * time.Second
	DefaultEvaluationTimeout   = 2 * time.Second
	DefaultServiceAccountName  = "modelgate"
)

// ImageRepository is where modelgate's own image is published; it is also
// the default loader's.
const ImageRepository = "ghcr.io/modelgate/modelgate"

// DevLoaderTag is the loader image tag of a build that is not a release:
// the newest release's image, since no published image carries the
// build's own loader.
const DevLoaderTag = "latest"

// DefaultLoaderImage is the loader image a build of modelgate with the
// version v defaults to: its own release's image, ImageRepository:<v>,
// whose `modelgate load` is the one this build's injection is written for.
// A build that is not a release (see version.IsRelease: "dev", or a git
// describe between tags or of a modified tree) gets ImageRepository:latest,
// the newest release, whose loader may differ from the build's; such
// builds should set injection.loader.image to an image built from the
// same tree.
func DefaultLoaderImage(v string) string {
	if version.IsRelease(v) {
		return ImageRepository + ":" + v
	}
	return ImageRepository + ":" + DevLoaderTag
}

// DefaultLoaderCommand runs modelgate's own loader.
var DefaultLoaderCommand = []string{"/modelgate", "load"}

// DefaultLoaderResources are the loader's requests and limits: enough to
// stream a model to disk, with no CPU limit (throttling only slows it).
func DefaultLoaderResources() *corev1.ResourceRequirements {
	return &corev1.ResourceRequirements{
		Requests: corev1.ResourceList{
			corev1.ResourceCPU:    resource.MustParse("500m"),
			corev1.ResourceMemory: resource.MustParse("512Mi"),
		},
		Limits: corev1.ResourceList{
			corev1.ResourceMemory: resource.MustParse("2Gi"),
		},
	}
}

// DefaultExcludedNamespaces are the control-plane namespaces never injected.
var DefaultExcludedNamespaces = []string{"kube-system", "kube-public", "kube-node-lease"}

// DefaultTrustedRequesters are the kube-controller-manager's identities: its
// own user when it runs with shared credentials, and the per-controller
// service accounts in kube-system when it runs with
// --use-service-account-credentials.
func DefaultTrustedRequesters() *TrustedRequesters {
	return &TrustedRequesters{
		Usernames:        []string{"system:kube-controller-manager"},
		UsernamePrefixes: []string{"system:serviceaccount:kube-system:"},
	}
}

// Default fills every unset field with its default. It is the one place
// defaults are applied; Load calls it.
func Default(c *Configuration) {
	if c.APIVersion == "" {
		c.APIVersion = APIVersion
	}
	if c.Kind == "" {
		c.Kind = Kind
	}
	if c.Namespace == "" {
		c.Namespace = os.Getenv("POD_NAMESPACE")
	}
	if c.Namespace == "" {
		c.Namespace = DefaultNamespace
	}
	w := &c.Webhook
	if w.Port == 0 {
		w.Port = DefaultWebhookPort
	}
	if w.CertDir == "" {
		w.CertDir = DefaultCertDir
	}
	if w.CertName == "" {
		w.CertName = DefaultCertName
	}
	if w.KeyName == "" {
		w.KeyName = DefaultKeyName
	}
	if w.TLSMinVersion == "" {
		w.TLSMinVersion = DefaultTLSMinVersion
	}
	if c.Metrics.BindAddress == "" {
		c.Metrics.BindAddress = DefaultMetricsBindAddress
	}
	if c.Metrics.Secure == nil {
		secure := true
		c.Metrics.Secure = &secure
	}
	if c.Health.BindAddress == "" {
		c.Health.BindAddress = DefaultHealthBindAddress
	}
	if c.ShutdownGracePeriod == nil {
		c.ShutdownGracePeriod = &metav1.Duration{Duration: DefaultShutdownGracePeriod}
	}
	if c.DrainPeriod == nil {
		c.DrainPeriod = &metav1.Duration{Duration: DefaultDrainPeriod}
	}
	if c.Policy.EvaluationTimeout == nil {
		c.Policy.EvaluationTimeout = &metav1.Duration{Duration: DefaultEvaluationTimeout}
	}
	if ex := &c.Policy.Exceptions; ex.MaxDuration == nil {
		ex.MaxDuration = &metav1.Duration{Duration: DefaultExceptionMaxDuration}
	}
	if ex := &c.Policy.Exceptions; ex.ClockSkew == nil {
		ex.ClockSkew = &metav1.Duration{Duration: DefaultExceptionClockSkew}
	}
	if c.Policy.Backstop == nil {
		c.Policy.Backstop = ptr.To(false)
	}
	if dc := &c.Policy.DecisionCache; dc.MaxBytes == nil {
		dc.MaxBytes = resource.NewQuantity(DefaultDecisionCacheBytes, resource.BinarySI)
	}
	in := &c.Injection
	if in.ExcludedNamespaces == nil {
		in.ExcludedNamespaces = append([]string(nil), DefaultExcludedNamespaces...)
	}
	if in.TrustedRequesters == nil {
		in.TrustedRequesters = DefaultTrustedRequesters()
	}
	if in.NamespaceCacheWait == nil {
		in.NamespaceCacheWait = &metav1.Duration{Duration: DefaultNamespaceCacheWait}
	}
	l := &in.Loader
	if l.Image == "" {
		l.Image = DefaultLoaderImage(version.Version)
	}
	if l.Command == nil {
		l.Command = append([]string(nil), DefaultLoaderCommand...)
	}
	if l.PullPolicy == "" {
		l.PullPolicy = corev1.PullIfNotPresent
	}
	if l.Resources == nil {
		l.Resources = DefaultLoaderResources()
	}
	// The restricted profile (injectiondefaults.go), the mutators' default too.
	if l.SecurityContext == nil {
		l.SecurityContext = DefaultLoaderSecurityContext()
	}
	for scheme, img := range l.Schemes {
		if img.SecurityContext == nil {
			img.SecurityContext = DefaultLoaderSecurityContext()
			l.Schemes[scheme] = img
		}
	}
	// The GPU vendor keys default to NVIDIA's (injectiondefaults.go, the
	// mutators' defaults too).
	g := &in.GPU
	if g.ResourceName == "" {
		g.ResourceName = DefaultGPUResourceName
	}
	if g.ProductLabel == "" {
		g.ProductLabel = DefaultGPUProductLabel
	}
	if g.MemoryLabel == "" {
		g.MemoryLabel = DefaultGPUMemoryLabel
	}
	if g.TaintKey == "" {
		g.TaintKey = DefaultGPUTaintKey
	}
	if g.Allocation == "" {
		g.Allocation = string(annotations.AllocationDevicePlugin)
	}
	defaultDRA(&g.DRA)
	if in.Probes.PeriodSeconds == 0 {
		in.Probes.PeriodSeconds = DefaultProbePeriodSeconds
	}
	defaultCertificates(&c.Certificates)
	ctl := &c.Controller
	if ctl.Enabled == nil {
		ctl.Enabled = ptr.To(true)
	}
	if ctl.LeaderElection == nil {
		ctl.LeaderElection = ptr.To(true)
	}
	if ctl.ServiceAccountName == "" {
		ctl.ServiceAccountName = DefaultServiceAccountName
	}
	a := &c.Audit
	if a.Enabled == nil {
		a.Enabled = ptr.To(true)
	}
	if a.Interval == nil {
		a.Interval = &metav1.Duration{Duration: DefaultAuditInterval}
	}
	if a.ObjectsPerSecond == 0 {
		a.ObjectsPerSecond = DefaultAuditObjectsPerSecond
	}
	if a.MaxResultsPerReport == 0 {
		a.MaxResultsPerReport = DefaultAuditMaxResults
	}
	if a.Reports == nil {
		a.Reports = []string{ReportsWGPolicy}
	}
}

// The WorkloadPolicyExceptions' defaults.
const (
	DefaultExceptionMaxDuration = 90 * 24 * time.Hour
	DefaultExceptionClockSkew   = time.Minute
)

// The decision cache's bound (Policy.DecisionCache.MaxBytes): by default
// 32Mi, an eighth of the manager's 256Mi memory limit, and at most 1Gi.
const (
	DefaultDecisionCacheBytes = 32 << 20
	MaxDecisionCacheBytes     = 1 << 30
)

// The audit's defaults.
const (
	DefaultAuditInterval         = 10 * time.Minute
	DefaultAuditObjectsPerSecond = 50
	DefaultAuditMaxResults       = 500
)

// AuditEnabled reports whether the periodic audit runs.
func (c *Configuration) AuditEnabled() bool {
	return c.Audit.Enabled == nil || *c.Audit.Enabled
}

// ControllerEnabled reports whether the AIInference controller runs.
func (c *Configuration) ControllerEnabled() bool {
	return c.Controller.Enabled == nil || *c.Controller.Enabled
}

// ControllerUsername is the user name the AIInference controller writes
// as: modelgate's service account.
func (c *Configuration) ControllerUsername() string {
	return "system:serviceaccount:" + c.Namespace + ":" + c.Controller.ServiceAccountName
}

// New returns a Configuration with every default applied.
func New() *Configuration {
	c := &Configuration{}
	Default(c)
	return c
}

// defaultDRA fills in NVIDIA's DRA driver's names.
func defaultDRA(d *GPUDRA) {
	dd := gpuclaim.DefaultOptions()
	if d.Driver == "" {
		d.Driver = dd.Driver
	}
	if d.DeviceClassName == "" {
		d.DeviceClassName = dd.DeviceClassName
	}
	if d.ProductAttribute == "" {
		d.ProductAttribute = dd.ProductAttribute
	}
	if d.MemoryCapacity == "" {
		d.MemoryCapacity = dd.MemoryCapacity
	}
	if d.Products == nil {
		d.Products = dd.Products
	}
	if d.GPUDeviceClasses == nil {
		d.GPUDeviceClasses = []string{"gpu.nvidia.com", "mig.nvidia.com"}
	}
	if !slices.Contains(d.GPUDeviceClasses, d.DeviceClassName) {
		d.GPUDeviceClasses = append(d.GPUDeviceClasses, d.DeviceClassName)
	}
}
