package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// balancer stands in for the modelgate-webhook Service: a TCP proxy (TLS
// passes through to the replicas) that sends each new connection to the
// next replica, round robin, among those whose /readyz answered 200 at the
// last probe and that are not terminating. Like kube-proxy it never
// retries: a connection to a replica that refuses it is closed, and a
// connection keeps its replica until either side closes it.
type balancer struct {
	ln          net.Listener
	backends    []*backend
	probePeriod time.Duration
	next        atomic.Uint64
	log         *timeline

	accepted, noBackend, dialFailed atomic.Int64
}

// backend is a replica behind the balancer.
type backend struct {
	r     *replica
	ready atomic.Bool
	// terminating is a deleted Pod's endpoint: no new connections, whatever
	// its readiness says.
	terminating atomic.Bool
	conns       atomic.Int64
}

// newBalancer listens on addr, the address the webhook configurations
// name.
func newBalancer(addr string, probePeriod time.Duration, log *timeline, replicas ...*replica) (*balancer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("balancer: %w", err)
	}
	b := &balancer{ln: ln, probePeriod: probePeriod, log: log}
	for _, r := range replicas {
		b.backends = append(b.backends, &backend{r: r})
	}
	return b, nil
}

// run probes the replicas and proxies connections until ctx ends.
func (b *balancer) run(ctx context.Context) {
	go func() {
		<-ctx.Done()
		_ = b.ln.Close()
	}()
	go b.probe(ctx)
	for {
		c, err := b.ln.Accept()
		if err != nil {
			return
		}
		b.accepted.Add(1)
		go b.serve(c)
	}
}

// probe asks every replica's /readyz each probePeriod, as a kubelet with
// periodSeconds probePeriod and failureThreshold 1 would, and logs every
// change.
func (b *balancer) probe(ctx context.Context) {
	t := time.NewTicker(b.probePeriod)
	defer t.Stop()
	for {
		for _, be := range b.backends {
			ok := be.r.alive() && be.r.ready(ctx)
			if be.ready.Swap(ok) != ok {
				b.log.add("balancer: %s %s", be.r.name, map[bool]string{true: "ready: in rotation", false: "not ready: out of rotation"}[ok])
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// pick returns the next replica in rotation, or nil.
func (b *balancer) pick() *backend {
	n := len(b.backends)
	if n == 0 {
		return nil
	}
	// Reduced before the conversion, so a counter past MaxInt cannot
	// turn into a negative index.
	start := int(b.next.Add(1) % uint64(n)) //nolint:gosec // below n after the modulo
	for i := range n {
		be := b.backends[(start+i)%n]
		if be.ready.Load() && !be.terminating.Load() {
			return be
		}
	}
	return nil
}

// serve proxies one connection to a replica.
func (b *balancer) serve(c net.Conn) {
	be := b.pick()
	if be == nil {
		b.noBackend.Add(1)
		_ = c.Close()
		return
	}
	s, err := net.DialTimeout("tcp", be.r.webhookAddr, time.Second)
	if err != nil {
		b.dialFailed.Add(1)
		b.log.add("balancer: a connection to %s failed: %v", be.r.name, err)
		_ = c.Close()
		return
	}
	be.conns.Add(1)
	defer be.conns.Add(-1)
	var once sync.Once
	closeBoth := func() { once.Do(func() { _ = c.Close(); _ = s.Close() }) }
	done := make(chan struct{}, 2)
	for _, p := range [][2]net.Conn{{s, c}, {c, s}} {
		go func() {
			_, _ = io.Copy(p[0], p[1])
			closeBoth()
			done <- struct{}{}
		}()
	}
	<-done
	<-done
}

// setTerminating takes a replica out of rotation for new connections, as
// the endpoints controller does when its Pod is deleted.
func (b *balancer) setTerminating(r *replica, on bool) {
	for _, be := range b.backends {
		if be.r == r {
			be.terminating.Store(on)
		}
	}
}

// replaced marks a replica that was stopped and started again as a new
// Pod: a new endpoint, not ready until its first probe passes.
func (b *balancer) replaced(r *replica) {
	for _, be := range b.backends {
		if be.r == r {
			be.ready.Store(false)
			be.terminating.Store(false)
		}
	}
}

// inRotation reports whether the replica gets new connections.
func (b *balancer) inRotation(r *replica) bool {
	for _, be := range b.backends {
		if be.r == r {
			return be.ready.Load() && !be.terminating.Load()
		}
	}
	return false
}

// timeline is a list of timestamped events for the report.
type timeline struct {
	mu     sync.Mutex
	start  time.Time
	events []string
	echo   func(string, ...any)
}

func (t *timeline) add(format string, args ...any) {
	t.mu.Lock()
	defer t.mu.Unlock()
	msg := fmt.Sprintf(format, args...)
	t.events = append(t.events, fmt.Sprintf("%7.2fs  %s", time.Since(t.start).Seconds(), msg))
	if t.echo != nil {
		t.echo("%s", msg)
	}
}

// reset empties the timeline and starts its clock.
func (t *timeline) reset() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.start, t.events = time.Now(), nil
}

func (t *timeline) lines() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]string(nil), t.events...)
}
