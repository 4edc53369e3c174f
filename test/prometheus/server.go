package prometheus

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Server is a running Prometheus.
type Server struct {
	// URL is its HTTP API's base, on loopback.
	URL string
	// Log is the file its output goes to.
	Log    string
	cmd    *exec.Cmd
	exited chan struct{}
}

// Start runs the prometheus binary with the configuration in config,
// its database and log in dir, on a free loopback port, and waits until
// it is ready.
func Start(ctx context.Context, binary, config, dir string) (*Server, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	logPath := filepath.Join(dir, "prometheus.log")
	logFile, err := os.Create(logPath) //nolint:gosec // the test's own directory
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	cmd := exec.Command(binary, //nolint:gosec // the binary the Makefile built
		"--config.file="+config,
		"--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr,
		"--web.enable-lifecycle",
		"--log.level=info",
	)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", binary, err)
	}
	s := &Server{URL: "http://" + addr, Log: logPath, cmd: cmd, exited: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(s.exited) }()
	if err := s.waitReady(ctx, time.Minute); err != nil {
		return nil, errors.Join(err, s.Stop())
	}
	return s, nil
}

func (s *Server) waitReady(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.URL+"/-/ready", nil)
		if err != nil {
			return err
		}
		if resp, err := http.DefaultClient.Do(req); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-s.exited:
			return fmt.Errorf("prometheus exited before it was ready: %s", lastLines(s.Log, 5))
		case <-ctx.Done():
			return fmt.Errorf("prometheus was not ready within %s; see %s", timeout, s.Log)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Reload makes Prometheus read its configuration and rule files again.
func (s *Server) Reload(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.URL+"/-/reload", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("reloading prometheus: %s", resp.Status)
	}
	return nil
}

// Exited is closed when Prometheus exits.
func (s *Server) Exited() <-chan struct{} { return s.exited }

// Stop stops Prometheus (SIGTERM, then SIGKILL after 10 s).
func (s *Server) Stop() error {
	select {
	case <-s.exited:
		return nil
	default:
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.exited
	}
	return nil
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("finding a free port: %w", err)
	}
	defer l.Close()
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(l.Addr().(*net.TCPAddr).Port)), nil
}

// lastLines are the last n lines of the file at path, for an error.
func lastLines(path string, n int) string {
	b, err := os.ReadFile(path) //nolint:gosec // Prometheus's log, in the test's directory
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
