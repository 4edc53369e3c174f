package cluster

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// PIDs lists the machine's processes, from /proc.
func PIDs() ([]int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var out []int
	for _, e := range entries {
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			out = append(out, pid)
		}
	}
	return out, nil
}

// Descendants returns every process below pid, by pid, with its command
// name (/proc's comm, cut to 15 characters), from /proc: what `make run`
// started, for a test to check that none outlives it.
func Descendants(pid int) (map[int]string, error) {
	all, err := PIDs()
	if err != nil {
		return nil, err
	}
	parent, comm := map[int]int{}, map[int]string{}
	for _, p := range all {
		ppid, name, ok := procStat(p)
		if !ok {
			continue // gone meanwhile
		}
		parent[p], comm[p] = ppid, name
	}
	out := map[int]string{}
	for p := range parent {
		for a := parent[p]; a > 1; a = parent[a] {
			if a == pid {
				out[p] = comm[p]
				break
			}
		}
	}
	return out, nil
}

// Alive reports whether a process exists and is not a zombie.
func Alive(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil {
		return false
	}
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(fields) > 0 && fields[0] != "Z"
}

// procStat reads a process's parent and command name from
// /proc/<pid>/stat: "pid (comm) state ppid ...", where comm may hold
// spaces and parentheses.
func procStat(pid int) (ppid int, comm string, ok bool) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0, "", false
	}
	s := string(b)
	open, closing := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || closing < open {
		return 0, "", false
	}
	fields := strings.Fields(s[closing+1:])
	if len(fields) < 2 {
		return 0, "", false
	}
	ppid, err = strconv.Atoi(fields[1])
	if err != nil {
		return 0, "", false
	}
	return ppid, s[open+1 : closing], true
}
