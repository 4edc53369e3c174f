package deviceplugin

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/go-logr/logr"
)

// ErrStopped is returned by WaitRegistered once the plugin has stopped.
var ErrStopped = errors.New("device plugin stopped")

// Plugin is a running device plugin. Its methods are safe for concurrent
// use.
type Plugin struct {
	opts    Options
	svc     *service
	log     logr.Logger
	cancel  context.CancelFunc
	done    chan struct{} // closed when the keeper has torn everything down
	stopErr error         // set by the keeper before done is closed

	mu         sync.Mutex
	registered bool
	regChanged chan struct{} // closed and replaced when registered changes
}

// Start serves the device plugin on its socket and returns once it
// serves; registration with the kubelet happens in the background (see
// WaitRegistered), retried until it succeeds and repeated whenever the
// kubelet restarts. The plugin runs until Stop is called or ctx is done.
func Start(ctx context.Context, o Options) (*Plugin, error) {
	o = o.withDefaults()
	if err := o.validate(); err != nil {
		return nil, fmt.Errorf("device plugin options: %w", err)
	}
	log := o.Log
	if log.GetSink() == nil {
		log = logr.FromContextOrDiscard(ctx)
	}
	log = log.WithValues("resource", o.ResourceName, "socket", o.socketPath())
	p := &Plugin{
		opts:       o,
		svc:        &service{devices: newDeviceSet(o.deviceIDs()), log: log},
		log:        log,
		done:       make(chan struct{}),
		regChanged: make(chan struct{}),
	}
	srv, err := listenAndServe(o.socketPath(), p.svc)
	if err != nil {
		return nil, fmt.Errorf("start the device plugin: %w", err)
	}
	log.Info("serving", "devices", o.Devices)
	ctx, p.cancel = context.WithCancel(ctx)
	go p.keep(ctx, srv)
	return p, nil
}

// Stop stops serving, removes the plugin's socket and returns once done.
// The kubelet sees the plugin's devices go unhealthy. Calling it again
// returns the same result.
func (p *Plugin) Stop() error {
	p.cancel()
	<-p.done
	return p.stopErr
}

// WaitRegistered returns once the plugin is registered with the kubelet,
// ctx's error if ctx is done first, or ErrStopped if the plugin stops.
// After a kubelet restart it waits for the new registration, once the
// plugin has noticed the restart.
func (p *Plugin) WaitRegistered(ctx context.Context) error {
	for {
		p.mu.Lock()
		registered, changed := p.registered, p.regChanged
		p.mu.Unlock()
		if registered {
			return nil
		}
		select {
		case <-changed:
		case <-p.done:
			return ErrStopped
		case <-ctx.Done():
			return fmt.Errorf("wait for the device plugin to register: %w", ctx.Err())
		}
	}
}

// Registered reports whether the plugin is registered with the kubelet,
// as far as it knows: it notices a kubelet restart within a poll interval.
func (p *Plugin) Registered() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.registered
}

// SetHealthy marks device id healthy or unhealthy; on a change every
// ListAndWatch stream sends the devices again. An unknown id is an error
// wrapping ErrUnknownDevice.
func (p *Plugin) SetHealthy(id string, healthy bool) error {
	return p.svc.devices.setHealthy(id, healthy)
}

// Allocations returns what Allocate answered so far, one entry per
// container, oldest first.
func (p *Plugin) Allocations() []Allocation { return p.svc.recorded() }

// DeviceIDs returns the advertised device IDs in order.
func (p *Plugin) DeviceIDs() []string { return p.svc.devices.list() }

// SocketPath returns the path of the plugin's socket.
func (p *Plugin) SocketPath() string { return p.opts.socketPath() }

// setRegistered records the registration state and wakes WaitRegistered.
func (p *Plugin) setRegistered(registered bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.registered == registered {
		return
	}
	p.registered = registered
	close(p.regChanged)
	p.regChanged = make(chan struct{})
}
