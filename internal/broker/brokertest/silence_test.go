package brokertest

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dripmesh/drip/internal/broker"
	"github.com/dripmesh/drip/internal/linkstate"
	"github.com/dripmesh/drip/internal/qos"
	"github.com/dripmesh/drip/internal/sim"
)

// ringOfSix is a ring of six brokers with links of the given delay, a
// publisher at router 0 sending 1,000 msg/s and eight subscribers at 0 and
// 3, run until it has converged; next is router 0's next hop towards 3,
// the first link of the path whose failures the tests stage. edit, if not
// nil, changes the options first.
func ringOfSix(t *testing.T, seed int64, delay time.Duration, edit func(*Options)) (*Sim, uint32) {
	t.Helper()
	o := Options{
		Seed: uint64(seed), Topology: ring(6, delay), Workload: qosWorkload(seed),
		Subscribers: 8, Publishers: 1, Rate: 1000,
		ClientBrokers: []uint32{0, 3},
	}
	if edit != nil {
		edit(&o)
	}
	s, err := New(o)
	require.NoError(t, err)
	s.RunUntil(3 * time.Second)
	require.True(t, s.Converged())
	next, ok := s.Node(0).Inspect().NextHops[3]
	require.True(t, ok)
	return s, next
}

// silentCut is what one silent link failure did to a ring: deliveries a
// one-path subscription got late (held in the stalled stream) or never,
// the same for two paths, and when the cut link's ends suspected it.
type silentCut struct {
	oneLate, oneExpected int
	twoLate, twoExpected int
	detected             []time.Duration // per end; 0: not suspected
}

// runSilentCut cuts the first link on the path from router 0 to router 3
// of a ring of six without telling either end — a path that drops
// everything — for 1.5 s, shorter than the dead interval, and measures
// what arrived more than late after it was published, or never.
func runSilentCut(t *testing.T, seed int64, configure func(*broker.Config), late time.Duration) silentCut {
	s, next := ringOfSix(t, seed, 10*time.Millisecond, func(o *Options) {
		o.Flow = func(i int) qos.Flow { return qos.Flow{TwoPaths: i%4 == 1} }
		o.Config = configure
	})
	cutAt := s.Now()
	s.Silence(0, next)
	s.RunUntil(cutAt + 1500*time.Millisecond)
	s.Unsilence(0, next)
	s.RunUntil(cutAt + 3*time.Second)
	require.Empty(t, s.Errors())
	assert.Zero(t, s.Counters("drip_bundles_refused_total", "reason")["reverse_path"],
		"second copies refused as if they had to take the first path")

	var r silentCut
	for sub := 1; sub < 8; sub += 2 {
		at := map[uint64]time.Duration{}
		for _, d := range s.Ledger().Received(sub) {
			at[d.Msg] = d.Latency
		}
		for _, id := range s.Ledger().Expected(sub, cutAt-100*time.Millisecond, cutAt+1500*time.Millisecond) {
			lat, got := at[id]
			bad := !got || lat > late
			if sub%4 == 1 {
				r.twoExpected++
				if bad {
					r.twoLate++
				}
			} else {
				r.oneExpected++
				if bad {
					r.oneLate++
				}
			}
		}
	}
	base := s.base
	for _, ends := range [][2]uint32{{0, next}, {next, 0}} {
		at := s.CountersOf(ends[0], "drip_link_suspected_timestamp_seconds", "peer")[fmt.Sprintf("b%d", ends[1])]
		if at == 0 {
			r.detected = append(r.detected, 0)
			continue
		}
		r.detected = append(r.detected, time.Unix(0, int64(at*1e9)).Sub(base)-cutAt)
	}
	return r
}

