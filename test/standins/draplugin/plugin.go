package draplugin

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"google.golang.org/grpc"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/klog/v2"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

// Preparation is what the plugin prepared for one claim.
type Preparation struct {
	// Claim is the claim's namespace and name, UID its UID.
	Claim types.NamespacedName
	UID   types.UID
	// Devices are the claim's GPUs from this node's pool, in the
	// allocation's order.
	Devices []PreparedDevice
	// SpecFile is the CDI spec file written for the claim.
	SpecFile string
}

// Plugin is a running kubelet plugin. Its methods are safe for concurrent
// use.
type Plugin struct {
	opts   Options
	inv    inventory
	log    logr.Logger
	helper *kubeletplugin.Helper

	mu         sync.Mutex
	prepared   map[types.UID]Preparation
	unprepared []Preparation
	// registered is the kubelet's last word on the registration: nil
	// before it has said anything.
	registered *registerapi.RegistrationStatus
}

var _ kubeletplugin.DRAPlugin = (*Plugin)(nil)

// Start serves the plugin's sockets, which the kubelet's plugin watcher
// finds and registers (see WaitReady), and starts publishing the node's
// ResourceSlice. The plugin runs until Stop is called or ctx is done.
func Start(ctx context.Context, o Options) (*Plugin, error) {
	if err := o.validate(); err != nil {
		return nil, fmt.Errorf("DRA plugin options: %w", err)
	}
	inv, _ := newInventory(o.Devices)
	log := o.Log
	if log.GetSink() == nil {
		log = logr.FromContextOrDiscard(ctx)
	}
	log = log.WithValues("driver", DriverName, "node", o.NodeName)
	for _, d := range []string{o.registryDir(), o.dataDir(), o.CDIDir} {
		if err := os.MkdirAll(d, 0o750); err != nil {
			return nil, fmt.Errorf("start the DRA plugin: %w", err)
		}
	}
	p := &Plugin{opts: o, inv: inv, log: log, prepared: map[types.UID]Preparation{}}
	helper, err := kubeletplugin.Start(klog.NewContext(ctx, log), p,
		kubeletplugin.DriverName(DriverName),
		kubeletplugin.NodeName(o.NodeName),
		kubeletplugin.KubeClient(o.KubeClient),
		kubeletplugin.RegistrarDirectoryPath(o.registryDir()),
		kubeletplugin.PluginDataDirectoryPath(o.dataDir()),
		kubeletplugin.HealthService(false),
		kubeletplugin.GRPCInterceptor(p.watchRegistration),
	)
	if err != nil {
		return nil, fmt.Errorf("start the DRA plugin: %w", err)
	}
	p.helper = helper
	if err := helper.PublishResources(ctx, driverResources(o.NodeName, o.Devices)); err != nil {
		helper.Stop()
		return nil, fmt.Errorf("publish the node's ResourceSlice: %w", err)
	}
	log.Info("serving", "registrationSocket", filepath.Join(o.registryDir(), registrationSocket),
		"draSocket", filepath.Join(o.dataDir(), draSocket), "cdiDir", o.CDIDir, "devices", len(o.Devices))
	return p, nil
}

// Stop stops serving and publishing, and removes the plugin's sockets. The
// ResourceSlice stays until the kubelet wipes it; the CDI spec files stay
// until their claims are unprepared. Calling it again does nothing.
func (p *Plugin) Stop() {
	p.helper.Stop()
}

// watchRegistration records what the kubelet says of the registration.
func (p *Plugin) watchRegistration(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if st, ok := req.(*registerapi.RegistrationStatus); ok {
		p.mu.Lock()
		p.registered = &registerapi.RegistrationStatus{PluginRegistered: st.PluginRegistered, Error: st.Error}
		p.mu.Unlock()
		p.log.Info("the kubelet's registration status", "registered", st.PluginRegistered, "error", st.Error)
	}
	return handler(ctx, req)
}

// pollInterval is how often WaitReady looks.
const pollInterval = 100 * time.Millisecond

