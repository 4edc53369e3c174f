// Package kubelet is a stand-in for the one part of a kubelet that kwok
// does not play: running a container. Run takes a Pod admitted through the
// API server (so with modelgate's injection in it) and runs one of its
// containers, typically the injected model-loader init container, as a
// local process, the way a kubelet and its container runtime would start
// it:
//
//   - the command and args, with $(VAR) references expanded as the kubelet
//     expands them; the image is not pulled: Options.Binaries maps the
//     command (a path in the image, such as /modelgate) to a local binary;
//   - the environment the kubelet builds, in its order of precedence:
//     envFrom Secrets and ConfigMaps read through the API (optional ones
//     may be missing), then env (values with $(VAR) expanded, valueFrom
//     secretKeyRef, configMapKeyRef and fieldRef); the runtime's HOSTNAME
//     below it, and nothing of the test process's own environment;
//   - the volumes: every volume of the Pod is a host directory under
//     Options.Dir (see [Result.Volumes]), with subPath and subPathExpr;
//   - the Pod's host name: where the test may create a UTS namespace (as
//     root on Linux), the process runs in its own, named after the Pod as
//     the kubelet names it, so that loaders of two Pods on one machine tell
//     each other apart as they would on two nodes (see [CanSetHostname]);
//   - the termination message, read as the kubelet reads it (see below).
//
// # Paths
//
// There is no mount namespace: the process sees the host's file system.
// Paths as the container sees them are therefore translated before the
// process starts: an argument or an environment value that is a path
// under a volume mount (equal to the mount path, or below it), or an
// argument of the form -flag=<such a path>, is rewritten to the host
// directory of that mount, the longest mount path first. Nothing else is
// translated: a path the program builds at run time from a container path
// it read elsewhere would point at the host's root, and a symbolic link
// with an absolute target points into the host's file system. HostPath
// translates a path of any container of the Pod the same way, for a test
// to look at what the container would see.
//
// Read-only mounts are recorded, not enforced, and neither are sizeLimit,
// resources (the peak RSS is measured instead: compare it with the
// container's memory limit), the security context or the image's file
// system (the working directory is an empty directory of its own unless
// the container names one under a mount).
//
// # Termination message
//
// The kubelet creates an empty file for each container and bind-mounts it
// at terminationMessagePath (default /dev/termination-log); what the
// container writes there is its termination message. The stand-in creates
// that file on the host, but cannot mount it: for modelgate's loader
// (command <...>/modelgate load), whose --termination-log flag names the
// file it writes, and writes only if it already exists, it appends
// --termination-log=<the host file> when the loader would have written to
// terminationMessagePath. Any other program writes no message. The message
// is then read as the kubelet reads it: at most 4096 bytes, and, with
// terminationMessagePolicy FallbackToLogsOnError, a failed container
// without a message gets the last 80 lines (at most 2048 bytes) of its
// output.
//
// Not done: service environment variables (KUBERNETES_SERVICE_HOST, and
// the Pod's namespace's Services with enableServiceLinks), resourceFieldRef
// and fileKeyRef, volumes other than emptyDir, persistentVolumeClaim,
// configMap and secret, probes, restarts and sidecars.
package kubelet

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Options configure Run.
type Options struct {
	// Dir holds the volumes, termination message files and working
	// directories (see Result.Volumes). Runs sharing a Dir share their
	// Pods' emptyDirs (by Pod UID) and claims (by namespace and name).
	Dir string
	// Binaries maps a command as the container names it (the path in its
	// image, such as "/modelgate") to the local binary to run (such as
	// "bin/modelgate"). A command that is not mapped is an error.
	Binaries map[string]string
	// Env stands for the image's own environment (NAME=value): the
	// container's environment overrides it, as the runtime's does. It is
	// empty by default; the process inherits nothing from the test.
	// Endpoints and credentials belong in the Pod's Secrets, as a user
	// puts them, not here.
	Env []string
	// Timeout, when positive, kills the process (its process group) after
	// this long.
	Timeout time.Duration
	// Output, when set, also receives the process's output as it comes
	// (Result.Output keeps its end).
	Output io.Writer
}

