package cluster

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The machine's paths the kubelet and containerd write to whatever they
// are told, which the real node owns while it holds the node lock.
var machinePaths = []string{devicePluginDir, containerLogLinks, "/run/containerd", "/var/lib/cni", "/run/netns", nodeRunDir}

// stateDirs are the folders, in the node's folder, that Stop removes.
var stateDirs = []string{"kubelet", "containerd", cdiSubdir}

// nodeFootprint is everything the real node may leave on the machine:
// its own folder, the machine paths and the kubepods cgroups.
//
// Of its own folder, stateDirs are removed (the rest is configuration and
// logs): the kubelet's root (with the DRA plugin's sockets), containerd's
// root, and the CDI specs the DRA plugin wrote.
type nodeFootprint struct {
	// dir is the node's folder (kubelet root, containerd root, logs).
	dir string
	// binaries are the node's programs, by path, to find its processes.
	binaries []string
}

// newNodeFootprint is the footprint of the node in dir running bins. The
// binaries are kept by their real paths, which is how /proc/<pid>/exe
// names them: bin/k8s or bin/node may be links (a worktree sharing
// another's builds).
func newNodeFootprint(dir string, bins nodeBinaries) nodeFootprint {
	f := nodeFootprint{dir: dir}
	for _, b := range []string{bins.kubelet, bins.containerd, bins.shim} {
		if real, err := filepath.EvalSymlinks(b); err == nil {
			b = real
		}
		f.binaries = append(f.binaries, b)
	}
	return f
}

// mountPrefixes are the trees under which the node mounts: its folder
// (the kubelet's root, bind-mounted onto itself, volumes, containerd's
// snapshots and rootfs) and the machine's run-time folders.
func (f nodeFootprint) mountPrefixes() []string {
	return []string{f.dir, nodeRunDir, "/run/containerd", "/var/lib/kubelet", "/run/netns"}
}

// clean ends every process of the node, unmounts what it mounted,
// removes its cgroups and the machine paths, and returns what it could
// not remove. The node's own folder is left for its logs; its mounts are
// gone.
func (f nodeFootprint) clean() error {
	var errs []error
	// Containers first (SIGTERM, then SIGKILL), then the node's own
	// programs: shims, containerd, kubelet.
	errs = append(errs, killAll(containerProcesses, 5*time.Second))
	errs = append(errs, killAll(f.programProcesses, 5*time.Second))
	errs = append(errs, unmountUnder(f.mountPrefixes()))
	errs = append(errs, removeCgroups())
	for _, p := range machinePaths {
		if err := os.RemoveAll(p); err != nil {
			errs = append(errs, fmt.Errorf("removing %s: %w", p, err))
		}
	}
	// What the kubelet made of /var/lib/kubelet beside device-plugins.
	_ = os.Remove("/var/lib/kubelet")
	for _, d := range stateDirs {
		if err := os.RemoveAll(filepath.Join(f.dir, d)); err != nil {
			errs = append(errs, fmt.Errorf("removing %s: %w", d, err))
		}
	}
	return errors.Join(errs...)
}

// leftovers lists what the node left: processes, mounts, cgroups and
// machine paths. Empty after clean.
func (f nodeFootprint) leftovers() []string {
	var out []string
	for _, pid := range containerProcesses() {
		out = append(out, "process "+describePID(pid)+" in a kubepods cgroup")
	}
	for _, pid := range f.programProcesses() {
		out = append(out, "process "+describePID(pid))
	}
	for _, m := range mountsUnder(f.mountPrefixes()) {
		out = append(out, "mount "+m)
	}
	for _, c := range kubepodsCgroups() {
		out = append(out, "cgroup "+c)
	}
	out = append(out, podNetworkLeftovers()...)
	paths := slices.Clone(machinePaths)
	for _, d := range stateDirs {
		paths = append(paths, filepath.Join(f.dir, d))
	}
	for _, p := range paths {
		if _, err := os.Lstat(p); err == nil {
			out = append(out, "path "+p)
		}
	}
	return out
}

// pids lists the processes of the machine but this one (none when /proc
// cannot be read).
func pids() []int {
	all, _ := PIDs()
	self := os.Getpid()
	return slices.DeleteFunc(all, func(pid int) bool { return pid == self })
}

