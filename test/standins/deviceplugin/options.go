package deviceplugin

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/util/validation"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

const (
	// DefaultResourceName is the extended resource NVIDIA's plugin advertises.
	DefaultResourceName = "nvidia.com/gpu"
	// DefaultUUIDPrefix is the middle part of the device IDs when
	// Options.UUIDPrefix is empty.
	DefaultUUIDPrefix = "modelgate"
	// DefaultSocketName is the file name of the plugin's socket in the
	// device-plugin directory.
	DefaultSocketName = "modelgate-gpu.sock"
	// DefaultPollInterval is how often the plugin looks at the sockets.
	DefaultPollInterval = 500 * time.Millisecond

	// kubeletSocketName is the kubelet's registration socket in PluginDir.
	kubeletSocketName = "kubelet.sock"
	// maxSocketPath is the longest path a unix socket address holds on
	// Linux (108 bytes of sun_path, less the terminating NUL).
	maxSocketPath = 107
)

// Options configures a Plugin. The zero value of each field but Devices
// means its default.
type Options struct {
	// ResourceName is the extended resource the devices are advertised as;
	// default DefaultResourceName.
	ResourceName string
	// Devices is how many devices to advertise; it must be positive.
	Devices int
	// UUIDPrefix names the devices: device i (from 0) is
	// "GPU-<UUIDPrefix>-<i>". Letters, digits and '-' only; default
	// DefaultUUIDPrefix.
	UUIDPrefix string
	// PluginDir is the kubelet's device-plugin directory, where kubelet.sock
	// is and the plugin's socket goes; default pluginapi.DevicePluginPath.
	PluginDir string
	// SocketName is the file name of the plugin's socket in PluginDir;
	// default DefaultSocketName.
	SocketName string
	// PollInterval is how often the plugin looks at its socket and the
	// kubelet's; default DefaultPollInterval.
	PollInterval time.Duration
	// Log receives the plugin's log; default the logger in Start's context,
	// or none.
	Log logr.Logger
}

// withDefaults returns o with every unset field set to its default.
func (o Options) withDefaults() Options {
	if o.ResourceName == "" {
		o.ResourceName = DefaultResourceName
	}
	if o.UUIDPrefix == "" {
		o.UUIDPrefix = DefaultUUIDPrefix
	}
	if o.PluginDir == "" {
		o.PluginDir = pluginapi.DevicePluginPath
	}
	if o.SocketName == "" {
		o.SocketName = DefaultSocketName
	}
	if o.PollInterval == 0 {
		o.PollInterval = DefaultPollInterval
	}
	return o
}

// validate reports every problem of o (with defaults applied) at once.
func (o Options) validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }

	if !strings.Contains(o.ResourceName, "/") {
		bad("resource name %q must be an extended resource name such as %q", o.ResourceName, DefaultResourceName)
	} else if msgs := validation.IsQualifiedName(o.ResourceName); len(msgs) > 0 {
		bad("resource name %q %s", o.ResourceName, strings.Join(msgs, "; "))
	}
	if o.Devices <= 0 {
		bad("devices %d must be a positive integer", o.Devices)
	}
	if strings.Trim(o.UUIDPrefix, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-") != "" {
		bad("uuid prefix %q can only hold letters, digits and '-'", o.UUIDPrefix)
	}
	if !filepath.IsAbs(o.PluginDir) {
		bad("plugin directory %q must be an absolute path", o.PluginDir)
	}
	switch {
	case o.SocketName == kubeletSocketName:
		bad("socket name %q is the kubelet's", o.SocketName)
	case o.SocketName == "." || o.SocketName == ".." || strings.ContainsRune(o.SocketName, filepath.Separator):
		bad("socket name %q must be a file name, not a path", o.SocketName)
	}
	for _, p := range []string{o.socketPath(), o.kubeletSocketPath()} {
		if len(p) > maxSocketPath {
			bad("socket path %q is %d bytes long, more than a unix socket address holds (%d)", p, len(p), maxSocketPath)
		}
	}
	if o.PollInterval < 0 {
		bad("poll interval %s must not be negative", o.PollInterval)
	}
	return errors.Join(errs...)
}

// socketPath is where the plugin serves.
func (o Options) socketPath() string { return filepath.Join(o.PluginDir, o.SocketName) }

// kubeletSocketPath is where the kubelet's Registration service is.
func (o Options) kubeletSocketPath() string { return filepath.Join(o.PluginDir, kubeletSocketName) }

// deviceIDs names the devices o advertises, in order.
func (o Options) deviceIDs() []string {
	ids := make([]string, o.Devices)
	for i := range ids {
		ids[i] = fmt.Sprintf("GPU-%s-%d", o.UUIDPrefix, i)
	}
	return ids
}
