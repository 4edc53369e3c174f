package main

import (
	"errors"
	"fmt"
	"math"
	"slices"
)

// errBucketMismatch is returned when two histograms with different bucket
// bounds are added or subtracted.
var errBucketMismatch = errors.New("histograms have different bucket bounds")

// bucket is one cumulative histogram bucket: how many observations were
// less than or equal to upper.
type bucket struct {
	upper float64
	count float64
}

// histogram is a Prometheus classic histogram: cumulative buckets in
// ascending order of their upper bounds, the last one +Inf. The zero value
// is empty (no buckets, no observations) and adds to or subtracts from any
// histogram.
type histogram struct {
	buckets []bucket
	count   float64
	sum     float64
}

// newHistogram builds a histogram from cumulative buckets in any order,
// adding the +Inf bucket (count observations) when it is missing.
func newHistogram(buckets []bucket, count, sum float64) histogram {
	b := slices.Clone(buckets)
	slices.SortFunc(b, func(x, y bucket) int {
		switch {
		case x.upper < y.upper:
			return -1
		case x.upper > y.upper:
			return 1
		}
		return 0
	})
	if len(b) == 0 || !math.IsInf(b[len(b)-1].upper, 1) {
		b = append(b, bucket{upper: math.Inf(1), count: count})
	}
	return histogram{buckets: b, count: count, sum: sum}
}

// empty reports whether the histogram has no buckets (no series matched).
func (h histogram) empty() bool { return len(h.buckets) == 0 }

// bounds returns the buckets' upper bounds.
func (h histogram) bounds() []float64 {
	out := make([]float64, len(h.buckets))
	for i, b := range h.buckets {
		out[i] = b.upper
	}
	return out
}

// combine returns h + sign*o bucket by bucket; both must have the same
// bounds unless one is empty.
func (h histogram) combine(o histogram, sign float64) (histogram, error) {
	switch {
	case o.empty():
		return h, nil
	case h.empty():
		h = histogram{buckets: make([]bucket, len(o.buckets))}
		for i, b := range o.buckets {
			h.buckets[i].upper = b.upper
		}
	case !slices.Equal(h.bounds(), o.bounds()):
		return histogram{}, fmt.Errorf("%w: %v and %v", errBucketMismatch, h.bounds(), o.bounds())
	}
	out := histogram{buckets: make([]bucket, len(h.buckets)), count: h.count + sign*o.count, sum: h.sum + sign*o.sum}
	for i := range h.buckets {
		out.buckets[i] = bucket{upper: h.buckets[i].upper, count: h.buckets[i].count + sign*o.buckets[i].count}
	}
	return out, nil
}

// add returns the sum of two histograms: merged series, or pooled rounds.
func (h histogram) add(o histogram) (histogram, error) { return h.combine(o, 1) }

// sub returns what was observed between before and h, two scrapes of the
// same series. A count that went down means the series was reset (the
// process restarted), which makes the difference meaningless.
func (h histogram) sub(before histogram) (histogram, error) {
	d, err := h.combine(before, -1)
	if err != nil {
		return histogram{}, err
	}
	if d.count < 0 {
		return histogram{}, fmt.Errorf("observations went down from %g to %g: the series was reset", before.count, h.count)
	}
	for _, b := range d.buckets {
		if b.count < 0 {
			return histogram{}, fmt.Errorf("bucket le=%g went down: the series was reset", b.upper)
		}
	}
	return d, nil
}

// estimate is a quantile estimated from a histogram: value, and the bounds
// of the bucket it fell in (lower exclusive, upper inclusive). ok is false
// when there were no observations.
type estimate struct {
	value, lower, upper float64
	ok                  bool
}

// quantile estimates the q-quantile (0 <= q <= 1) as Prometheus's
// histogram_quantile does: find the bucket holding the observation of rank
// q*count and interpolate linearly within it, taking 0 as the lower bound
// of the first bucket (when its upper bound is positive). A quantile in the
// +Inf bucket is the highest finite upper bound, as in Prometheus; its
// estimate's upper is +Inf, saying the true value is above.
func (h histogram) quantile(q float64) estimate {
	b := coalesce(h.buckets)
	if len(b) < 2 || !math.IsInf(b[len(b)-1].upper, 1) || q < 0 || q > 1 {
		return estimate{}
	}
	// Counts are cumulative; rounding and scrapes of a live series may
	// leave a bucket below the one before it, which Prometheus also fixes.
	for i := 1; i < len(b); i++ {
		if b[i].count < b[i-1].count {
			b[i].count = b[i-1].count
		}
	}
	total := b[len(b)-1].count
	if total <= 0 {
		return estimate{}
	}
	rank := q * total
	i, _ := slices.BinarySearchFunc(b[:len(b)-1], rank, func(x bucket, r float64) int {
		if x.count >= r {
			return 1
		}
		return -1
	})
	if i == len(b)-1 {
		top := b[len(b)-2].upper
		return estimate{value: top, lower: top, upper: math.Inf(1), ok: true}
	}
	if i == 0 && b[0].upper <= 0 {
		return estimate{value: b[0].upper, lower: math.Inf(-1), upper: b[0].upper, ok: true}
	}
	start, end, count := 0.0, b[i].upper, b[i].count
	if i > 0 {
		start = b[i-1].upper
		count -= b[i-1].count
		rank -= b[i-1].count
	}
	if count <= 0 { // q = 0 and an empty first bucket
		return estimate{value: start, lower: start, upper: end, ok: true}
	}
	return estimate{value: start + (end-start)*(rank/count), lower: start, upper: end, ok: true}
}

// coalesce returns a copy of the buckets with duplicate upper bounds merged
// (the larger count kept), as Prometheus does for series that differed only
// in the formatting of le.
func coalesce(in []bucket) []bucket {
	out := make([]bucket, 0, len(in))
	for _, b := range in {
		if n := len(out); n > 0 && out[n-1].upper == b.upper {
			out[n-1].count = max(out[n-1].count, b.count)
			continue
		}
		out = append(out, b)
	}
	return out
}
