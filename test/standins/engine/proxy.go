package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"time"
)

// runProxy runs `proxy --listen ADDR --to URL [--delay D]`: an HTTP
// reverse proxy to one upstream, as a sidecar an egress path goes through
// (a corporate proxy, a credential-injecting sidecar). It waits --delay
// before it listens, so that a container started before it is ready finds
// nothing there, and logs one line when it listens and one per request
// (method, path, status: never a header), for a test to see which traffic
// went through it.
func runProxy(ctx context.Context, argv []string, p proc) int {
	fs := flag.NewFlagSet(argv[0], flag.ContinueOnError)
	fs.SetOutput(p.stderr)
	listen := fs.String("listen", "127.0.0.1:3128", "the address to listen on")
	to := fs.String("to", "", "the upstream base URL (http://host:port)")
	delay := fs.Duration("delay", 0, "how long to wait before listening")
	if err := fs.Parse(argv[1:]); err != nil {
		return 2
	}
	up, err := url.Parse(*to)
	if err != nil || up.Scheme != "http" || up.Host == "" {
		fmt.Fprintf(p.stderr, "proxy: --to=%q: want an http:// URL with a host\n", *to)
		return 2
	}
	select {
	case <-time.After(*delay):
	case <-ctx.Done():
		return 0
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		fmt.Fprintf(p.stderr, "proxy: %v\n", err)
		return 1
	}
	fmt.Fprintf(p.stdout, "proxy: listening on %s at %s, forwarding to %s\n", ln.Addr(), time.Now().UTC().Format(time.RFC3339Nano), up)
	srv := &http.Server{Handler: proxyHandler(up, p.stdout), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintf(p.stderr, "proxy: %v\n", err)
		return 1
	}
	return 0
}

// proxyHandler forwards every request to up and logs it to log.
func proxyHandler(up *url.URL, log io.Writer) http.Handler {
	rp := httputil.NewSingleHostReverseProxy(up) //nolint:gosec // up is the upstream the proxy was started with, not taken from a request
	// Redirects (the Hub's to its CDN) are the client's to follow: a
	// Location naming the upstream is rewritten to the proxy, so the
	// client comes back through it.
	rp.ModifyResponse = func(r *http.Response) error {
		fmt.Fprintf(log, "proxy: %s %s %d\n", r.Request.Method, r.Request.URL.Path, r.StatusCode)
		// The outgoing request keeps the Host the client called: the
		// proxy's own address.
		if loc, err := url.Parse(r.Header.Get("Location")); err == nil && loc.Host == up.Host {
			loc.Host = r.Request.Host
			r.Header.Set("Location", loc.String())
		}
		return nil
	}
	return rp
}
