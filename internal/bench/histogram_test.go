package bench

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestHistogramBuckets(t *testing.T) {
	// Buckets are contiguous and increasing: every value lies in its
	// bucket, the bucket before ends just below it.
	r := rand.New(rand.NewPCG(3, 4))
	for range 100000 {
		v := r.Uint64N(1 << uint(1+r.IntN(histMaxBits-1)))
		i := histBucket(v)
		require.LessOrEqual(t, v, histUpper(i), "v=%d", v)
		if i > 0 {
			require.Greater(t, v, histUpper(i-1), "v=%d", v)
		}
		// Bucket width stays within 1/128 of the value.
		if i >= histSub {
			lower := histUpper(i-1) + 1
			require.LessOrEqual(t, float64(histUpper(i)-lower+1), float64(lower)/histSub)
		}
	}
	assert.Equal(t, histBuckets-1, histBucket(math.MaxUint64), "huge values share the last bucket")
}

// The histogram's quantiles match exact ones, computed by sorting, to within
// the bucket precision.
func TestHistogramQuantilesMatchSorting(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for trial := range 20 {
		var h histogram
		n := 1 + r.IntN(5000)
		vals := make([]time.Duration, n)
		for i := range vals {
			// Log-normal-ish latencies around a millisecond.
			vals[i] = time.Duration(math.Exp(r.NormFloat64()*2) * 1e6)
			h.record(vals[i])
		}
		slices.Sort(vals)
		for _, q := range []float64{0.01, 0.5, 0.9, 0.99, 1} {
			rank := int(math.Ceil(q * float64(n)))
			want := vals[rank-1]
			got := h.quantile(q)
			require.GreaterOrEqual(t, got, want, "trial %d q=%v", trial, q)
			require.LessOrEqual(t, float64(got-want), float64(want)/histSub+1, "trial %d q=%v", trial, q)
		}
		assert.Equal(t, vals[n-1], time.Duration(h.max.Load()))
		assert.Equal(t, uint64(n), h.n.Load())
	}
	var empty histogram
	assert.Zero(t, empty.quantile(0.5))
	var neg histogram
	neg.record(-time.Second)
	assert.Zero(t, neg.quantile(1))
}

func BenchmarkHistogramRecord(b *testing.B) {
	var h histogram
	b.ReportAllocs()
	d := time.Duration(1)
	for b.Loop() {
		h.record(d)
		d = (d*3 + 7) % (1 << 30)
	}
}
