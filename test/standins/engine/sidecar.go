package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"strconv"
	"time"
)

// This file is the stand-in for llm-d's routing sidecar (llm-d-router's
// /app/pd-sidecar, pkg/sidecar/proxy): a reverse proxy in front of the
// engine in its Pod, whose /health answers 200 whatever the engine does.
// Without a prefill host in a request, the real sidecar forwards it to
// the engine as it is; the stand-in does only that.

// sidecarVLLMPortWarning is what pflag prints for the deprecated
// --vllm-port (pkg/sidecar/proxy/options.go, MarkDeprecated).
const sidecarVLLMPortWarning = "Flag --vllm-port has been deprecated, use --model-server-port instead; " +
	"--vllm-port will be removed after the deprecation period"

// sidecarBools are the sidecar's boolean flags (pflag: --flag or
// --flag=false; they never take the next word).
var sidecarBools = setOf("--secure-proxy", "--enable-ssrf-protection", "--enable-prefiller-sampling",
	"--enable-p2p-pull", "--tracing", "--moriio-write-mode", "--moriio-parallel-dispatch", "--zap-devel")

// parseSidecar parses pd-sidecar's flags: --port (8000),
// --model-server-port (8200), the deprecated --vllm-port (used when
// --model-server-port is not given), --secure-proxy (true: TLS) and
// --cert-path. Its other flags are accepted and ignored.
func parseSidecar(args []string) (launch, error) {
	const prog = "pd-sidecar"
	spec := flagSpec{
		prog:   prog,
		valued: setOf("--port", "--model-server-port", "--vllm-port", "--cert-path"),
		isBool: func(n string) bool { return sidecarBools[n] },
	}
	s, err := spec.scan(args)
	if err != nil {
		return launch{}, err
	}
	l := launch{Engine: engineRoutingSidecar, Secure: true, CertPath: s.last("--cert-path")}
	if l.Port, err = parsePort(prog, "--port", s.last("--port"), 8000); err != nil {
		return launch{}, err
	}
	enginePort, from := s.last("--model-server-port"), "--model-server-port"
	if _, ok := s.flags["--vllm-port"]; ok {
		l.Warnings = append(l.Warnings, sidecarVLLMPortWarning)
		if _, both := s.flags["--model-server-port"]; !both {
			enginePort, from = s.last("--vllm-port"), "--vllm-port"
		}
	}
	if l.EnginePort, err = parsePort(prog, from, enginePort, 8200); err != nil {
		return launch{}, err
	}
	if v, ok := s.flags["--secure-proxy"]; ok && len(v) > 0 {
		if l.Secure, err = strconv.ParseBool(v[0]); err != nil {
			return launch{}, &cliError{Code: 1, Msg: fmt.Sprintf("invalid argument %q for \"--secure-proxy\" flag: %v", v[0], err)}
		}
	}
	return l, nil
}

// runSidecar serves on every address at --port: GET /health is 200,
// everything else goes to the engine on the Pod's loopback.
func runSidecar(ctx context.Context, l launch, p proc) int {
	up := &url.URL{Scheme: "http", Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(l.EnginePort))}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	mux.Handle("/", proxyHandler(up, p.stdout))
	ln, err := net.Listen("tcp", net.JoinHostPort("", strconv.Itoa(l.Port)))
	if err != nil {
		fail(p, l, err)
		return 1
	}
	if l.Secure {
		cert, err := sidecarCertificate(l.CertPath)
		if err != nil {
			_ = ln.Close()
			fail(p, l, err)
			return 1
		}
		ln = tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
	}
	srv := serve(l.Engine, ln, mux, p)
	defer srv.shutdown(p)
	scheme := "http"
	if l.Secure {
		scheme = "https"
	}
	fmt.Fprintf(p.stdout, "engine: serving %s, forwarding to %s\n", scheme, up)
	return srv.wait(ctx, p)
}

// sidecarCertificate is the TLS certificate of --cert-path (tls.crt and
// tls.key), else a new self-signed one, as the sidecar makes.
func sidecarCertificate(dir string) (tls.Certificate, error) {
	if dir != "" {
		return tls.LoadX509KeyPair(filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"))
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(now.UnixNano()),
		Subject:      pkix.Name{Organization: []string{"modelgate stand-in routing sidecar"}},
		NotBefore:    now.Add(-time.Minute),
		NotAfter:     now.AddDate(1, 0, 0),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}