// WaitReady returns once the kubelet has registered the plugin and the
// node's ResourceSlice holds every device, or an error saying which is
// missing when timeout passes or ctx is done. A registration the kubelet
// refuses fails at once.
func (p *Plugin) WaitReady(ctx context.Context, timeout time.Duration) error {
	var missing string
	selector := fields.Set{resourcev1.ResourceSliceSelectorNodeName: p.opts.NodeName, resourcev1.ResourceSliceSelectorDriver: DriverName}.String()
	err := wait.PollUntilContextTimeout(ctx, pollInterval, timeout, true, func(ctx context.Context) (bool, error) {
		p.mu.Lock()
		st := p.registered
		p.mu.Unlock()
		switch {
		case st == nil:
			missing = "the kubelet has not registered the plugin"
			return false, nil
		case !st.PluginRegistered:
			return false, fmt.Errorf("the kubelet refused the DRA plugin: %s", st.Error)
		}
		list, err := p.opts.KubeClient.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{FieldSelector: selector})
		if err != nil {
			missing = "listing the ResourceSlices: " + err.Error()
			return false, nil //nolint:nilerr // polled again; what is missing is reported on timeout
		}
		n := 0
		for _, s := range list.Items {
			n += len(s.Spec.Devices)
		}
		if n != len(p.opts.Devices) {
			missing = fmt.Sprintf("the node's ResourceSlices hold %d devices of %d", n, len(p.opts.Devices))
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for the DRA plugin on node %s: %s: %w", p.opts.NodeName, missing, err)
	}
	return nil
}

// PrepareResourceClaims writes a CDI spec for each claim's GPUs from this
// node and answers with their CDI device IDs; a claim that cannot be
// prepared gets its own error, which the kubelet reports on the Pod and
// retries.
func (p *Plugin) PrepareResourceClaims(ctx context.Context, claims []*resourcev1.ResourceClaim) (map[types.UID]kubeletplugin.PrepareResult, error) {
	out := make(map[types.UID]kubeletplugin.PrepareResult, len(claims))
	for _, c := range claims {
		prep, err := p.prepare(c)
		if err != nil {
			p.log.Error(err, "prepare", "claim", klog.KObj(c))
			out[c.UID] = kubeletplugin.PrepareResult{Err: err}
			continue
		}
		res := kubeletplugin.PrepareResult{Devices: make([]kubeletplugin.Device, 0, len(prep.Devices))}
		for _, d := range prep.Devices {
			res.Devices = append(res.Devices, kubeletplugin.Device{
				Requests: []string{d.Request}, PoolName: d.Pool, DeviceName: d.Device, CDIDeviceIDs: []string{d.CDIDeviceID},
			})
		}
		p.log.Info("prepared", "claim", klog.KObj(c), "uid", c.UID, "devices", deviceNames(prep.Devices))
		out[c.UID] = res
	}
	return out, nil
}

// prepare selects a claim's devices, refuses those another claim holds,
// writes the spec and records the preparation. Preparing a claim again
// writes the same spec again.
func (p *Plugin) prepare(c *resourcev1.ResourceClaim) (Preparation, error) {
	devs, err := selectDevices(c, DriverName, p.opts.NodeName, p.inv)
	if err != nil {
		return Preparation{}, err
	}
	prep := Preparation{
		Claim: types.NamespacedName{Namespace: c.Namespace, Name: c.Name}, UID: c.UID, Devices: devs,
		SpecFile: filepath.Join(p.opts.CDIDir, specFileName(c.UID)),
	}
	spec, err := cdiSpec(prep)
	if err != nil {
		return Preparation{}, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := inUse(p.prepared, c.UID, devs); err != nil {
		return Preparation{}, fmt.Errorf("claim %s: %w", prep.Claim, err)
	}
	if err := writeSpec(p.opts.CDIDir, specFileName(c.UID), spec); err != nil {
		return Preparation{}, err
	}
	p.prepared[c.UID] = prep
	return prep, nil
}

// UnprepareResourceClaims removes each claim's CDI spec and records it as
// unprepared. A claim this plugin does not know (it was restarted) has its
// spec removed all the same.
func (p *Plugin) UnprepareResourceClaims(ctx context.Context, claims []kubeletplugin.NamespacedObject) (map[types.UID]error, error) {
	out := make(map[types.UID]error, len(claims))
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range claims {
		err := removeSpec(p.opts.CDIDir, specFileName(c.UID))
		out[c.UID] = err
		if err != nil {
			p.log.Error(err, "unprepare", "claim", c)
			continue
		}
		prep, ok := p.prepared[c.UID]
		if !ok {
			prep = Preparation{Claim: c.NamespacedName, UID: c.UID, SpecFile: filepath.Join(p.opts.CDIDir, specFileName(c.UID))}
		}
		delete(p.prepared, c.UID)
		p.unprepared = append(p.unprepared, prep)
		p.log.Info("unprepared", "claim", c, "known", ok)
	}
	return out, nil
}

// HandleError logs errors of the helper's background work (publishing the
// ResourceSlice, serving gRPC); none stops the plugin.
func (p *Plugin) HandleError(ctx context.Context, err error, msg string) {
	p.log.Error(err, msg, "recoverable", errors.Is(err, kubeletplugin.ErrRecoverable))
}

// WatchHealthStatus is never called: the health service is off.
func (p *Plugin) WatchHealthStatus(context.Context, chan<- kubeletplugin.DeviceHealthReport) error {
	return kubeletplugin.ErrHealthNotSupported
}

// Prepared returns the claims prepared now, by namespace and name.
func (p *Plugin) Prepared() []Preparation {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]Preparation, 0, len(p.prepared))
	for _, prep := range p.prepared {
		out = append(out, clonePreparation(prep))
	}
	slices.SortFunc(out, func(a, b Preparation) int { return strings.Compare(a.Claim.String(), b.Claim.String()) })
	return out
}

// Unprepared returns the claims unprepared so far, oldest first, with
// what they had been prepared with (no devices for a claim the plugin did
// not know).
func (p *Plugin) Unprepared() []Preparation {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]Preparation, len(p.unprepared))
	for i, prep := range p.unprepared {
		out[i] = clonePreparation(prep)
	}
	return out
}

// CDIDir returns the folder of the plugin's CDI spec files.
func (p *Plugin) CDIDir() string { return p.opts.CDIDir }

func clonePreparation(prep Preparation) Preparation {
	prep.Devices = slices.Clone(prep.Devices)
	return prep
}

func deviceNames(devs []PreparedDevice) []string {
	out := make([]string, len(devs))
	for i, d := range devs {
		out[i] = d.Device
	}
	return out
}
