package prometheus

import (
	"context"
	"errors"
	"path/filepath"
	"time"

	"github.com/modelgate/modelgate/test/harnesses/cluster"
)

// Server is a running Prometheus.
type Server struct {
	API
	// Log is the file its output goes to.
	Log  string
	proc *cluster.Process
}

// Start runs the prometheus binary with the configuration in config,
// its database and log in dir, on a free loopback port, and waits until
// it is ready.
func Start(ctx context.Context, binary, config, dir string) (*Server, error) {
	addr, err := cluster.FreeAddr()
	if err != nil {
		return nil, err
	}
	log := filepath.Join(dir, "prometheus.log")
	proc, err := cluster.StartProcess("prometheus", binary, []string{
		"--config.file=" + config,
		"--storage.tsdb.path=" + filepath.Join(dir, "data"),
		"--web.listen-address=" + addr,
		"--log.level=info",
	}, log)
	if err != nil {
		return nil, err
	}
	s := &Server{API: API{URL: "http://" + addr}, Log: log, proc: proc}
	if err := proc.WaitHTTPOK(ctx, s.URL+"/-/ready", time.Minute); err != nil {
		return nil, errors.Join(err, proc.Stop())
	}
	return s, nil
}

// Exited is closed when Prometheus exits.
func (s *Server) Exited() <-chan struct{} { return s.proc.Exited() }

// Stop stops Prometheus (SIGTERM, then SIGKILL if it lingers).
func (s *Server) Stop() error { return s.proc.Stop() }
