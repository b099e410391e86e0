package bench

import (
	"math/bits"
	"sync/atomic"
	"time"
)

// histogram counts durations in log-linear buckets: exact below 128 ns, and
// above that 128 buckets per power of two, so a quantile is off by less
// than 1/128 (0.8%) of its value. Recording is lock-free, so every
// subscriber goroutine can share one.
type histogram struct {
	counts [histBuckets]atomic.Uint64
	n      atomic.Uint64
	max    atomic.Int64
}

const (
	histSubBits = 7
	histSub     = 1 << histSubBits
	// Durations up to 2^40 ns (18 minutes) are told apart; longer ones
	// share the last bucket but still set max.
	histMaxBits = 40
	histBuckets = (histMaxBits - histSubBits + 1) * histSub
)

func histBucket(v uint64) int {
	if v < histSub {
		return int(v)
	}
	exp := bits.Len64(v) - histSubBits - 1
	i := (exp+1)<<histSubBits + int(v>>exp) - histSub
	return min(i, histBuckets-1)
}

// histUpper returns the largest value that falls in bucket i.
func histUpper(i int) uint64 {
	if i < histSub {
		return uint64(i)
	}
	exp := i>>histSubBits - 1
	mant := uint64(i&(histSub-1)) + histSub
	return (mant+1)<<exp - 1
}

// record adds d; negative durations (impossible on a monotonic clock) count
// as zero.
func (h *histogram) record(d time.Duration) {
	v := max(int64(d), 0)
	h.counts[histBucket(uint64(v))].Add(1)
	h.n.Add(1)
	for {
		m := h.max.Load()
		if v <= m || h.max.CompareAndSwap(m, v) {
			return
		}
	}
}

// quantile returns the q-quantile (0 < q <= 1): the upper bound of the
// bucket holding the ceil(q·n)-th smallest value, capped at the maximum.
// It returns 0 for an empty histogram.
func (h *histogram) quantile(q float64) time.Duration {
	n := h.n.Load()
	if n == 0 {
		return 0
	}
	rank := uint64(q * float64(n))
	if float64(rank) < q*float64(n) || rank == 0 {
		rank++
	}
	var seen uint64
	for i := range h.counts {
		seen += h.counts[i].Load()
		if seen >= rank {
			return min(time.Duration(histUpper(i)), time.Duration(h.max.Load()))
		}
	}
	return time.Duration(h.max.Load())
}
