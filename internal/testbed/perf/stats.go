package perf

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
)

// Num is a float64 that encodes NaN and ±Inf (a ratio to nothing, a value
// not measured) as JSON null instead of failing the whole encoding.
type Num float64

// MarshalJSON implements json.Marshaler.
func (n Num) MarshalJSON() ([]byte, error) {
	f := float64(n)
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return []byte("null"), nil
	}
	return json.Marshal(f)
}

// UnmarshalJSON implements json.Unmarshaler.
func (n *Num) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*n = Num(math.NaN())
		return nil
	}
	var f float64
	if err := json.Unmarshal(b, &f); err != nil {
		return err
	}
	*n = Num(f)
	return nil
}

// Valid reports whether n is a number.
func (n Num) Valid() bool { return !math.IsNaN(float64(n)) && !math.IsInf(float64(n), 0) }

// Median returns the median of xs (the mean of the middle two for an even
// count), ignoring NaNs; NaN when nothing is left. Repetitions on a shared
// machine have outliers (another engineer's build), which the median
// ignores and a mean would not.
func Median(xs []float64) float64 {
	v := make([]float64, 0, len(xs))
	for _, x := range xs {
		if !math.IsNaN(x) {
			v = append(v, x)
		}
	}
	if len(v) == 0 {
		return math.NaN()
	}
	slices.Sort(v)
	n := len(v)
	if n%2 == 1 {
		return v[n/2]
	}
	return (v[n/2-1] + v[n/2]) / 2
}

// Worst returns the largest of xs, NaN if any is NaN (a run that failed
// or whose total is unknown) or there are none.
func Worst(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	w := math.Inf(-1)
	for _, x := range xs {
		if math.IsNaN(x) {
			return math.NaN()
		}
		w = max(w, x)
	}
	return w
}

// Ratio returns a/b, or NaN when either is not a number or b is zero.
func Ratio(a, b float64) float64 {
	if b == 0 || math.IsNaN(a) || math.IsNaN(b) {
		return math.NaN()
	}
	return a / b
}

// PairRatios returns a[i]/b[i] for every repetition both have: the ratio
// of each interleaved pair of runs, which shows how much of a median ratio
// is the machine's noise.
func PairRatios(a, b []float64) []float64 {
	out := make([]float64, min(len(a), len(b)))
	for i := range out {
		out[i] = Ratio(a[i], b[i])
	}
	return out
}

// Quantile returns the q-quantile (0 ≤ q ≤ 1) of sorted by the
// nearest-rank method: the smallest value with at least q of the values
// at or below it. NaN for no values.
func Quantile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return math.NaN()
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// HenjesModel is Henjes07 §4.5's model of a JMS server's processing time
// per received message,
//
//	B = t_rcv + n_fltr·t_fltr + r·t_tx,
//
// with n_fltr the filters installed (matching or not) and r the
// replication grade (the copies sent). Times are in seconds.
type HenjesModel struct {
	TRcv  float64 `json:"t_rcv"`
	TFltr float64 `json:"t_fltr"`
	TTx   float64 `json:"t_tx"`
}

// Henjes07Published is the model Henjes07 §4.5 fitted to ActiveMQ 4.0 in
// 2007 (r ∈ {1, 2, 5, 10}): the reference the plots draw beside ours.
var Henjes07Published = HenjesModel{TRcv: 4.9e-5, TFltr: 1.6e-7, TTx: 1.5e-5}

// B is the processing time per received message.
func (m HenjesModel) B(filters, r float64) float64 { return m.TRcv + filters*m.TFltr + r*m.TTx }

// Received is the received-message throughput the model predicts, 1/B.
func (m HenjesModel) Received(filters, r float64) float64 { return 1 / m.B(filters, r) }

// HenjesPoint is one measured point: filters installed, replication
// grade, received messages per second.
type HenjesPoint struct {
	Filters  float64 `json:"filters"`
	R        float64 `json:"r"`
	Received float64 `json:"received_per_s"`
}

// FitHenjes derives t_rcv, t_fltr and t_tx from measured received
// throughputs by least squares, as Henjes07 §4.5 does. The model is linear
// in B = 1/received, so the fit is a weighted linear least squares on B;
// each point is weighted by 1/B², which minimises relative errors: the
// points span four decades of filters, and unweighted squares would fit
// the slowest points only. It needs points that vary both the filters and
// the replication grade.
func FitHenjes(points []HenjesPoint) (HenjesModel, error) {
	var a [3][3]float64
	var y [3]float64
	n := 0
	for _, p := range points {
		if !(p.Received > 0) || math.IsInf(p.Received, 0) {
			continue
		}
		b := 1 / p.Received
		w := 1 / (b * b)
		x := [3]float64{1, p.Filters, p.R}
		for i := range 3 {
			for j := range 3 {
				a[i][j] += w * x[i] * x[j]
			}
			y[i] += w * x[i] * b
		}
		n++
	}
	if n < 3 {
		return HenjesModel{}, fmt.Errorf("henjes07 model: %d usable points, want at least 3", n)
	}
	sol, err := solve3(a, y)
	if err != nil {
		return HenjesModel{}, fmt.Errorf("henjes07 model: %w (the points must vary both the filters and the replication grade)", err)
	}
	return HenjesModel{TRcv: sol[0], TFltr: sol[1], TTx: sol[2]}, nil
}

// solve3 solves a·x = y by Gaussian elimination with partial pivoting.
func solve3(a [3][3]float64, y [3]float64) ([3]float64, error) {
	// Scale-aware singularity test: the columns differ by orders of
	// magnitude (1, filters, r).
	norm := 0.0
	for i := range 3 {
		for j := range 3 {
			norm = max(norm, math.Abs(a[i][j]))
		}
	}
	for c := range 3 {
		p := c
		for r := c + 1; r < 3; r++ {
			if math.Abs(a[r][c]) > math.Abs(a[p][c]) {
				p = r
			}
		}
		if math.Abs(a[p][c]) <= 1e-12*norm {
			return [3]float64{}, errors.New("singular normal equations")
		}
		a[c], a[p] = a[p], a[c]
		y[c], y[p] = y[p], y[c]
		for r := c + 1; r < 3; r++ {
			f := a[r][c] / a[c][c]
			for k := c; k < 3; k++ {
				a[r][k] -= f * a[c][k]
			}
			y[r] -= f * y[c]
		}
	}
	var x [3]float64
	for r := 2; r >= 0; r-- {
		s := y[r]
		for k := r + 1; k < 3; k++ {
			s -= a[r][k] * x[k]
		}
		x[r] = s / a[r][r]
	}
	return x, nil
}
