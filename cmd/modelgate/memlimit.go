package main

import (
	"fmt"
	"runtime/debug"
	"strconv"
)

// memoryLimitEnv is the variable the manager's Deployment fills with the
// container's memory limit, in bytes (resourceFieldRef limits.memory).
const memoryLimitEnv = "MODELGATE_MEMORY_LIMIT"

// memoryLimitShare is the part of the container's memory limit the Go
// runtime aims to stay under: the rest is room for what the runtime does
// limit (goroutine stacks, the binary's own pages, memory the runtime has
// yet to return to the kernel).
const memoryLimitShare = 0.9

// setMemoryLimit makes the Go runtime collect garbage harder as the
// process nears the container's memory limit, instead of being killed at
// it: GOMEMLIMIT when the environment sets it (the runtime has read it
// already), else 90% of MODELGATE_MEMORY_LIMIT. It returns the limit set,
// 0 for none, and a description for the log.
func setMemoryLimit(getenv func(string) string) (int64, string, error) {
	if v := getenv("GOMEMLIMIT"); v != "" {
		return debug.SetMemoryLimit(-1), "GOMEMLIMIT=" + v, nil
	}
	v := getenv(memoryLimitEnv)
	if v == "" {
		return 0, "none: neither GOMEMLIMIT nor " + memoryLimitEnv + " is set", nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n <= 0 {
		return 0, "", fmt.Errorf("%s=%q must be the container's memory limit in bytes", memoryLimitEnv, v)
	}
	limit := int64(float64(n) * memoryLimitShare)
	debug.SetMemoryLimit(limit)
	return limit, fmt.Sprintf("90%% of %s=%d", memoryLimitEnv, n), nil
}
