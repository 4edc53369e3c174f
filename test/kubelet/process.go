package kubelet

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// process is what runProcess starts.
type process struct {
	binary   string
	args     []string
	env      []string
	dir      string
	hostname string
	timeout  time.Duration
	output   io.Writer
}

// CanSetHostname reports whether Run gives each process the host name of
// its Pod. That takes a UTS namespace, which needs CAP_SYS_ADMIN (root).
// Without it, processes run with the machine's host name: two Pods'
// processes then share one, which programs that tell Pods apart by host
// name (modelgate's loader on a shared cache) take for a restart of the
// same Pod.
func CanSetHostname() bool {
	utsOnce.Do(func() {
		utsOK, _ = inUTSNamespace("", func() error { return nil })
	})
	return utsOK
}

var (
	utsOnce sync.Once
	utsOK   bool
)

// inUTSNamespace calls start on an OS thread of its own that is, for the
// call, in a new UTS namespace with the given host name (kept when
// empty): a process started there inherits that namespace, while the
// rest of the test process keeps its own. ok says whether the namespace
// could be made (else start ran with the machine's host name).
//
// The thread then goes back to its namespace and to the Go runtime's pool.
// It must not end: a process started with Pdeathsig (the cluster's
// components, the processes Run starts) is killed when the thread that
// started it ends. In the unexpected case that it cannot go back, it is
// parked for good rather than ended or reused.
func inUTSNamespace(hostname string, start func() error) (ok bool, err error) {
	type outcome struct {
		ok  bool
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := os.Open(fmt.Sprintf("/proc/self/task/%d/ns/uts", unix.Gettid()))
		if err != nil {
			runtime.UnlockOSThread()
			done <- outcome{false, start()}
			return
		}
		defer orig.Close()
		if err := unix.Unshare(unix.CLONE_NEWUTS); err != nil {
			runtime.UnlockOSThread()
			done <- outcome{false, start()}
			return
		}
		var o outcome
		if hostname != "" {
			if err := unix.Sethostname([]byte(hostname)); err != nil {
				o.err = fmt.Errorf("setting the host name %q: %w", hostname, err)
			}
		}
		if o.err == nil {
			o = outcome{true, start()}
		}
		if err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWUTS); err != nil {
			done <- o
			select {} // see above: never ended, never reused
		}
		runtime.UnlockOSThread()
		done <- o
	}()
	o := <-done
	return o.ok, o.err
}

// runProcess runs p to its end and fills in r's exit code, output, peak
// RSS, duration and host name. The process starts in a UTS namespace of
// its own named after the Pod, where the test may make one.
func runProcess(ctx context.Context, p process, r *Result) error {
	if p.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, p.timeout)
		defer cancel()
	}
	out := &tailBuffer{max: MaxOutput}
	var w io.Writer = out
	if p.output != nil {
		w = io.MultiWriter(out, p.output)
	}
	cmd := exec.CommandContext(ctx, p.binary, p.args...) //nolint:gosec // the binary the test mapped.
	cmd.Env = append([]string{}, p.env...)               // never nil: nothing inherited
	cmd.Dir = p.dir
	cmd.Stdout, cmd.Stderr = w, w
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	start := time.Now()
	own, err := inUTSNamespace(p.hostname, cmd.Start)
	if err != nil {
		return fmt.Errorf("starting %s: %w", p.binary, err)
	}
	r.Hostname = p.hostname
	if !own {
		r.Hostname, _ = os.Hostname()
	}
	err = cmd.Wait()
	r.Duration = time.Since(start)
	// Any stragglers of the process group go with it, as with a
	// container's.
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	if st := cmd.ProcessState; st != nil {
		r.ExitCode = exitCode(st)
		if ru, ok := st.SysUsage().(*syscall.Rusage); ok {
			r.PeakRSS = ru.Maxrss * 1024 // KiB on Linux
		}
	}
	r.Output, r.OutputDropped = out.bytes()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return fmt.Errorf("killed: %w", context.Cause(ctx))
	case errors.As(err, &exit):
		return nil
	}
	return err
}

// exitCode is the status a container runtime reports: the exit code, or
// 128 plus the signal that ended the process.
func exitCode(st *os.ProcessState) int {
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return st.ExitCode()
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu      sync.Mutex
	max     int
	buf     []byte
	dropped int64
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.dropped += int64(over)
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) bytes() ([]byte, int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]byte(nil), t.buf...), t.dropped
}
