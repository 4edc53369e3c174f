package main

import (
	"errors"
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

var inf = math.Inf(1)

// hist builds a histogram from (upper bound, cumulative count) pairs.
func hist(sum float64, pairs ...float64) histogram {
	var bs []bucket
	for i := 0; i < len(pairs); i += 2 {
		bs = append(bs, bucket{upper: pairs[i], count: pairs[i+1]})
	}
	count := 0.0
	if len(bs) > 0 {
		count = bs[len(bs)-1].count
	}
	return newHistogram(bs, count, sum)
}

var approx = cmpopts.EquateApprox(0, 1e-12)

func TestQuantile(t *testing.T) {
	// The API server's admission webhook buckets, as scraped.
	admission := []float64{0.005, 0.025, 0.1, 0.5, 1, 2.5, 10, 25}
	adm := func(counts ...float64) histogram {
		var pairs []float64
		for i, c := range counts {
			pairs = append(pairs, admission[i], c)
		}
		return hist(0, append(pairs, inf, counts[len(counts)-1])...)
	}
	for name, tc := range map[string]struct {
		h    histogram
		q    float64
		want estimate
	}{
		"median in the first bucket interpolates from 0": {
			h: adm(2, 3, 3, 3, 3, 3, 3, 3), q: 0.5,
			want: estimate{value: 0.005 * 1.5 / 2, lower: 0, upper: 0.005, ok: true},
		},
		"p99 in the second bucket interpolates from its lower bound": {
			h: adm(2, 3, 3, 3, 3, 3, 3, 3), q: 0.99,
			want: estimate{value: 0.005 + 0.02*(2.97-2)/1, lower: 0.005, upper: 0.025, ok: true},
		},
		"a rank exactly on a bucket's count is that bucket's upper bound": {
			h: adm(50, 100, 100, 100, 100, 100, 100, 100), q: 0.5,
			want: estimate{value: 0.005, lower: 0, upper: 0.005, ok: true},
		},
		"empty buckets below are skipped": {
			h: adm(0, 0, 10, 10, 10, 10, 10, 10), q: 0.5,
			want: estimate{value: 0.025 + 0.075*0.5, lower: 0.025, upper: 0.1, ok: true},
		},
		"a quantile in the +Inf bucket is the highest finite bound": {
			h: hist(0, 1, 1, inf, 10), q: 0.5,
			want: estimate{value: 1, lower: 1, upper: inf, ok: true},
		},
		"a first bucket at or below 0 is returned as is": {
			h: hist(0, -1, 5, 0, 5, inf, 10), q: 0.2,
			want: estimate{value: -1, lower: math.Inf(-1), upper: -1, ok: true},
		},
		"no observations": {
			h: adm(0, 0, 0, 0, 0, 0, 0, 0), q: 0.5,
		},
		"no series": {
			h: histogram{}, q: 0.5,
		},
		"no +Inf bucket": {
			h: histogram{buckets: []bucket{{upper: 1, count: 1}, {upper: 2, count: 2}}, count: 2}, q: 0.5,
		},
		"q above 1": {
			h: adm(1, 1, 1, 1, 1, 1, 1, 1), q: 1.5,
		},
		"q below 0": {
			h: adm(1, 1, 1, 1, 1, 1, 1, 1), q: -0.5,
		},
		"q = 0 with an empty first bucket is its lower bound": {
			h: adm(0, 4, 4, 4, 4, 4, 4, 4), q: 0,
			want: estimate{value: 0, lower: 0, upper: 0.005, ok: true},
		},
		"q = 1 is the upper bound of the last bucket with observations": {
			h: adm(1, 2, 4, 4, 4, 4, 4, 4), q: 1,
			want: estimate{value: 0.1, lower: 0.025, upper: 0.1, ok: true},
		},
		"a cumulative count that goes down is raised, as Prometheus does": {
			h: histogram{buckets: []bucket{{upper: 1, count: 2}, {upper: 2, count: 1}, {upper: 3, count: 4}, {upper: inf, count: 4}}, count: 4}, q: 0.75,
			want: estimate{value: 2.5, lower: 2, upper: 3, ok: true},
		},
		"duplicate bounds are merged": {
			h: histogram{buckets: []bucket{{upper: 1, count: 2}, {upper: 1, count: 2}, {upper: 2, count: 4}, {upper: inf, count: 4}}, count: 4}, q: 0.75,
			want: estimate{value: 1.5, lower: 1, upper: 2, ok: true},
		},
	} {
		t.Run(name, func(t *testing.T) {
			got := tc.h.quantile(tc.q)
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(estimate{}), approx); diff != "" {
				t.Errorf("quantile(%g) (-want +got):\n%s", tc.q, diff)
			}
		})
	}
}

