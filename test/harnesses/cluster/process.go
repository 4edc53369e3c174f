package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// stopTimeout is how long a component gets to exit after SIGTERM before it
// is killed. modelgate (drainPeriod 0: it is the only replica) lets
// in-flight reviews finish for up to 30s; the control-plane components exit
// at once.
const stopTimeout = 40 * time.Second

// process is one component the cluster runs as a child process: started in
// its own process group (so a terminal's Ctrl-C reaches only the parent,
// which stops each child once, in order), killed by the kernel if the
// parent dies, with its output in a log file.
type process struct {
	name   string
	cmd    *exec.Cmd
	log    string
	logF   *os.File
	exited chan struct{}
	err    error // set before exited is closed
	// retired is set before the cluster stops the process on purpose
	// (RestartModelgate): its exit is then no failure.
	retired atomic.Bool
}

// startProcess starts a component, its output appended to log (and copied
// to also, when not nil), with the caller's environment.
func startProcess(name, binary string, args []string, log string, also io.Writer) (*process, error) {
	return startProcessEnv(name, binary, args, nil, log, also)
}

// startProcessEnv is startProcess with the environment env (the caller's
// when nil).
func startProcessEnv(name, binary string, args, env []string, log string, also io.Writer) (*process, error) {
	//nolint:gosec // the log lives in the cluster's own folder.
	f, err := os.OpenFile(log, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening %s's log: %w", name, err)
	}
	cmd := exec.Command(binary, args...) //nolint:gosec // binaries the Makefile built.
	var out io.Writer = f
	if also != nil {
		out = io.MultiWriter(f, also)
	}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("starting %s (%s): %w", name, binary, err)
	}
	p := &process{name: name, cmd: cmd, log: log, logF: f, exited: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		_ = f.Close()
		close(p.exited)
	}()
	return p, nil
}

// Exited is closed when the process has exited.
func (p *process) Exited() <-chan struct{} { return p.exited }

// exitError describes an exit nobody asked for, with the log's last lines.
func (p *process) exitError() error {
	if p.err == nil {
		return fmt.Errorf("%s exited with status 0; last lines of %s:\n%s", p.name, p.log, Tail(p.log, 15))
	}
	return fmt.Errorf("%s exited (%w); last lines of %s:\n%s", p.name, p.err, p.log, Tail(p.log, 15))
}

// stop sends SIGTERM, waits up to stopTimeout, then kills the process
// group. It returns nil when the process exited on SIGTERM.
func (p *process) stop() error {
	select {
	case <-p.exited:
		return nil
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
		return nil
	case <-time.After(stopTimeout):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.exited
		return fmt.Errorf("%s did not exit within %s of SIGTERM: killed", p.name, stopTimeout)
	}
}

// Tail returns the last n lines of a file, or a note that it cannot be read.
func Tail(path string, n int) string {
	b, err := os.ReadFile(filepath.Clean(path))
	if err != nil {
		return "(" + err.Error() + ")"
	}
	lines := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}

// stopAll stops processes at the same time and joins their errors.
func stopAll(ps []*process) error {
	errs := make([]error, len(ps))
	var wg sync.WaitGroup
	for i, p := range ps {
		wg.Go(func() { errs[i] = p.stop() })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Process is a program run beside the cluster (Prometheus), managed as
// the cluster's own components are: in its own process group, killed by
// the kernel if its parent dies, its output in a log file.
type Process struct{ p *process }

// StartProcess starts binary with args, its output written to log.
func StartProcess(name, binary string, args []string, log string) (*Process, error) {
	p, err := startProcess(name, binary, args, log, nil)
	if err != nil {
		return nil, err
	}
	return &Process{p: p}, nil
}

// StartProcessEnv is StartProcess with the environment env (the caller's
// when nil).
func StartProcessEnv(name, binary string, args, env []string, log string) (*Process, error) {
	p, err := startProcessEnv(name, binary, args, env, log, nil)
	if err != nil {
		return nil, err
	}
	return &Process{p: p}, nil
}

// Exited is closed when the process has exited.
func (p *Process) Exited() <-chan struct{} { return p.p.Exited() }

// Stop sends SIGTERM and kills the process group if it has not exited
// within stopTimeout.
func (p *Process) Stop() error { return p.p.stop() }

// WaitHTTPOK polls url until it answers 200; an error, with the log's last
// lines, when the process exits first or timeout passes.
func (p *Process) WaitHTTPOK(ctx context.Context, url string, timeout time.Duration) error {
	return waitHTTPOK(ctx, url, p.p, timeout)
}
