package mutators

import (
	"math"
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/modelgate/modelgate/api/annotations"
)

// How modelgate sizes the warm-up of a model server that does not say.
const (
	// warmupPerExtraGPU is added for every GPU beyond the first that one
	// replica spreads the model over: tensor-parallel workers start one by
	// one, join NCCL groups and capture CUDA graphs per rank, and a model
	// that needs 8 or 16 GPUs is a 70B+ one.
	warmupPerExtraGPU int64 = 120
	// warmupPerGiB is added for every GiB of modelgate.io/model-size: the
	// weights are read from the volume and copied to the GPUs at a few
	// hundred MiB/s on network disks (6 s/GiB is about 170 MiB/s).
	warmupPerGiB int64 = 6
)

// Defaults of a probe's fields that the API server fills in.
const (
	defaultProbePeriod    int64 = 10
	defaultProbeThreshold int64 = 3
)

// StartupBudget is how many seconds the serving container's startup probe
// lets the engine take to start: the larger of
//
//   - the warm-up: modelgate.io/warmup-timeout (the object's or its
//     profile's); when neither sets it, the default (300 s) raised for what
//     the pod declares: 300 + 120 s per GPU beyond the first (its GPU
//     limit, or the tensor x pipeline parallel size on the engine's command
//     line), or 300 + 6 s per GiB of modelgate.io/model-size, whichever is
//     larger;
//   - what the container's own probes already allow before they act: a
//     liveness probe's initialDelaySeconds plus periodSeconds times
//     failureThreshold (when it would first kill the container), a
//     readiness probe's initialDelaySeconds (when its author expects the
//     engine up). A startup probe holds those probes back until it passes,
//     so a shorter budget would kill an engine its author gave longer.
//
// The result is capped at annotations.MaxWarmupTimeoutSeconds.
func StartupBudget(c *corev1.Container, in *Input) int32 {
	s := in.Settings
	warmup := int64(s.Serving.WarmupTimeoutSeconds)
	if warmup <= 0 {
		warmup = annotations.DefaultWarmupTimeoutSeconds
	}
	if !s.Set(annotations.WarmupTimeout) {
		warmup = max(warmup, derivedWarmup(c, in))
	}
	budget := warmup
	if p := c.LivenessProbe; p != nil {
		budget = max(budget, int64(p.InitialDelaySeconds)+orDefault(p.PeriodSeconds, defaultProbePeriod)*orDefault(p.FailureThreshold, defaultProbeThreshold))
	}
	if p := c.ReadinessProbe; p != nil && !in.Previous.Owned(part(partReadinessProbe, c.Name)) {
		budget = max(budget, int64(p.InitialDelaySeconds))
	}
	return int32(min(budget, annotations.MaxWarmupTimeoutSeconds, math.MaxInt32))
}

// derivedWarmup is the default warm-up raised for the GPUs and the model
// size the pod declares.
func derivedWarmup(c *corev1.Container, in *Input) int64 {
	base := int64(annotations.DefaultWarmupTimeoutSeconds)
	gpus := engineGPUs(c, in.Settings.Serving.Engine)
	if in.Options != nil {
		if q, ok := c.Resources.Limits[in.Options.GPU.ResourceName]; ok {
			gpus = max(gpus, q.Value())
		}
		// Under DRA the count is the claim's, which modelgate gave the
		// serving container.
		if slices.ContainsFunc(c.Resources.Claims, isGPUClaim) && allocation(in) == annotations.AllocationDRA {
			gpus = max(gpus, in.Settings.GPU.Count)
		}
	}
	byGPU := base + warmupPerExtraGPU*max(gpus-1, 0)
	bySize := base
	if m := in.Settings.Model; m != nil && m.Size != nil {
		gib := (m.Size.Value() + 1<<30 - 1) >> 30
		bySize = base + warmupPerGiB*min(gib, math.MaxInt32)
	}
	return max(byGPU, bySize)
}

func orDefault(v int32, def int64) int64 {
	if v <= 0 {
		return def
	}
	return int64(v)
}