func TestSilentLinkFailureCostsMilliseconds(t *testing.T) {
	// A link cut silently is routed around once three of its 20 ms
	// keepalives are missed, as the lab's experiments configure it
	// (docs/results/harmony.md), instead of staying in routes, its stream
	// stalled, until the dead interval; and what it took in the moments
	// before is sent again around it (node's replay.go). A one-path
	// subscription then gets nothing late; without the replay, what was
	// on its way when the link failed; a two-path one gets nothing late
	// either way. Without fast detection, everything routed over the link
	// in those 1.5 s is late.
	lab := func(c *broker.Config) {
		c.TickInterval = 10 * time.Millisecond
		c.LinkState.Keepalive, c.LinkState.SuspectMultiplier = 20*time.Millisecond, 3
	}
	noReplay := func(c *broker.Config) { lab(c); c.LinkReplayBytes = 0 }
	off := func(c *broker.Config) { lab(c); c.LinkState.SuspectMultiplier = 0 }
	const late = 250 * time.Millisecond
	lostWithoutReplay := 0
	for _, seed := range []int64{1, 2, 3} {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			fast := runSilentCut(t, seed, lab, late)
			bare := runSilentCut(t, seed, noReplay, late)
			slow := runSilentCut(t, seed, off, late)
			t.Logf("fast detection: detected after %v; late one path %d of %d, two paths %d of %d; without the replay one path %d",
				fast.detected, fast.oneLate, fast.oneExpected, fast.twoLate, fast.twoExpected, bare.oneLate)
			t.Logf("dead interval only: late one path %d of %d, two paths %d of %d",
				slow.oneLate, slow.oneExpected, slow.twoLate, slow.twoExpected)
			require.Positive(t, fast.oneExpected)
			require.Positive(t, fast.twoExpected)
			for _, d := range fast.detected {
				assert.Positive(t, d, "both ends suspect the link")
				assert.LessOrEqual(t, d, 100*time.Millisecond, "within 100 ms")
			}
			assert.Equal(t, []time.Duration{0, 0}, slow.detected)
			assert.Zero(t, fast.oneLate)
			assert.Zero(t, fast.twoLate)
			// Of 1.6 s of messages, without the replay, those on their
			// way when the link failed and in the detection time.
			assert.LessOrEqual(t, bare.oneLate, bare.oneExpected/10+5)
			lostWithoutReplay += bare.oneLate
			// Without fast detection, second copies are what arrives on
			// time: the first copies wait in the stalled stream.
			assert.Zero(t, slow.twoLate, "second copies are taken in while the first ones are stalled")
			assert.Greater(t, slow.oneLate, slow.oneExpected/2, "the test shows nothing")
			assert.Greater(t, slow.oneLate, 3*bare.oneLate)
		})
	}
	assert.Positive(t, lostWithoutReplay, "the replay saves nothing here: the test shows nothing")
}

func TestDelayJumpsRefuseNothing(t *testing.T) {
	// Kim10 §4's delay scenario in virtual time: five brokers fully
	// meshed, RTT costs checked every 2 s, and one link at a time taking
	// 90 ms more each way for 2 s. Each jump silences the link for longer
	// than three keepalives, so it is suspected, routed around, probed and
	// taken back at its new cost; bundles on their way meanwhile leave
	// their source's tree where a broker reroutes them, and a correct
	// mesh must take them in (rerouted, docs/security.md): with the
	// reverse-path check alone some were refused.
	var topo sim.Topology
	for a := range 5 {
		topo.Routers = append(topo.Routers, uint32(a))
		for b := a + 1; b < 5; b++ {
			topo.Links = append(topo.Links, sim.Link{A: uint32(a), B: uint32(b), Weight: 1, Delay: time.Duration(4+3*len(topo.Links)) * time.Millisecond})
		}
	}
	s, err := New(Options{
		Seed: 1, Topology: topo, Workload: qosWorkload(1),
		Subscribers: 16, Publishers: 3, Rate: 300,
		Config: func(c *broker.Config) {
			c.TickInterval = 10 * time.Millisecond
			c.LinkState.Keepalive, c.LinkState.SuspectMultiplier = 20*time.Millisecond, 3
			c.LinkState.HelloInterval, c.LinkState.DeadInterval = 250*time.Millisecond, time.Second
			c.LinkState.CostMode, c.LinkState.CostInterval = linkstate.CostRTT, 2*time.Second
		},
	})
	require.NoError(t, err)
	s.RunUntil(3 * time.Second)
	at := 3 * time.Second
	for k := range 10 {
		a, b := uint32(k%5), uint32((k+2)%5)
		s.SetExtraDelay(a, b, 90*time.Millisecond)
		s.RunUntil(at + 2*time.Second)
		s.SetExtraDelay(a, b, 0)
		at += 3 * time.Second
		s.RunUntil(at)
	}
	s.RunUntil(at + 3*time.Second)
	require.Empty(t, s.Errors())
	missed, expected := 0, 0
	for sub := range 16 {
		m, e := missing(s, sub, 3*time.Second, at)
		missed, expected = missed+m, expected+e
	}
	assert.Zero(t, missed, "of %d", expected)
	assert.Positive(t, sum(s.Counters("drip_link_suspected_total", "peer")), "the jumps silence links: the test shows nothing")
	assert.Zero(t, s.Counters("drip_bundles_refused_total", "reason")["reverse_path"], "bundles of a correct mesh refused")
	rep := s.Check(3 * time.Second)
	assert.Zero(t, rep.StreamDuplicates+rep.AppDuplicates, "%s", rep)
}

func sum(m map[string]float64) (total float64) {
	for _, v := range m {
		total += v
	}
	return total
}
