package congestion

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	cc "github.com/dripmesh/drip/internal/congestion"
	"github.com/dripmesh/drip/internal/content"
	"github.com/dripmesh/drip/internal/topology"
)

func TestMaxMinShares(t *testing.T) {
	for _, tc := range []struct {
		name     string
		demands  []float64
		capacity float64
		want     []float64
	}{
		{"all fit", []float64{10, 20, 30}, 100, []float64{10, 20, 30}},
		{"equal split", []float64{100, 100, 100}, 90, []float64{30, 30, 30}},
		// Malekpour11 Fig. 9's shape: the small demand is met, the others
		// split the rest.
		{"small demand met", []float64{80, 200, 400}, 250, []float64{80, 85, 85}},
		{"order kept", []float64{400, 80, 200}, 250, []float64{85, 80, 85}},
		{"two levels", []float64{10, 50, 100, 100}, 150, []float64{10, 46.666666666666664, 46.666666666666664, 46.666666666666664}},
		{"no capacity", []float64{10, 20}, 0, []float64{0, 0}},
		{"negative demand", []float64{-5, 20}, 10, []float64{0, 10}},
		{"none", nil, 10, []float64{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := cc.MaxMin(tc.capacity, tc.demands)
			assert.InDeltaSlice(t, tc.want, got, 1e-9)
			sum := 0.0
			for i, s := range got {
				sum += s
				assert.LessOrEqual(t, s, max(tc.demands[i], 0)+1e-9, "no flow gets more than it asks")
			}
			assert.LessOrEqual(t, sum, max(tc.capacity, 0)+1e-9)
		})
	}
}

func TestJain(t *testing.T) {
	for _, tc := range []struct {
		name          string
		rates, shares []float64
		want          float64
	}{
		{"each its share", []float64{80, 85, 85}, []float64{80, 85, 85}, 1},
		{"same fraction of each share", []float64{40, 42.5, 42.5}, []float64{80, 85, 85}, 1},
		{"one takes all", []float64{90, 0, 0}, []float64{30, 30, 30}, 1.0 / 3},
		// (1 + 0.5)² / (2 · (1 + 0.25)) = 0.9
		{"half", []float64{10, 5}, []float64{10, 10}, 0.9},
		{"zero shares left out", []float64{10, 99}, []float64{10, 0}, 1},
		{"nothing to share", []float64{0, 0}, []float64{0, 0}, 1},
		{"nobody received", []float64{0, 0}, []float64{5, 5}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.InDelta(t, tc.want, Jain(tc.rates, tc.shares), 1e-9)
		})
	}
}

func TestLossReduction(t *testing.T) {
	assert.InDelta(t, 20.0, LossReduction(2000, 100), 1e-9)
	assert.InDelta(t, 0.5, LossReduction(50, 100), 1e-9, "control losing more is a reduction below 1")
	assert.True(t, math.IsInf(LossReduction(10, 0), 1))
	assert.InDelta(t, 1.0, LossReduction(0, 0), 1e-9)
}

func TestSmoothMeanMedian(t *testing.T) {
	s := []float64{4, 8, 0, 4, 100}
	assert.Equal(t, []float64{4, 6, 4, 4, 104.0 / 3}, Smooth(s, 3))
	assert.Equal(t, s, Smooth(s, 1))
	assert.Equal(t, s, Smooth(s, 0), "a window under one bin is one bin")
	assert.InDelta(t, 4.0, Mean(s, 0, 4), 1e-9)
	assert.InDelta(t, 52.0, Mean(s, 3, 99), 1e-9, "clamped to the series")
	assert.Zero(t, Mean(s, 3, 3))
	assert.InDelta(t, 4.0, Median(s, 0, 5), 1e-9)
	assert.InDelta(t, 6.0, Median(s, 1, 5), 1e-9, "even count: the mean of the middle two, 4 and 8")
	assert.Zero(t, Median(nil, 0, 3))
}

