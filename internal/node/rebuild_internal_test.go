package node

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/dripmesh/drip/internal/encoding"
)

// creepingClock advances by step at every reading, as a clock does while
// a slow computation runs between two readings.
type creepingClock struct {
	*clocktesting.FakeClock // for the timers, which the node does not use
	t                       time.Time
	step                    time.Duration
}

func (c *creepingClock) Now() time.Time                  { c.t = c.t.Add(c.step); return c.t }
func (c *creepingClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

// TestRebuildPacing: while advertisements keep changing, PREDICATES
// rebuilds come no closer than PredicateRebuildInterval, nor than ten times
// as long as the last one took on the node's clock; a change is still
// rebuilt in the end.
func TestRebuildPacing(t *testing.T) {
	tests := []struct {
		name string
		// step is how far the clock moves at each reading, a rebuild's
		// duration among them.
		step           time.Duration
		minGap, maxGap time.Duration
	}{
		{"instant rebuilds: the interval", 0, 100 * time.Millisecond, 100 * time.Millisecond},
		{"30 ms rebuilds: ten times that", 30 * time.Millisecond, 300 * time.Millisecond, 400 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := &creepingClock{FakeClock: clocktesting.NewFakeClock(time.Unix(1e9, 0)), t: time.Unix(1e9, 0)}
			n, err := New(DefaultConfig(1, "b1"), WithClock(clk))
			require.NoError(t, err)
			clk.step = tt.step
			var builds []time.Time
			last := n.preds.Load()
			for range 200 {
				clk.t = clk.t.Add(10 * time.Millisecond)
				// An advertisement arrives every 10 ms.
				n.table.Set(2, []encoding.Bloom{{}})
				n.predsDirty = true
				at := clk.t
				n.flush()
				if p := n.preds.Load(); p != last {
					last = p
					builds = append(builds, at)
				}
			}
			require.Greater(t, len(builds), 3)
			gapMin, gapMax := time.Hour, time.Duration(0)
			for i := 1; i < len(builds); i++ {
				gap := builds[i].Sub(builds[i-1])
				gapMin, gapMax = min(gapMin, gap), max(gapMax, gap)
			}
			assert.GreaterOrEqual(t, gapMin, tt.minGap)
			assert.LessOrEqual(t, gapMax, tt.maxGap)

			// The changes stop: the last one is rebuilt once the wait is over.
			for range 50 {
				clk.t = clk.t.Add(10 * time.Millisecond)
				n.flush()
			}
			assert.False(t, n.AdvertisementPending(), "a change was never rebuilt")
		})
	}
}

// TestPartialIndexBuiltWholeWhenQuiet: a change of one router's
// advertisement re-indexes that router alone (a partial snapshot), and
// once changes pause for compactAfter the whole table is indexed again;
// drip_predicate_index_rebuild_duration_seconds counts each by kind.
func TestPartialIndexBuiltWholeWhenQuiet(t *testing.T) {
	clk := &creepingClock{FakeClock: clocktesting.NewFakeClock(time.Unix(1e9, 0)), t: time.Unix(1e9, 0)}
	reg := prometheus.NewRegistry()
	n, err := New(DefaultConfig(1, "b1"), WithClock(clk), WithRegisterer(reg))
	require.NoError(t, err)
	rebuilds := func() (full, partial uint64) {
		families, err := reg.Gather()
		require.NoError(t, err)
		kinds := map[string]uint64{}
		for _, f := range families {
			if f.GetName() != "drip_predicate_index_rebuild_duration_seconds" {
				continue
			}
			for _, m := range f.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "kind" {
						kinds[l.GetValue()] = m.GetHistogram().GetSampleCount()
					}
				}
			}
		}
		require.Len(t, kinds, 2, "both kinds exported from the start: %v", kinds)
		return kinds["full"], kinds["partial"]
	}
	full, partial := rebuilds()
	require.Equal(t, [2]uint64{0, 0}, [2]uint64{full, partial}, "full, partial before any rebuild")
	bloom := func(bit int) encoding.Bloom {
		var b encoding.Bloom
		b.Set(bit)
		return b
	}
	for r := range uint32(20) {
		n.table.Set(r+2, []encoding.Bloom{bloom(int(r)), bloom(int(r) + 100)})
	}
	n.predsDirty = true
	n.flush()
	require.False(t, n.preds.Load().Partial(), "the first build is whole")

	clk.t = clk.t.Add(time.Second)
	n.table.Set(5, []encoding.Bloom{bloom(7)})
	n.predsDirty = true
	n.flush()
	require.True(t, n.preds.Load().Partial(), "one router changed: re-indexed alone")
	full, partial = rebuilds()
	require.Equal(t, [2]uint64{1, 1}, [2]uint64{full, partial}, "full, partial after the first build and one change")
	for range 19 { // 1.9 s of ticks without a change
		clk.t = clk.t.Add(100 * time.Millisecond)
		n.flush()
		require.True(t, n.preds.Load().Partial(), "built whole before changes paused for %v", compactAfter)
	}
	clk.t = clk.t.Add(100 * time.Millisecond)
	n.flush()
	require.False(t, n.preds.Load().Partial(), "not built whole after changes paused for %v", compactAfter)
	full, partial = rebuilds()
	assert.Equal(t, [2]uint64{2, 1}, [2]uint64{full, partial}, "full, partial after the compaction")
	f, _ := n.preds.Load().Filters(5)
	assert.Equal(t, []encoding.Bloom{bloom(7)}, f)
}

