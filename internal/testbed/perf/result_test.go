package perf

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func runsOf(system string, rates ...float64) []RunResult {
	var out []RunResult
	for i, r := range rates {
		run := RunResult{System: system, Rep: i + 1, DeliveryRate: Num(r), Loss: Num(r / 1e7)}
		if math.IsNaN(r) {
			run.Error = "failed"
		}
		out = append(out, run)
	}
	return out
}

// A row holds each system's median, the ratio of the medians, the ratio of
// each interleaved pair, and whether the ratio meets its target.
func TestMakeRow(t *testing.T) {
	runs := append(runsOf("drip", 100, 300, 200), runsOf("nats", 1000, 1000, 400)...)
	row := makeRow(runs, mDelivered, "drip", "nats", "", atLeast("≥ 0.33", 0.33))
	assert.Equal(t, Num(200), row.Values["drip"])
	assert.Equal(t, Num(1000), row.Values["nats"])
	assert.Equal(t, Num(0.2), row.Ratio)
	assert.Equal(t, []Num{0.1, 0.3, 0.5}, row.PairRatios)
	assert.Equal(t, "drip/nats", row.RatioOf)
	assert.Equal(t, Num(0.33), row.TargetRatio)
	require.NotNil(t, row.Met)
	assert.False(t, *row.Met)

	row = makeRow(runs, mDelivered, "drip", "nats", "", atLeast("≥ 0.1", 0.1))
	assert.True(t, *row.Met)
	row = makeRow(runs, mDelivered, "drip", "nats", "", atMost("≤ 0.1", 0.1))
	assert.False(t, *row.Met)
	row = makeRow(runs, mDelivered, "drip", "nats", "", nil)
	assert.Nil(t, row.Met, "no target, no verdict")
}

// A failed run counts as no measurement: the median of the others, no
// ratio for its pair.
func TestMakeRowFailedRun(t *testing.T) {
	runs := append(runsOf("drip", 100, math.NaN(), 300), runsOf("nats", 1000, 1000, 1000)...)
	row := makeRow(runs, mDelivered, "drip", "nats", "", nil)
	assert.Equal(t, Num(200), row.Values["drip"])
	assert.False(t, row.PairRatios[1].Valid())
	assert.Len(t, row.Reps["drip"], 3)
}

// A loss target holds every run of the first system, shows the worst run,
// and makes no ratio.
func TestMakeRowWorst(t *testing.T) {
	runs := append(runsOf("drip", 1000, 20000, 5000), runsOf("nats", 0, 0, 0)...)
	g := worstAtMost("≤ 0.1%", 0.001)
	row := makeRow(runs, mLoss, "drip", "nats", "", g)
	assert.Contains(t, row.Metric, "worst run")
	assert.Equal(t, Num(0.002), row.Values["drip"])
	assert.Empty(t, row.RatioOf)
	assert.False(t, row.Ratio.Valid())
	assert.False(t, row.TargetRatio.Valid(), "the target is on drip's values, not a ratio")
	require.NotNil(t, row.Met)
	assert.False(t, *row.Met, "one run of 0.2% fails it")

	runs = append(runsOf("drip", 1000, 2000, 5000), runsOf("nats", 0, 0, 0)...)
	assert.True(t, *makeRow(runs, mLoss, "drip", "nats", "", g).Met)
	runs = append(runsOf("drip", 1000, math.NaN()), runsOf("nats", 0, 0)...)
	assert.False(t, *makeRow(runs, mLoss, "drip", "nats", "", g).Met, "a run without a total is not lossless")
}

// Variants (Henjes07's points) are told apart.
func TestMakeRowVariant(t *testing.T) {
	runs := []RunResult{
		{System: "drip", Variant: "a", DeliveryRate: 10}, {System: "drip", Variant: "b", DeliveryRate: 99},
		{System: "activemq", Variant: "a", DeliveryRate: 2}, {System: "activemq", Variant: "b", DeliveryRate: 1},
	}
	row := makeRow(runs, mDelivered, "drip", "activemq", "a", nil)
	assert.Equal(t, Num(5), row.Ratio)
}

// The content workload's oracle: expected deliveries of n messages sent,
// cycling through the messages.
func TestContentWorkloadExpected(t *testing.T) {
	w, err := newContentWorkload(100, 1000)
	require.NoError(t, err)
	total := w.prefix[len(w.msgs)]
	assert.Equal(t, uint64(0), w.expected(0))
	assert.Equal(t, w.matches[0], w.expected(1))
	assert.Equal(t, total, w.expected(1000))
	assert.Equal(t, 2*total+w.matches[0]+w.matches[1], w.expected(2002))
	// Carzaniga09 §5.2.1's "5% client replication".
	assert.InDelta(t, 0.05, w.replication(), 0.02)
}
