package perf

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMedian(t *testing.T) {
	assert.Equal(t, 2.0, Median([]float64{3, 1, 2}))
	assert.Equal(t, 2.5, Median([]float64{4, 1, 3, 2}))
	assert.Equal(t, 5.0, Median([]float64{5}))
	assert.Equal(t, 2.0, Median([]float64{math.NaN(), 1, 3}), "NaNs (failed runs) are left out")
	assert.True(t, math.IsNaN(Median(nil)))
	assert.True(t, math.IsNaN(Median([]float64{math.NaN()})))
	in := []float64{3, 1, 2}
	Median(in)
	assert.Equal(t, []float64{3, 1, 2}, in, "the input is not reordered")
}

func TestWorst(t *testing.T) {
	assert.Equal(t, 3.0, Worst([]float64{1, 3, 2}))
	assert.True(t, math.IsNaN(Worst([]float64{1, math.NaN()})), "an unknown run may be the worst")
	assert.True(t, math.IsNaN(Worst(nil)))
}

func TestRatios(t *testing.T) {
	assert.Equal(t, 0.5, Ratio(1, 2))
	assert.True(t, math.IsNaN(Ratio(1, 0)))
	assert.True(t, math.IsNaN(Ratio(math.NaN(), 2)))
	got := PairRatios([]float64{1, 4, 9}, []float64{2, 2})
	assert.Equal(t, []float64{0.5, 2}, got, "one ratio per pair both systems ran")
}

func TestQuantile(t *testing.T) {
	v := []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	assert.Equal(t, 5.0, Quantile(v, 0.5))
	assert.Equal(t, 10.0, Quantile(v, 0.99))
	assert.Equal(t, 1.0, Quantile(v, 0))
	assert.Equal(t, 10.0, Quantile(v, 1))
	assert.Equal(t, 1.0, Quantile(v, 0.1))
	assert.True(t, math.IsNaN(Quantile(nil, 0.5)))
}

func TestNumJSON(t *testing.T) {
	b, err := json.Marshal(struct {
		A, B, C Num
	}{1.5, Num(math.NaN()), Num(math.Inf(1))})
	require.NoError(t, err)
	assert.JSONEq(t, `{"A":1.5,"B":null,"C":null}`, string(b))
	var back struct{ A, B Num }
	require.NoError(t, json.Unmarshal(b, &back))
	assert.Equal(t, Num(1.5), back.A)
	assert.False(t, back.B.Valid())
}

// henjesGrid is Henjes07 §4.5's design over this harness's axes.
func henjesGrid(m HenjesModel, noise func() float64) []HenjesPoint {
	var pts []HenjesPoint
	for _, add := range []float64{1, 10, 100, 1000, 10000} {
		for _, r := range []float64{1, 2, 5, 10} {
			pts = append(pts, HenjesPoint{Filters: add + r, R: r, Received: m.Received(add+r, r) * noise()})
		}
	}
	return pts
}

// The fit recovers the parameters of an exact synthetic curve, Henjes07's
// own among them.
func TestFitHenjesExact(t *testing.T) {
	for _, want := range []HenjesModel{Henjes07Published, {TRcv: 3e-6, TFltr: 2e-9, TTx: 1e-6}} {
		got, err := FitHenjes(henjesGrid(want, func() float64 { return 1 }))
		require.NoError(t, err)
		assert.InEpsilon(t, want.TRcv, got.TRcv, 1e-6)
		assert.InEpsilon(t, want.TFltr, got.TFltr, 1e-6)
		assert.InEpsilon(t, want.TTx, got.TTx, 1e-6)
	}
}

// With ±5% noise on every point the parameters stay within a few percent,
// t_rcv included, which unweighted squares would lose to the 10,000-filter
// points.
func TestFitHenjesNoisy(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	want := Henjes07Published
	got, err := FitHenjes(henjesGrid(want, func() float64 { return 1 + 0.1*(rng.Float64()-0.5) }))
	require.NoError(t, err)
	assert.InEpsilon(t, want.TRcv, got.TRcv, 0.1)
	assert.InEpsilon(t, want.TFltr, got.TFltr, 0.1)
	assert.InEpsilon(t, want.TTx, got.TTx, 0.1)
	// And the model predicts the received throughput within the noise.
	assert.InEpsilon(t, want.Received(10005, 5), got.Received(10005, 5), 0.06)
}

func TestFitHenjesErrors(t *testing.T) {
	_, err := FitHenjes([]HenjesPoint{{Filters: 1, R: 1, Received: 100}, {Filters: 2, R: 1, Received: 90}})
	assert.ErrorContains(t, err, "2 usable points, want at least 3")
	// Only the filters vary: t_rcv and t_tx cannot be told apart.
	_, err = FitHenjes([]HenjesPoint{{Filters: 1, R: 1, Received: 100}, {Filters: 10, R: 1, Received: 90}, {Filters: 100, R: 1, Received: 50}})
	assert.ErrorContains(t, err, "must vary both")
	// Failed points (no throughput) are left out, not fitted as infinite.
	_, err = FitHenjes([]HenjesPoint{{Filters: 1, R: 1, Received: 0}, {Filters: 10, R: 2, Received: math.NaN()}, {Filters: 100, R: 5, Received: 50}})
	assert.ErrorContains(t, err, "1 usable points")
}
