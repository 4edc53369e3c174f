package deviceplugin

import (
	"context"
	"errors"
	"time"
)

// Registration retries start after minRetry and double up to maxRetry; a
// new kubelet socket is tried at once.
const (
	minRetry = 100 * time.Millisecond
	maxRetry = 2 * time.Second
)

// keep keeps the plugin served and registered until ctx is done, then
// stops serving and records the result for Stop. srv is the server Start
// made.
func (p *Plugin) keep(ctx context.Context, srv *server) {
	defer close(p.done)
	var (
		st    = keeperState{serving: srv.id}
		retry = retrier{min: minRetry, max: maxRetry}
		req   = registerRequest(p.opts)
	)
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		var failed <-chan error
		if srv != nil {
			failed = srv.failed
		}
		select {
		case <-ctx.Done():
			p.setRegistered(false)
			if srv != nil {
				p.stopErr = errors.Join(p.stopErr, srv.stop())
			}
			p.log.Info("stopped")
			return
		case err := <-failed:
			p.log.Error(err, "serving failed")
			p.stopErr = errors.Join(p.stopErr, srv.stop())
			srv, st.serving = nil, fileID{}
		case <-timer.C:
		}

		obs := observation{own: statID(p.opts.socketPath()), kubelet: statID(p.opts.kubeletSocketPath())}
		pl := decide(st, obs)
		if pl.unregister {
			p.log.Info("registration lost", "kubeletSocketGone", obs.kubelet.absent(), "pluginSocketGone", obs.own.absent())
			st.registeredWith = fileID{}
			p.setRegistered(false)
		}
		if pl.relisten {
			if srv != nil {
				if err := srv.stop(); err != nil {
					p.log.Error(err, "stop serving on the old socket")
				}
			}
			var err error
			srv, err = listenAndServe(p.opts.socketPath(), p.svc)
			if err != nil {
				p.log.Error(err, "serve on a new socket")
				srv, st.serving = nil, fileID{}
			} else {
				p.log.Info("serving on a new socket")
				st.serving = srv.id
			}
		}
		if now := time.Now(); pl.register && srv != nil && retry.due(now, obs.kubelet) {
			if err := register(ctx, p.opts.kubeletSocketPath(), req); err != nil {
				retry.failed(time.Now(), obs.kubelet)
				p.log.V(1).Info("registration failed, will retry", "error", err.Error(), "retryIn", retry.delay)
			} else {
				retry.succeeded()
				st.registeredWith = obs.kubelet
				p.setRegistered(true)
				p.log.Info("registered with the kubelet")
			}
		}
		timer.Reset(p.wait(retry.at))
	}
}

// wait is how long to sleep before looking again: the poll interval, or
// less when a registration retry is due sooner.
func (p *Plugin) wait(retryAt time.Time) time.Duration {
	d := p.opts.PollInterval
	if until := time.Until(retryAt); until > 0 && until < d {
		d = until
	}
	return d
}
