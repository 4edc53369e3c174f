// Package config is modelgate's runtime Configuration
// (config.modelgate.io/v1alpha1, kind Configuration): its types, the strict
// loader, the defaults (applied in one place, Default) and Validate.
package config

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	Metrics Endpoint `json:"metrics,omitempty"`

	// Health is the /healthz and /readyz endpoint.
	Health Endpoint `json:"health,omitempty"`

	// Injection tunes the mutating pipeline.
	Injection Injection `json:"injection,omitempty"`

	// ShutdownGracePeriod is how long in-flight reviews may take to finish
	// once modelgate is asked to stop. Defaults to 30s.
	ShutdownGracePeriod *metav1.Duration `json:"shutdownGracePeriod,omitempty"`
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
}

// Endpoint is a plain-HTTP listener.
type Endpoint struct {
	// BindAddress is host:port; "0" disables the endpoint.
	BindAddress string `json:"bindAddress,omitempty"`
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
