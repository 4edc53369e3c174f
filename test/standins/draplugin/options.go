package draplugin

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/go-logr/logr"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/modelgate/modelgate/test/standins/dradriver"
)

// Names of NVIDIA's DRA driver and of the CDI devices this plugin makes.
const (
	// DriverName is the driver this plugin registers and publishes for.
	DriverName = dradriver.Driver
	// CDIVendor and CDIClass make the kind of the CDI devices,
	// k8s.gpu.nvidia.com/gpu.
	CDIVendor = "k8s." + DriverName
	CDIClass  = "gpu"
	// VisibleDevicesEnv is the variable the NVIDIA container runtime reads
	// to decide which GPUs to expose: the UUIDs of the claim's GPUs.
	VisibleDevicesEnv = "NVIDIA_VISIBLE_DEVICES"
	// ClaimEnv names the claim a container's GPUs came from, as
	// namespace/name.
	ClaimEnv = "MODELGATE_DRA_CLAIM"

	// registrySubdir and pluginsSubdir are the kubelet's folders, under its
	// root, for registration sockets and for the plugins' own data.
	registrySubdir = "plugins_registry"
	pluginsSubdir  = "plugins"
	// registrationSocket and draSocket are the file names the helper gives
	// its sockets.
	registrationSocket = DriverName + "-reg.sock"
	draSocket          = "dra.sock"
	// maxSocketPath is the longest path a unix socket address holds on
	// Linux (108 bytes of sun_path, less the terminating NUL).
	maxSocketPath = 107
	// uuidAttribute is the device attribute holding the GPU's UUID.
	uuidAttribute = "uuid"
)

// Options configure a Plugin. Every field but Log must be set.
type Options struct {
	// NodeName is the Node the plugin runs on; its name is the pool's.
	NodeName string
	// KubeClient publishes the ResourceSlice and reads the claims: the
	// node's credentials, as a plugin's service account would be.
	KubeClient kubernetes.Interface
	// Devices are the GPUs to publish, each with a uuid string attribute
	// (dradriver.NodeDevices).
	Devices []resourcev1.Device
	// KubeletDir is the kubelet's root folder (its --root-dir): the
	// registration socket goes into its plugins_registry folder, which the
	// kubelet's plugin watcher watches, and the DRA socket into
	// plugins/gpu.nvidia.com.
	KubeletDir string
	// CDIDir is where the CDI spec files go: a folder containerd reads CDI
	// specs from (cdi_spec_dirs).
	CDIDir string
	// Log receives the plugin's and the helper's log; default the logger in
	// Start's context, or none.
	Log logr.Logger
}

// registryDir is the kubelet's plugin registration folder.
func (o Options) registryDir() string { return filepath.Join(o.KubeletDir, registrySubdir) }

// dataDir is the plugin's data folder, where its DRA socket is.
func (o Options) dataDir() string { return filepath.Join(o.KubeletDir, pluginsSubdir, DriverName) }

// validate reports every problem of o at once.
func (o Options) validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if o.NodeName == "" {
		bad("node name must be set")
	}
	if o.KubeClient == nil {
		bad("kube client must be set")
	}
	if len(o.Devices) == 0 {
		bad("devices must not be empty")
	}
	if _, err := newInventory(o.Devices); err != nil {
		errs = append(errs, err)
	}
	for name, dir := range map[string]string{"kubelet directory": o.KubeletDir, "CDI directory": o.CDIDir} {
		if !filepath.IsAbs(dir) {
			bad("%s %q must be an absolute path", name, dir)
		}
	}
	for _, p := range []string{filepath.Join(o.registryDir(), registrationSocket), filepath.Join(o.dataDir(), draSocket)} {
		if len(p) > maxSocketPath {
			bad("socket path %q is %d bytes long, more than a unix socket address holds (%d)", p, len(p), maxSocketPath)
		}
	}
	return errors.Join(errs...)
}
