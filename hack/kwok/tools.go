//go:build tools

// Package kwok records the command this module builds: kwok, the node and
// pod-lifecycle simulator.
package kwok

import (
	_ "sigs.k8s.io/kwok/cmd/kwok"
)
