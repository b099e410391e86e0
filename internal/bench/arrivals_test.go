package bench

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestConstantArrivals(t *testing.T) {
	a := &arrivals{mode: Constant, r0: 4, phase: 0.1}
	var got []float64
	for range 5 {
		got = append(got, a.next())
	}
	assert.InDeltaSlice(t, []float64{0.1, 0.35, 0.6, 0.85, 1.1}, got, 1e-12)
	assert.True(t, math.IsInf((&arrivals{mode: Constant}).next(), 1), "rate 0 sends nothing")
	assert.True(t, math.IsInf((&arrivals{mode: Poisson}).next(), 1), "rate 0 sends nothing")
}

// countArrivals runs many independent publishers over [0, horizon] and
// returns the mean and variance of their counts.
func countArrivals(mode Mode, r0, r1, horizon float64, runs int) (mean, variance float64) {
	var sum, sumSq float64
	for i := range runs {
		a := &arrivals{mode: mode, r0: r0, r1: r1, horizon: horizon, rng: rand.New(rand.NewPCG(42, uint64(i)))}
		n := 0
		for a.next() < horizon {
			n++
		}
		sum += float64(n)
		sumSq += float64(n) * float64(n)
	}
	mean = sum / float64(runs)
	return mean, sumSq/float64(runs) - mean*mean
}

// Carzaniga09 §5.1.4: clients are Poisson processes, so the number of messages
// in an interval has mean and variance both equal to the integral of the
// rate over it, constant or linearly growing.
func TestPoissonAndRampCounts(t *testing.T) {
	tests := []struct {
		name          string
		mode          Mode
		r0, r1, horiz float64
		wantMean      float64
	}{
		{"poisson", Poisson, 50, 0, 2, 100},
		{"ramp up", Ramp, 10, 90, 2, 100}, // (10+90)/2 * 2
		{"ramp from zero", Ramp, 0, 100, 2, 100},
		{"ramp down", Ramp, 80, 20, 2, 100},
		{"flat ramp", Ramp, 50, 50, 2, 100},
	}
	const runs = 2000
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mean, variance := countArrivals(tt.mode, tt.r0, tt.r1, tt.horiz, runs)
			// The mean of 2000 counts of variance 100 has a standard error
			// of 0.22; 1.5 is about 7 standard errors.
			assert.InDelta(t, tt.wantMean, mean, 1.5)
			assert.InDelta(t, tt.wantMean, variance, 15, "variance equals mean for Poisson counts")
		})
	}
}

// A ramp's messages concentrate where the rate is high: with the rate
// growing from 0, the second half of the interval holds 3/4 of them.
func TestRampShape(t *testing.T) {
	var first, second int
	for i := range 200 {
		a := &arrivals{mode: Ramp, r0: 0, r1: 100, horizon: 2, rng: rand.New(rand.NewPCG(7, uint64(i)))}
		for at := a.next(); at < 2; at = a.next() {
			if at < 1 {
				first++
			} else {
				second++
			}
		}
	}
	assert.InDelta(t, 0.75, float64(second)/float64(first+second), 0.01)
}

// rampGap solves ∫_t^{t+d} (r0 + slope·s) ds = e for d.
func TestRampGapSolvesIntegral(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 10000 {
		t0, r0, slope, e := r.Float64()*10, r.Float64()*100, (r.Float64()-0.3)*50, r.ExpFloat64()
		d := rampGap(t0, r0, slope, e)
		lt := r0 + slope*t0
		if lt <= 0 {
			require.True(t, math.IsInf(d, 1), "rate already 0 at t=%v", t0)
			continue
		}
		if math.IsInf(d, 1) {
			// The rate reaches 0 before the area reaches e.
			zeroAt := -lt / slope
			require.Less(t, slope, 0.0)
			require.Less(t, lt*zeroAt/2, e)
			continue
		}
		area := lt*d + slope*d*d/2
		require.InEpsilon(t, e, area, 1e-9, "t=%v r0=%v slope=%v e=%v d=%v", t0, r0, slope, e, d)
	}
	assert.True(t, math.IsInf(rampGap(0, 0, 0, 1), 1))
	assert.InDelta(t, math.Sqrt(2), rampGap(0, 0, 1, 1), 1e-12)
	assert.InDelta(t, 0.5, rampGap(0, 2, 0, 1), 1e-12)
}

func BenchmarkRampArrivals(b *testing.B) {
	a := &arrivals{mode: Ramp, r0: 1, r1: 100, horizon: 60, rng: rand.New(rand.NewPCG(1, 1))}
	b.ReportAllocs()
	for b.Loop() {
		if a.next() > 60 {
			a.t = 0
		}
	}
}