// Result is what a container's run left.
type Result struct {
	// ExitCode is the process's exit status; 128+n when signal n ended it,
	// as container runtimes report it.
	ExitCode int
	// Message is the termination message, as the kubelet would put it in
	// the container's terminated state.
	Message string
	// Output is the combined standard output and error: all of it, or its
	// last MaxOutput bytes (OutputDropped says how many came before).
	Output        []byte
	OutputDropped int64
	// PeakRSS is the process's maximum resident set size, in bytes (its
	// rusage).
	PeakRSS int64
	// Duration is the time from start to exit.
	Duration time.Duration
	// Hostname is the host name the process ran with: the Pod's host name
	// when the stand-in could set it (CanSetHostname), else the machine's.
	Hostname string
	// Volumes maps each volume of the Pod the stand-in provides to its host
	// directory:
	//
	//	emptyDir              <Dir>/pods/<pod UID>/volumes/kubernetes.io~empty-dir/<volume>
	//	configMap, secret     <Dir>/pods/<pod UID>/volumes/kubernetes.io~configmap/<volume> (~secret)
	//	persistentVolumeClaim <Dir>/claims/<namespace>/<claim>, shared by every Pod on the claim
	Volumes map[string]string
	// Mounts are the container's mounts as run (longest mount path first).
	Mounts []Mount
}

// Mount is a container's volume mount and the host directory behind it.
type Mount struct {
	// Path is the mount path in the container, cleaned.
	Path string
	// Host is the host directory: the volume's, with the sub path.
	Host string
	// ReadOnly is the mount's readOnly: recorded, not enforced.
	ReadOnly bool
}

// MaxOutput is how much of a process's output Result.Output keeps.
const MaxOutput = 1 << 20

// The kubelet's bounds on termination messages (pkg/kubelet/container).
const (
	maxMessage         = 4 << 10
	maxFallbackMessage = 2 << 10
	maxFallbackLines   = 80
)

// ErrNotMounted is returned by HostPath for a path under no mount of the
// container: it would be in the image, which the stand-in does not have.
var ErrNotMounted = errors.New("not under a volume mount of the container")

// Run runs a container (or init container) of pod as a local process and
// returns its result. c reads the Secrets and ConfigMaps the container and
// its volumes name. A container that exits non-zero is a Result, not an
// error; an error means the container could not be started as a kubelet
// would start it (a missing Secret, an unmapped command), or did not end
// within Options.Timeout or ctx (then the Result is returned too).
func Run(ctx context.Context, c client.Reader, pod *corev1.Pod, container string, o Options) (*Result, error) {
	ctr, err := findContainer(pod, container)
	if err != nil {
		return nil, err
	}
	if o.Dir == "" {
		return nil, errors.New("kubelet: Options.Dir must be set")
	}
	if pod.UID == "" {
		return nil, fmt.Errorf("pod %s has no UID: run Pods read from the API server", pod.Name)
	}
	env, err := containerEnv(ctx, c, pod, ctr)
	if err != nil {
		return nil, fmt.Errorf("container %q of pod %s: %w", ctr.Name, pod.Name, err)
	}
	vols, err := setUpVolumes(ctx, c, pod, o.Dir)
	if err != nil {
		return nil, fmt.Errorf("pod %s: %w", pod.Name, err)
	}
	mounts, err := containerMounts(ctr, vols, env)
	if err != nil {
		return nil, fmt.Errorf("container %q of pod %s: %w", ctr.Name, pod.Name, err)
	}
	for _, m := range mounts {
		if err := os.MkdirAll(m.Host, 0o750); err != nil {
			return nil, fmt.Errorf("mount %s of container %q: %w", m.Path, ctr.Name, err)
		}
	}
	argv := expandCommand(ctr, env)
	if len(argv) == 0 {
		return nil, fmt.Errorf("container %q of pod %s has no command: the image's entrypoint is unknown to the stand-in", ctr.Name, pod.Name)
	}
	bin, ok := o.Binaries[argv[0]]
	if !ok {
		return nil, fmt.Errorf("container %q of pod %s runs %q, which Options.Binaries does not map to a local binary", ctr.Name, pod.Name, argv[0])
	}
	args := make([]string, 0, len(argv))
	for _, a := range argv[1:] {
		args = append(args, translateArg(a, mounts))
	}

	cdir := filepath.Join(podDir(o.Dir, pod), "containers", ctr.Name)
	if err := os.MkdirAll(cdir, 0o750); err != nil {
		return nil, err
	}
	// The kubelet's file behind terminationMessagePath: new and empty for
	// each start.
	msgFile := filepath.Join(cdir, fmt.Sprintf("termination-log-%d", time.Now().UnixNano()))
	if err := os.WriteFile(msgFile, nil, 0o600); err != nil {
		return nil, err
	}
	if isModelgateLoader(argv) && loaderMessageTarget(argv) == messagePath(ctr) {
		args = append(args, "--termination-log="+msgFile)
	}
	workDir, err := workingDir(ctr, mounts, cdir)
	if err != nil {
		return nil, fmt.Errorf("container %q of pod %s: %w", ctr.Name, pod.Name, err)
	}

	hostname := podHostname(pod)
	procEnv := mergeEnv(o.Env, []string{"HOSTNAME=" + hostname}, envStrings(env, mounts))
	res := &Result{Volumes: vols.hostDirs(), Mounts: mounts}
	runErr := runProcess(ctx, process{
		binary: bin, args: args, env: procEnv, dir: workDir,
		hostname: hostname, timeout: o.Timeout, output: o.Output,
	}, res)
	res.Message, err = readMessage(msgFile, ctr, res)
	if err != nil {
		return res, errors.Join(runErr, err)
	}
	if runErr != nil {
		return res, fmt.Errorf("container %q of pod %s: %w", ctr.Name, pod.Name, runErr)
	}
	return res, nil
}

