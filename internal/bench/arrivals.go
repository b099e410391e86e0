package bench

import (
	"math"
	"math/rand/v2"
)

// arrivals generates one publisher's send times, in seconds from the start
// of sending. It is pure: the times depend only on its fields and rng.
type arrivals struct {
	mode    Mode
	r0, r1  float64 // messages/s at time 0 and at horizon (r1 is used by Ramp only)
	horizon float64 // seconds over which Ramp's rate goes from r0 to r1
	phase   float64 // Constant: offset of the first message, in [0, 1/r0)
	rng     *rand.Rand

	t float64 // the previous arrival (Poisson, Ramp)
	n int     // arrivals so far (Constant)
}

// next returns the next send time; +Inf when the rate has fallen to zero
// for good.
func (a *arrivals) next() float64 {
	switch a.mode {
	case Constant:
		if a.r0 <= 0 {
			return math.Inf(1)
		}
		t := a.phase + float64(a.n)/a.r0
		a.n++
		return t
	case Poisson:
		if a.r0 <= 0 {
			return math.Inf(1)
		}
		a.t += a.rng.ExpFloat64() / a.r0
		return a.t
	default:
		a.t += rampGap(a.t, a.r0, (a.r1-a.r0)/a.horizon, a.rng.ExpFloat64())
		return a.t
	}
}

// rampGap returns the gap after time t to the next arrival of a Poisson
// process of rate λ(t) = r0 + slope·t, given a unit exponential draw e. By
// time rescaling the gap d solves ∫_t^{t+d} λ = e, that is
// (slope/2)·d² + λ(t)·d − e = 0, whose positive root is written in the form
// that does not cancel when slope is near zero. A rate that reaches zero
// before the integral reaches e means no further arrival: +Inf.
func rampGap(t, r0, slope, e float64) float64 {
	lt := r0 + slope*t
	if lt < 0 {
		lt = 0
	}
	disc := lt*lt + 2*slope*e
	if disc < 0 || lt+math.Sqrt(max(disc, 0)) == 0 {
		return math.Inf(1)
	}
	return 2 * e / (lt + math.Sqrt(disc))
}
