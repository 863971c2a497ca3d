package bench

import (
	"math/rand/v2"
	"sync"
	"testing"
	"time"
)

func TestBucketBoundsContainValue(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	values := []uint64{0, 1, 63, 64, 65, 127, 128, 1000, 1 << 20, 1<<40 + 12345, 1<<63 - 1}
	for range 10000 {
		values = append(values, rng.Uint64N(1<<rng.UintN(63)+1))
	}
	for _, v := range values {
		i := bucketOf(v)
		if i < 0 || i >= numBuckets {
			t.Fatalf("bucketOf(%d) = %d, out of [0,%d)", v, i, numBuckets)
		}
		lo, hi := bucketBounds(i)
		if v < lo || v > hi {
			t.Fatalf("value %d in bucket %d = [%d,%d]", v, i, lo, hi)
		}
		if v >= subBuckets && float64(hi-lo) > float64(v)/halfSub {
			t.Fatalf("bucket [%d,%d] for %d is wider than 1/%d of the value", lo, hi, v, halfSub)
		}
	}
}

func TestHistogramQuantiles(t *testing.T) {
	tests := []struct {
		name   string
		values []time.Duration
		q      float64
		want   time.Duration
	}{
		{name: "empty", values: nil, q: 0.99, want: 0},
		{name: "single", values: []time.Duration{3 * time.Millisecond}, q: 0.5, want: 3 * time.Millisecond},
		{name: "single p999", values: []time.Duration{3 * time.Millisecond}, q: 0.999, want: 3 * time.Millisecond},
		{name: "uniform p50", values: uniform(1, 10000, time.Microsecond), q: 0.5, want: 5000 * time.Microsecond},
		{name: "uniform p99", values: uniform(1, 10000, time.Microsecond), q: 0.99, want: 9900 * time.Microsecond},
		{name: "uniform p999", values: uniform(1, 10000, time.Microsecond), q: 0.999, want: 9990 * time.Microsecond},
		{name: "tail outlier p99", values: append(repeat(1000, time.Millisecond), repeat(10, time.Second)...), q: 0.99, want: time.Millisecond},
		{name: "tail outlier p999", values: append(repeat(1000, time.Millisecond), repeat(10, time.Second)...), q: 0.999, want: time.Second},
		{name: "small exact", values: []time.Duration{1, 2, 3, 4}, q: 0.75, want: 3},
		{name: "negative counts as zero", values: []time.Duration{-5}, q: 1, want: 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := NewHistogram()
			for _, v := range tc.values {
				h.Record(v)
			}
			got := h.Quantile(tc.q)
			if !within(got, tc.want, 0.02) {
				t.Fatalf("Quantile(%v) = %v, want %v ± 2%%", tc.q, got, tc.want)
			}
		})
	}
}

func TestHistogramSummaryAndMerge(t *testing.T) {
	a, b := NewHistogram(), NewHistogram()
	for _, v := range uniform(1, 500, time.Millisecond) {
		a.Record(v)
	}
	for _, v := range uniform(501, 1000, time.Millisecond) {
		b.Record(v)
	}
	a.Merge(b)
	if a.Count() != 1000 {
		t.Fatalf("count after merge = %d, want 1000", a.Count())
	}
	if a.Max() != time.Second {
		t.Fatalf("max = %v, want 1s", a.Max())
	}
	if got := a.Mean(); got != 500500*time.Microsecond {
		t.Fatalf("mean = %v, want 500.5ms", got)
	}
	s := a.Summary()
	if s.Count != 1000 || !withinF(s.P50Ms, 500, 0.02) || !withinF(s.P99Ms, 990, 0.02) || !withinF(s.P999Ms, 999, 0.02) || s.MaxMs != 1000 {
		t.Fatalf("summary = %+v", s)
	}
	a.Reset()
	if a.Count() != 0 || a.Quantile(0.5) != 0 || a.Max() != 0 {
		t.Fatalf("reset histogram not empty: count %d", a.Count())
	}
}

func TestHistogramConcurrentRecord(t *testing.T) {
	h := NewHistogram()
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 1000 {
				h.Record(time.Duration(g*1000+i) * time.Microsecond)
			}
		}()
	}
	wg.Wait()
	if h.Count() != 4000 {
		t.Fatalf("count = %d, want 4000", h.Count())
	}
	if h.Max() != 3999*time.Microsecond {
		t.Fatalf("max = %v", h.Max())
	}
}

func uniform(from, to int, unit time.Duration) []time.Duration {
	out := make([]time.Duration, 0, to-from+1)
	for i := from; i <= to; i++ {
		out = append(out, time.Duration(i)*unit)
	}
	return out
}

func repeat(n int, d time.Duration) []time.Duration {
	out := make([]time.Duration, n)
	for i := range out {
		out[i] = d
	}
	return out
}

func within(got, want time.Duration, rel float64) bool {
	return withinF(float64(got), float64(want), rel)
}

func withinF(got, want, rel float64) bool {
	if want == 0 {
		return got == 0
	}
	d := got - want
	if d < 0 {
		d = -d
	}
	return d <= want*rel
}
