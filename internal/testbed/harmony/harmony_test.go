package harmony

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dripmesh/drip/internal/topology"
)

func TestTopologyHasDetoursUnderTheDeadline(t *testing.T) {
	// doc.go's claim: every pair has a two-hop detour under 50 ms, so a
	// degraded direct path can be routed around in time.
	topo := Topology()
	data, err := topo.Marshal()
	require.NoError(t, err)
	_, err = topology.Parse(data)
	require.NoError(t, err, "the topology is not a valid topology file")
	require.Len(t, topo.Brokers, 5)
	require.Len(t, topo.Links, 10)
	d := func(a, b int) int {
		if a > b {
			a, b = b, a
		}
		return delays[[2]int{a, b}]
	}
	for a := 1; a <= 5; a++ {
		for b := a + 1; b <= 5; b++ {
			best := 1 << 30
			for c := 1; c <= 5; c++ {
				if c != a && c != b {
					best = min(best, d(a, c)+d(c, b))
				}
			}
			assert.Less(t, best, 50, "n%d–n%d has no detour under the deadline", a, b)
		}
	}
	for _, p := range Pairs() {
		assert.Contains(t, publishers, p.Topic)
	}
}

func TestScheduleIsTheSeeds(t *testing.T) {
	topo := Topology()
	a, b := Schedule(topo, 10, 0.12, 7), Schedule(topo, 10, 0.12, 7)
	assert.Equal(t, a, b, "the same seed, the same degradations: every variant meets them")
	assert.NotEqual(t, a, Schedule(topo, 10, 0.12, 8))
	assert.Empty(t, Schedule(topo, 10, 0, 7))
	assert.Len(t, Schedule(topo, 10, 1, 7), 100)
	// The probability holds over many periods.
	n := len(Schedule(topo, 2000, 0.12, 1))
	assert.InDelta(t, 0.12, float64(n)/20000, 0.01)
	links := map[[2]string]bool{}
	for _, l := range topo.Links {
		links[[2]string{l.A, l.B}] = true
	}
	for _, d := range a {
		assert.Less(t, d.Period, 10)
		assert.True(t, links[[2]string{d.A, d.B}], "%v is no link", d)
	}
}

func TestLatencyStats(t *testing.T) {
	ms := time.Millisecond
	var lat []time.Duration
	for i := 1; i <= 100; i++ {
		lat = append(lat, time.Duration(i)*ms) // 1..100 ms
	}
	lat = append(lat, 150*ms)
	s := latencyStats(lat, 50*ms)
	assert.InDelta(t, 51, s.P50, 0.01)
	assert.InDelta(t, 150, s.Max, 0.01)
	assert.InDelta(t, 51.0/101, s.OverDeadline, 1e-9, "51..100 and 150 are over 50 ms")
	assert.InDelta(t, 1.0/101, s.Over100ms, 1e-9)
	assert.Len(t, s.CDF, cdfSteps+1)
	assert.InDelta(t, 1, s.CDF[0], 0.01)
	assert.InDelta(t, 150, s.CDF[cdfSteps], 0.01)

	p := PairStats{Published: 10, Received: 7}
	p.account()
	assert.Equal(t, uint64(3), p.Lost)
	assert.InDelta(t, 0.3, p.LossRate, 1e-9)
	p = PairStats{Published: 5, Received: 6}
	p.account()
	assert.Zero(t, p.Lost, "more received than published is no loss")
}

func TestRunOnLoopback(t *testing.T) {
	// A smoke run without the lab: drip's variants deploy, subscribe,
	// publish and account for every message (no degradation, so none is
	// lost), and the plots render.
	if testing.Short() {
		t.Skip("deploys five brokers per variant (about 10 s)")
	}
	cfg := DefaultConfig(ScenarioDelay)
	cfg.Variants = []Variant{Variants()[0], Variants()[3]} // DP, BP+QoS+MP
	cfg.Periods, cfg.Period, cfg.Warmup, cfg.Drain = 2, time.Second, 300*time.Millisecond, time.Second
	// On loopback every RTT is the scheduler's: beside two CPU burners
	// BP's measured costs changed the LSDB every second or two, routing
	// never held still for Ready, and the run timed out (twice in three).
	// A floor of a second makes every loopback link cost the same, as a
	// lab's links of equal delay would; BP still measures its RTTs.
	cfg.CostFloor = time.Second
	// The lab's fast failure detection (20 ms keepalives, three missed)
	// is for its links; on loopback beside every other package's tests
	// under -race, 60 ms of silence is the scheduler's. The brokers'
	// defaults (250 ms, four missed) judge silence here.
	cfg.Keepalive, cfg.SuspectMultiplier = 250*time.Millisecond, 4
	cfg.Dir = t.TempDir()
	// The bound is for a hang: alone it takes 10 s, 18–33 s under -race,
	// and a CI run of every package beside it once took more than 60.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	r, err := Run(ctx, cfg)
	require.NoError(t, err)
	require.Len(t, r.Variants, 2)
	for _, v := range r.Variants {
		require.Len(t, v.Pairs, len(Pairs()))
		assert.Positive(t, v.All.Published, v.Variant.Name)
		assert.Zero(t, v.All.Lost, "%s lost messages on loopback (links suspected %.0f times; counters %v)", v.Variant.Name, v.Suspicions, v.Counters)
		assert.Zero(t, v.All.Duplicates, v.Variant.Name)
		assert.Len(t, v.All.CDF, cdfSteps+1, v.Variant.Name)
		assert.Equal(t, v.All.Published, v.All.Received, v.Variant.Name)
		assert.Equal(t, []uint64{0, 0}, v.Pairs[0].LostByPeriod, v.Variant.Name)
	}
	dir := t.TempDir()
	require.NoError(t, PlotLatency(r, dir+"/l.png"))
	require.NoError(t, PlotLoss(r, dir+"/x.png"))
}