func TestNewHistogram(t *testing.T) {
	for name, tc := range map[string]struct {
		buckets []bucket
		count   float64
		want    []bucket
	}{
		"sorts the buckets": {
			buckets: []bucket{{upper: inf, count: 3}, {upper: 2, count: 2}, {upper: 1, count: 1}},
			count:   3,
			want:    []bucket{{upper: 1, count: 1}, {upper: 2, count: 2}, {upper: inf, count: 3}},
		},
		"adds a missing +Inf bucket from the count": {
			buckets: []bucket{{upper: 1, count: 1}},
			count:   5,
			want:    []bucket{{upper: 1, count: 1}, {upper: inf, count: 5}},
		},
		"no buckets at all is the +Inf bucket alone": {
			count: 2,
			want:  []bucket{{upper: inf, count: 2}},
		},
	} {
		t.Run(name, func(t *testing.T) {
			got := newHistogram(tc.buckets, tc.count, 0)
			if diff := cmp.Diff(tc.want, got.buckets, cmp.AllowUnexported(bucket{})); diff != "" {
				t.Errorf("buckets (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSub(t *testing.T) {
	for name, tc := range map[string]struct {
		after, before histogram
		want          histogram
		wantErr       error
		anyErr        bool
	}{
		"the difference bucket by bucket, count and sum included": {
			after:  hist(3, 0.005, 10, 0.025, 14, inf, 15),
			before: hist(1, 0.005, 4, 0.025, 5, inf, 5),
			want:   hist(2, 0.005, 6, 0.025, 9, inf, 10),
		},
		"nothing before: the series appeared during the phase": {
			after:  hist(1, 0.005, 2, inf, 2),
			before: histogram{},
			want:   hist(1, 0.005, 2, inf, 2),
		},
		"nothing at all": {
			after: histogram{}, before: histogram{}, want: histogram{},
		},
		"different bounds": {
			after:   hist(0, 0.005, 1, inf, 1),
			before:  hist(0, 0.01, 1, inf, 1),
			wantErr: errBucketMismatch,
		},
		"a reset series": {
			after:  hist(0, 0.005, 1, inf, 1),
			before: hist(0, 0.005, 4, inf, 4),
			anyErr: true,
		},
		"a bucket that went down": {
			after:  histogram{buckets: []bucket{{upper: 1, count: 1}, {upper: inf, count: 5}}, count: 5},
			before: histogram{buckets: []bucket{{upper: 1, count: 2}, {upper: inf, count: 2}}, count: 2},
			anyErr: true,
		},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := tc.after.sub(tc.before)
			switch {
			case tc.wantErr != nil:
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("sub: error %v, want %v", err, tc.wantErr)
				}
				return
			case tc.anyErr:
				if err == nil {
					t.Fatalf("sub: no error, want one; got %+v", got)
				}
				return
			case err != nil:
				t.Fatalf("sub: %v", err)
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(histogram{}, bucket{}), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("sub (-want +got):\n%s", diff)
			}
		})
	}
}

func TestAdd(t *testing.T) {
	a := hist(1, 0.005, 1, 0.025, 2, inf, 3)
	b := hist(2, 0.005, 4, 0.025, 4, inf, 4)
	got, err := a.add(b)
	if err != nil {
		t.Fatalf("add: %v", err)
	}
	want := hist(3, 0.005, 5, 0.025, 6, inf, 7)
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(histogram{}, bucket{})); diff != "" {
		t.Errorf("add (-want +got):\n%s", diff)
	}
	if got, err := (histogram{}).add(a); err != nil || !cmp.Equal(a, got, cmp.AllowUnexported(histogram{}, bucket{})) {
		t.Errorf("empty + a = %+v, %v; want a", got, err)
	}
	if _, err := a.add(hist(0, 1, 1, inf, 1)); !errors.Is(err, errBucketMismatch) {
		t.Errorf("adding different bounds: error %v, want %v", err, errBucketMismatch)
	}
}