func TestAdaptationTime(t *testing.T) {
	bin := 250 * time.Millisecond
	// The capacity halves at bin 4; the rate comes down over three bins.
	down := []float64{100, 100, 100, 100, 90, 70, 52, 50, 49, 51, 50, 50}
	for _, tc := range []struct {
		name   string
		series []float64
		from   int
		target float64
		hold   int
		want   time.Duration
		ok     bool
	}{
		{"settles at the third bin after the change", down, 4, 50, 2, 3 * bin, true},
		{"holding longer changes nothing here", down, 4, 50, 4, 3 * bin, true},
		{"already there", []float64{50, 50, 50}, 0, 50, 2, bin, true},
		{"a bin in band that does not last is not settled", []float64{100, 50, 100, 50, 50}, 0, 50, 2, 4 * bin, true},
		{"never", []float64{100, 100, 100}, 0, 50, 1, 0, false},
		{"settles too late to hold", []float64{100, 100, 50}, 0, 50, 2, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := AdaptationTime(tc.series, bin, tc.from, tc.target, 0.1, tc.hold)
			assert.Equal(t, tc.ok, ok)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestScheduleRate(t *testing.T) {
	s := Schedule{
		{Length: 10 * time.Second, From: 100, To: 100},
		{Length: 10 * time.Second, From: 100, To: 1100},
		{Length: 4 * time.Second, From: 50, To: 50, On: time.Second, Off: time.Second},
	}
	for _, tc := range []struct {
		at   time.Duration
		want float64
	}{
		{0, 100}, {9 * time.Second, 100},
		{10 * time.Second, 100}, {15 * time.Second, 600}, {19 * time.Second, 1000},
		{20 * time.Second, 50}, {20*time.Second + 999*time.Millisecond, 50},
		{21 * time.Second, 0}, {22*time.Second + time.Millisecond, 50}, {23*time.Second + time.Millisecond, 0},
		{24 * time.Second, 0}, {time.Hour, 0},
	} {
		assert.InDelta(t, tc.want, s.Rate(tc.at), 1e-9, "at %v", tc.at)
	}
	assert.Equal(t, 24*time.Second, s.Length())
}

func TestSubscriberMatches(t *testing.T) {
	s := Subscriber{Publishers: []int{1}, KFrom: 20, KTo: 50}
	assert.Equal(t, "pub = 1 && d = 2 || pub = 1 && d = 3 || pub = 1 && d = 4", s.Predicate())
	n := 0
	for i := range uint64(1000) {
		if s.Matches(1, i) {
			n++
		}
		assert.False(t, s.Matches(0, i), "another publisher's")
	}
	assert.InDelta(t, 300, n, 45, "30% of the messages")
	// Spread, not in runs: the longest gap between two taken messages is
	// far below the 70 of k = n mod 100.
	longest, gap := 0, 0
	for i := range uint64(1000) {
		if s.Matches(1, i) {
			gap = 0
		} else {
			gap++
			longest = max(longest, gap)
		}
	}
	assert.Less(t, longest, 30)
	assert.Equal(t, "d = 0", Subscriber{Publishers: []int{0, 1}, KTo: 10}.Predicate())
	assert.Equal(t, "pub = 2", Subscriber{Publishers: []int{2}, KTo: 100}.Predicate())
	assert.Equal(t, "k >= 30 && k < 40", Subscriber{Publishers: []int{0, 1}, KFrom: 30, KTo: 40}.RangePredicate())
	assert.Equal(t, "pub = 0 && k >= 0 && k < 20", Subscriber{Publishers: []int{0}, KTo: 20}.RangePredicate())
}

func TestScenariosAreConsistent(t *testing.T) {
	all := Scenarios(1, 8, 1000)
	for _, name := range Names() {
		s, ok := all[name]
		if !assert.True(t, ok, name) {
			continue
		}
		data, err := s.Topology.Marshal()
		if assert.NoError(t, err, name) {
			_, err = topology.Parse(data)
			assert.NoError(t, err, "%s: not a valid topology file", name)
		}
		assert.Positive(t, s.Length(), name)
		assert.NotEmpty(t, s.Steps, name)
		assert.Zero(t, s.Steps[0].At, "%s: the first step is the start", name)
		for _, sub := range s.Subscribers {
			assert.Zero(t, sub.KFrom%10, name)
			assert.Zero(t, sub.KTo%10, name)
			_, err := content.Parse(sub.Predicate())
			assert.NoError(t, err, name)
			for _, p := range sub.Publishers {
				assert.Less(t, p, len(s.Publishers), name)
			}
		}
	}
	// Fig. 7 at the paper's bandwidth: 400 kbit/s of 1 KB messages is 50
	// a second, times the bandwidth scale.
	assert.InDelta(t, 400.0, all[Fig7].Publishers[0].Schedule.Rate(0), 1e-9)
	assert.Equal(t, []string{"20%", "50%", "100%"}, all[Fig9].Groups())
	assert.Equal(t, []string{"clear", "behind"}, all[IVE].Groups())
	assert.Len(t, all[IVE].Subscribers, 64)
	// The peers run where one pair meets a bottleneck without control's
	// other subjects (fairness, a TCP flow, §IV-E's receivers).
	for _, name := range Names() {
		names := []string{}
		for _, v := range Variants(all[name]) {
			names = append(names, v.Name)
		}
		want := []string{"drip", "drip+cc"}
		if name == Fig7 || name == Fig8 {
			want = append(want, "NATS", "ActiveMQ")
		}
		assert.Equal(t, want, names, name)
	}
}

// A peer's publisher that failed is recorded, not lost from the result;
// a context ending the run is no failure.
func TestAccountRecordsAPublisherError(t *testing.T) {
	s := Scenarios(1, 8, 1000)[Fig7]
	cfg := DefaultConfig()
	pubs := []*pubLog{{bins: []uint32{0, 0, 1}, offered: 3, err: errors.New("nats: connection closed")}}
	subs := []*subLog{{seen: [][]bool{{true, false, true}}, arrived: make([]float64, 4)}}
	vr := account(cfg, s, Variant{Name: "NATS", NATS: true}, pubs, subs, 4)
	require.Len(t, vr.Publishers, 1)
	assert.Equal(t, "nats: connection closed", vr.Publishers[0].Error)
	assert.Equal(t, uint64(3), vr.Publishers[0].Sent)
	assert.Equal(t, uint64(1), vr.Groups[0].Lost)

	pubs[0].err = context.Canceled
	assert.Empty(t, account(cfg, s, Variant{Name: "NATS", NATS: true}, pubs, subs, 4).Publishers[0].Error)
}

// Fig. 8's findings read the peers' loss in each phase beside drip's, and
// judge only drip with control against the targets.
func TestFig8FindingsIncludeThePeers(t *testing.T) {
	cfg := DefaultConfig()
	s := Scenarios(0.1, 8, 1000)[Fig8] // 2 s phases: 8 bins each
	bins := int(s.Length() / cfg.Bin)
	group := func(lostPerBin float64) GroupResult {
		g := GroupResult{Sent: make([]float64, bins), LostPerBin: make([]float64, bins), Arrived: make([]float64, bins)}
		for b := range bins {
			g.Sent[b], g.LostPerBin[b], g.Arrived[b] = 100, lostPerBin, 100-lostPerBin
		}
		return g
	}
	r := &Result{Scenario: s, Config: cfg}
	for _, v := range []struct {
		v    Variant
		lost float64
	}{{Variant{Name: "drip"}, 10}, {Variant{Name: "drip+cc", Control: true}, 0}, {Variant{Name: "NATS", NATS: true}, 40}} {
		r.Variants = append(r.Variants, VariantResult{Variant: v.v, Groups: []GroupResult{group(v.lost)}})
	}
	byName := map[string]Finding{}
	for _, f := range Analyse(r) {
		byName[f.Name] = f
	}
	nats, ok := byName["NATS: phase 2 (8000 kbit/s): loss rate, second half"]
	require.True(t, ok, "the peer's loss is reported")
	assert.InDelta(t, 0.4, nats.Value, 1e-9)
	assert.Nil(t, nats.Met, "no target for a system without control")
	cc, ok := byName["drip+cc: phase 2 (8000 kbit/s): loss rate, second half"]
	require.True(t, ok)
	require.NotNil(t, cc.Met)
	assert.True(t, *cc.Met)
}
