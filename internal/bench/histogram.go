package bench

import (
	"math"
	"math/bits"
	"sync/atomic"
	"time"
)

// Histogram layout: values are durations in nanoseconds. Values below subBuckets land
// in their own bucket (exact); above that, every power of two is split into
// subBuckets/2 linear sub-buckets, so a bucket's width is at most 1/(subBuckets/2) of
// its value — about 1.6 % relative error with subBucketBits = 6.
const (
	subBucketBits = 6
	subBuckets    = 1 << subBucketBits // 64
	halfSub       = subBuckets / 2
	maxExponent   = 64 - subBucketBits
	numBuckets    = subBuckets + maxExponent*halfSub
)

// Histogram counts latencies in log-linear buckets of bounded relative error. Record
// is safe for concurrent use (one atomic add per value, no allocation); Snapshot,
// Merge and the read methods may run concurrently with Record and see a value either
// recorded or not.
type Histogram struct {
	counts [numBuckets]atomic.Uint64
	total  atomic.Uint64
	sum    atomic.Uint64 // nanoseconds
	max    atomic.Int64
}

// NewHistogram returns an empty histogram.
func NewHistogram() *Histogram { return &Histogram{} }

// bucketOf returns the bucket index for v ≥ 0.
func bucketOf(v uint64) int {
	if v < subBuckets {
		return int(v)
	}
	// msb is the position of the highest set bit (≥ subBucketBits).
	msb := 63 - bits.LeadingZeros64(v)
	shift := msb - (subBucketBits - 1)
	// The top subBucketBits bits of v lie in [halfSub, subBuckets).
	top := int(v >> uint(shift))
	return subBuckets + (shift-1)*halfSub + (top - halfSub)
}

// bucketBounds returns the smallest and largest value that map to bucket i.
func bucketBounds(i int) (lo, hi uint64) {
	if i < subBuckets {
		return uint64(i), uint64(i)
	}
	j := i - subBuckets
	shift := j/halfSub + 1
	top := uint64(j%halfSub + halfSub)
	lo = top << uint(shift)
	hi = lo + (uint64(1) << uint(shift)) - 1
	return lo, hi
}

// Record adds one observation. Negative durations count as zero.
func (h *Histogram) Record(d time.Duration) {
	v := max(int64(d), 0)
	h.counts[bucketOf(uint64(v))].Add(1)
	h.total.Add(1)
	h.sum.Add(uint64(v))
	for {
		m := h.max.Load()
		if v <= m || h.max.CompareAndSwap(m, v) {
			return
		}
	}
}

// Count is the number of recorded values.
func (h *Histogram) Count() uint64 { return h.total.Load() }

// Max is the largest recorded value (exact).
func (h *Histogram) Max() time.Duration { return time.Duration(h.max.Load()) }

// Mean is the average recorded value (exact), 0 when empty.
func (h *Histogram) Mean() time.Duration {
	n := h.total.Load()
	if n == 0 {
		return 0
	}
	return time.Duration(h.sum.Load() / n)
}

// Quantile returns the value at quantile q in [0, 1]: the midpoint of the bucket
// holding the ceil(q·n)-th smallest value, capped at the exact maximum. It returns 0
// when the histogram is empty.
func (h *Histogram) Quantile(q float64) time.Duration {
	n := h.total.Load()
	if n == 0 {
		return 0
	}
	q = math.Min(math.Max(q, 0), 1)
	rank := uint64(math.Ceil(q * float64(n)))
	rank = max(rank, 1)
	var seen uint64
	for i := range h.counts {
		seen += h.counts[i].Load()
		if seen >= rank {
			lo, hi := bucketBounds(i)
			mid := lo + (hi-lo)/2
			return min(time.Duration(mid), h.Max())
		}
	}
	return h.Max()
}

// Merge adds every observation of other into h.
func (h *Histogram) Merge(other *Histogram) {
	for i := range other.counts {
		if c := other.counts[i].Load(); c != 0 {
			h.counts[i].Add(c)
		}
	}
	h.total.Add(other.total.Load())
	h.sum.Add(other.sum.Load())
	om := other.max.Load()
	for {
		m := h.max.Load()
		if om <= m || h.max.CompareAndSwap(m, om) {
			return
		}
	}
}

// Reset empties the histogram. It must not run concurrently with Record.
func (h *Histogram) Reset() {
	for i := range h.counts {
		h.counts[i].Store(0)
	}
	h.total.Store(0)
	h.sum.Store(0)
	h.max.Store(0)
}

// Latencies is the summary of a histogram as reports print it, in milliseconds.
type Latencies struct {
	Count  uint64  `json:"count"`
	MeanMs float64 `json:"mean_ms"`
	P50Ms  float64 `json:"p50_ms"`
	P99Ms  float64 `json:"p99_ms"`
	P999Ms float64 `json:"p999_ms"`
	MaxMs  float64 `json:"max_ms"`
}

// Summary returns h's percentiles in milliseconds.
func (h *Histogram) Summary() Latencies {
	return Latencies{
		Count:  h.Count(),
		MeanMs: ms(h.Mean()),
		P50Ms:  ms(h.Quantile(0.50)),
		P99Ms:  ms(h.Quantile(0.99)),
		P999Ms: ms(h.Quantile(0.999)),
		MaxMs:  ms(h.Max()),
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