// heldBuilder keeps the PREDICATES builds it is given until the test runs
// and installs them.
type heldBuilder struct{ builds []*encoding.Build }

func (h *heldBuilder) Start(b *encoding.Build) { h.builds = append(h.builds, b) }

// TestIndexBuildsOneAtATime: a PREDICATES build handed to the node's
// IndexBuilder leaves the data plane on the last snapshot until it is
// installed, no second build starts while it is in flight, the changes
// made meanwhile are in the next one, and the pacing counts the build's
// time from its plan to its install.
func TestIndexBuildsOneAtATime(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1e9, 0))
	n, err := New(DefaultConfig(1, "b1"), WithClock(clk))
	require.NoError(t, err)
	h := &heldBuilder{}
	n.SetIndexBuilder(h)
	bloom := func(bit int) encoding.Bloom {
		var b encoding.Bloom
		b.Set(bit)
		return b
	}
	n.table.Set(2, []encoding.Bloom{bloom(1)})
	n.predsDirty = true
	clk.Step(time.Second)
	n.flush()
	require.Len(t, h.builds, 1, "a change: one build")
	before := n.preds.Load()

	n.table.Set(3, []encoding.Bloom{bloom(2)})
	n.predsDirty = true
	for range 10 {
		clk.Step(time.Second)
		n.flush()
	}
	require.Len(t, h.builds, 1, "a second build started while one was in flight")
	require.Same(t, before, n.preds.Load(), "the data plane left the last snapshot before the build was installed")
	require.True(t, n.AdvertisementPending(), "a build in flight is pending")

	n.InstallIndex(h.builds[0].Run())
	assert.Equal(t, []uint32{1, 2}, n.preds.Load().Routers(), "the build has the table as it was planned (and the node itself)")
	assert.Equal(t, 10*time.Second, n.lastBuildTook, "from the plan to the install")
	n.InstallIndex(h.builds[0])
	assert.Equal(t, []uint32{1, 2}, n.preds.Load().Routers(), "a build installed twice is ignored")

	// The change made meanwhile waits for the pacing: ten times 10 s from
	// the last build's start, 10 s ago.
	clk.Step(89 * time.Second)
	n.flush()
	require.Len(t, h.builds, 1, "the next build started before the pacing allowed it")
	clk.Step(time.Second)
	n.flush()
	require.Len(t, h.builds, 2, "the change made during the first build was never built")
	n.InstallIndex(h.builds[1].Run())
	assert.Equal(t, []uint32{1, 2, 3}, n.preds.Load().Routers())
	assert.False(t, n.AdvertisementPending())
}