// findContainer returns the init container or container of that name.
func findContainer(pod *corev1.Pod, name string) (*corev1.Container, error) {
	for _, list := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range list {
			if list[i].Name == name {
				return &list[i], nil
			}
		}
	}
	return nil, fmt.Errorf("pod %s has no container or init container %q", pod.Name, name)
}

// podHostname is the host name the kubelet gives a Pod's containers:
// spec.hostname, else the Pod's name cut to 63 characters without a
// trailing '-' or '.'.
func podHostname(pod *corev1.Pod) string {
	if pod.Spec.Hostname != "" {
		return pod.Spec.Hostname
	}
	h := pod.Name
	if len(h) > 63 {
		h = strings.TrimRight(h[:63], "-.")
	}
	return h
}

// isModelgateLoader reports whether the command is modelgate's loader:
// a binary named modelgate running its load subcommand.
func isModelgateLoader(argv []string) bool {
	return len(argv) >= 2 && path.Base(argv[0]) == "modelgate" && argv[1] == "load"
}

// loaderDefaultMessagePath is where modelgate's loader writes its outcome
// without --termination-log.
const loaderDefaultMessagePath = "/dev/termination-log"

// loaderMessageTarget is the file the loader writes its outcome to: the
// last --termination-log flag, or its default.
func loaderMessageTarget(argv []string) string {
	target := loaderDefaultMessagePath
	for i := 2; i < len(argv); i++ {
		a := argv[i]
		if a == "--" {
			break
		}
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "-") || name != "termination-log" {
			continue
		}
		if !hasValue && i+1 < len(argv) {
			i++
			value = argv[i]
		}
		target = value
	}
	return target
}

// messagePath is the container's terminationMessagePath, defaulted.
func messagePath(c *corev1.Container) string {
	if c.TerminationMessagePath == "" {
		return corev1.TerminationMessagePathDefault
	}
	return c.TerminationMessagePath
}

// readMessage reads the termination message as the kubelet does.
func readMessage(file string, c *corev1.Container, r *Result) (string, error) {
	f, err := os.Open(file) //nolint:gosec // the stand-in's own file.
	if err != nil {
		return "", fmt.Errorf("reading the termination message: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxMessage))
	if err != nil {
		return "", fmt.Errorf("reading the termination message: %w", err)
	}
	if len(b) == 0 && r.ExitCode != 0 && c.TerminationMessagePolicy == corev1.TerminationMessageFallbackToLogsOnError {
		return fallbackMessage(r.Output), nil
	}
	return string(b), nil
}

// fallbackMessage is the end of a failed container's log that the kubelet
// uses as its message: the last 80 lines, at most 2048 bytes.
func fallbackMessage(out []byte) string {
	lines := strings.SplitAfter(string(out), "\n")
	if n := len(lines); n > 0 && lines[n-1] == "" {
		lines = lines[:n-1]
	}
	if len(lines) > maxFallbackLines {
		lines = lines[len(lines)-maxFallbackLines:]
	}
	s := strings.Join(lines, "")
	if len(s) > maxFallbackMessage {
		s = s[len(s)-maxFallbackMessage:]
	}
	return s
}

// workingDir is the container's working directory on the host: its
// workingDir when that is under a mount, else an empty directory of its
// own standing for the image's.
func workingDir(c *corev1.Container, mounts []Mount, cdir string) (string, error) {
	if c.WorkingDir != "" {
		if h, ok := translate(c.WorkingDir, mounts); ok {
			return h, nil
		}
	}
	dir := filepath.Join(cdir, "rootfs")
	return dir, os.MkdirAll(dir, 0o750)
}

// mergeEnv merges NAME=value lists, later lists winning, keeping the
// position of a name's first appearance.
func mergeEnv(lists ...[]string) []string {
	var out []string
	at := map[string]int{}
	for _, l := range lists {
		for _, kv := range l {
			name, _, _ := strings.Cut(kv, "=")
			if i, ok := at[name]; ok {
				out[i] = kv
				continue
			}
			at[name] = len(out)
			out = append(out, kv)
		}
	}
	return out
}
