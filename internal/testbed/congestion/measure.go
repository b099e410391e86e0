package congestion

import (
	"math"
	"slices"
	"time"
)

// The measures below are pure: the runner records series, these read the
// paper's quantities from them, and table tests check them.

// Jain is Jain's fairness index of the rates normalised by their fair
// shares, (Σx)²/(n·Σx²) with x_i = rates_i/shares_i: 1 when every flow gets
// the same fraction of its share, 1/n when one flow takes everything. Flows
// with a zero share are left out (they demand nothing); with none left the
// index is 1.
func Jain(rates, shares []float64) float64 {
	var sum, sq float64
	n := 0
	for i := range rates {
		if i >= len(shares) || shares[i] <= 0 {
			continue
		}
		x := rates[i] / shares[i]
		sum += x
		sq += x * x
		n++
	}
	if n == 0 || sq == 0 {
		return 1
	}
	return sum * sum / (float64(n) * sq)
}

// LossReduction is how many times fewer messages were lost with control
// than without: +Inf when control lost none and the run without lost
// some, 1 when neither lost any.
func LossReduction(without, with uint64) float64 {
	switch {
	case with == 0 && without == 0:
		return 1
	case with == 0:
		return math.Inf(1)
	}
	return float64(without) / float64(with)
}

// Smooth is the moving mean of series over the window of w bins ending at
// each bin (fewer at the start).
func Smooth(series []float64, w int) []float64 {
	w = max(w, 1)
	out := make([]float64, len(series))
	sum := 0.0
	for i, v := range series {
		sum += v
		if i >= w {
			sum -= series[i-w]
		}
		out[i] = sum / float64(min(i+1, w))
	}
	return out
}

// AdaptationTime is how long after bin `from` the series first comes
// within tolerance (a fraction) of target and stays there for hold bins
// in a row; the time is counted to the first bin of that run, end of bin.
// It returns false when the series never settles before its end.
func AdaptationTime(series []float64, bin time.Duration, from int, target, tolerance float64, hold int) (time.Duration, bool) {
	hold = max(hold, 1)
	run := 0
	for i := max(from, 0); i < len(series); i++ {
		if math.Abs(series[i]-target) <= tolerance*target {
			run++
			if run == hold {
				first := i - hold + 1
				return time.Duration(first-from+1) * bin, true
			}
		} else {
			run = 0
		}
	}
	return 0, false
}

// Mean is the mean of series over bins [from, to) (clamped); 0 when empty.
func Mean(series []float64, from, to int) float64 {
	from, to = max(from, 0), min(to, len(series))
	if to <= from {
		return 0
	}
	sum := 0.0
	for _, v := range series[from:to] {
		sum += v
	}
	return sum / float64(to-from)
}

// Median is the median of series over bins [from, to) (clamped); 0 when
// empty.
func Median(series []float64, from, to int) float64 {
	from, to = max(from, 0), min(to, len(series))
	if to <= from {
		return 0
	}
	s := slices.Clone(series[from:to])
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