// containerProcesses are the processes in a kubepods cgroup: containers
// and sandboxes.
func containerProcesses() []int {
	var out []int
	for _, pid := range pids() {
		b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cgroup"))
		if err == nil && strings.Contains(string(b), "/kubepods") {
			out = append(out, pid)
		}
	}
	return out
}

// programProcesses are the processes running one of the node's binaries
// (the kubelet, containerd, its shims).
func (f nodeFootprint) programProcesses() []int {
	var out []int
	for _, pid := range pids() {
		exe, err := os.Readlink(filepath.Join("/proc", strconv.Itoa(pid), "exe"))
		if err == nil && slices.Contains(f.binaries, strings.TrimSuffix(exe, " (deleted)")) {
			out = append(out, pid)
		}
	}
	return out
}

func describePID(pid int) string {
	comm, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "comm"))
	return strconv.Itoa(pid) + " (" + strings.TrimSpace(string(comm)) + ")"
}

// killAll sends SIGTERM to the processes list returns, waits up to grace
// for them to go, then SIGKILLs what is left and waits for it.
func killAll(list func() []int, grace time.Duration) error {
	for _, pid := range list() {
		_ = syscall.Kill(pid, syscall.SIGTERM)
	}
	deadline := time.Now().Add(grace)
	for len(list()) > 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	for _, pid := range list() {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	deadline = time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		left := list()
		if len(left) == 0 {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	var left []string
	for _, pid := range list() {
		left = append(left, describePID(pid))
	}
	if len(left) == 0 {
		return nil
	}
	return fmt.Errorf("processes that do not end: %s", strings.Join(left, ", "))
}

// mountsUnder lists the mount points under any of prefixes, deepest first.
func mountsUnder(prefixes []string) []string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		mp := unescapeMount(fields[4])
		for _, p := range prefixes {
			if mp == p || strings.HasPrefix(mp, p+"/") {
				out = append(out, mp)
				break
			}
		}
	}
	// Deepest first; a path mounted twice is listed twice, to be
	// unmounted twice.
	slices.SortStableFunc(out, func(a, b string) int { return strings.Count(b, "/") - strings.Count(a, "/") })
	return out
}

// unescapeMount decodes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// unmountUnder unmounts (lazily, so a busy mount goes once unused) every
// mount under prefixes, until none is left.
func unmountUnder(prefixes []string) error {
	for range 10 {
		ms := mountsUnder(prefixes)
		if len(ms) == 0 {
			return nil
		}
		for _, m := range ms {
			_ = syscall.Unmount(m, syscall.MNT_DETACH)
		}
	}
	if ms := mountsUnder(prefixes); len(ms) > 0 {
		return fmt.Errorf("mounts that do not go: %s", strings.Join(ms, ", "))
	}
	return nil
}

// cgroupRoots are the cgroup hierarchies' roots: the unified one, or each
// v1 hierarchy.
func cgroupRoots() []string {
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		return []string{"/sys/fs/cgroup"}
	}
	entries, err := os.ReadDir("/sys/fs/cgroup")
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range entries {
		dir := filepath.Join("/sys/fs/cgroup", e.Name())
		if st, err := os.Lstat(dir); err == nil && st.IsDir() {
			out = append(out, dir)
		}
	}
	return out
}

// kubepodsCgroups lists the kubelet's top cgroups (kubepods, and its
// kubepods.slice with the systemd driver) in every hierarchy.
func kubepodsCgroups() []string {
	var out []string
	for _, root := range cgroupRoots() {
		for _, n := range []string{"kubepods", "kubepods.slice"} {
			if _, err := os.Stat(filepath.Join(root, n)); err == nil {
				out = append(out, filepath.Join(root, n))
			}
		}
	}
	return out
}

// removeCgroups removes the kubepods cgroups, children first; a cgroup
// whose last process has just died may be busy for a moment.
func removeCgroups() error {
	var last error
	for range 50 {
		last = nil
		for _, top := range kubepodsCgroups() {
			var dirs []string
			_ = filepath.WalkDir(top, func(path string, d fs.DirEntry, err error) error {
				if err == nil && d.IsDir() {
					dirs = append(dirs, path)
				}
				return nil
			})
			slices.Reverse(dirs)
			for _, d := range dirs {
				if err := syscall.Rmdir(d); err != nil && !errors.Is(err, syscall.ENOENT) {
					last = fmt.Errorf("removing cgroup %s: %w", d, err)
				}
			}
		}
		if last == nil && len(kubepodsCgroups()) == 0 {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return last
}
