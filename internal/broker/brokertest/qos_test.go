package brokertest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dripmesh/drip/internal/broker"
	"github.com/dripmesh/drip/internal/linkstate"
	"github.com/dripmesh/drip/internal/qos"
	"github.com/dripmesh/drip/internal/sim"
	"github.com/dripmesh/drip/internal/workload"
)

// Deadlines and two paths through real broker Nodes (docs/design.md §11).

func qosWorkload(seed int64) workload.Config {
	wl := workload.SingleConstraint()
	wl.Seed, wl.FiltersPerPredicate = seed, 8
	return wl
}

// ring is n brokers in a ring, each link with the given one-way delay.
func ring(n int, delay time.Duration) sim.Topology {
	t := sim.Ring(n)
	for i := range t.Links {
		t.Links[i].Delay = delay
	}
	return t
}

// missing counts the messages published in [from, to) that subscriber sub
// should have and did not get.
func missing(s *Sim, sub int, from, to time.Duration) (missed, expected int) {
	got := map[uint64]bool{}
	for _, d := range s.Ledger().Received(sub) {
		got[d.Msg] = true
	}
	for _, id := range s.Ledger().Expected(sub, from, to) {
		expected++
		if !got[id] {
			missed++
		}
	}
	return missed, expected
}

func TestTwoPathsSurviveLinkCuts(t *testing.T) {
	// Kim10 §2.3: a subscription that asks for two paths gets every
	// message over two link-disjoint paths, so cutting a link of the first
	// path loses nothing, where a one-path subscription loses what was on
	// the link. A ring of six: publisher and subscribers on opposite sides
	// (0 and 3), so the two paths are the ring's halves. Every 2 s the
	// first link on the current path from 0 to 3 is cut, and healed 1 s
	// later.
	s, err := New(Options{
		Seed: 11, Topology: ring(6, 20*time.Millisecond), Workload: qosWorkload(11),
		Subscribers: 16, Publishers: 1, Rate: 2000,
		ClientBrokers: []uint32{0, 3}, // publisher 0 at router 0; odd subscribers at 3
		Flow:          func(i int) qos.Flow { return qos.Flow{TwoPaths: i%4 == 1} },
	})
	require.NoError(t, err)
	s.RunUntil(3 * time.Second)
	require.True(t, s.Converged())
	var cuts [][2]uint32
	for k := range 5 {
		at := time.Duration(3+2*k) * time.Second
		s.RunUntil(at)
		next, ok := s.Node(0).Inspect().NextHops[3]
		require.True(t, ok)
		s.Cut(0, next)
		cuts = append(cuts, [2]uint32{0, next})
		s.RunUntil(at + time.Second)
		s.Heal(0, next)
	}
	s.RunUntil(16 * time.Second)
	require.Empty(t, s.Errors())

	var two, one, twoExpected, oneExpected int
	for sub := 1; sub < 16; sub += 2 {
		m, e := missing(s, sub, 3*time.Second, 13*time.Second)
		if sub%4 == 1 {
			two, twoExpected = two+m, twoExpected+e
		} else {
			one, oneExpected = one+m, oneExpected+e
		}
	}
	t.Logf("cuts %v: two paths missed %d of %d, one path %d of %d", cuts, two, twoExpected, one, oneExpected)
	require.Positive(t, twoExpected)
	require.Positive(t, oneExpected)
	assert.Zero(t, two, "a two-path subscription lost messages to a single link cut")
	assert.Positive(t, one, "the cuts cost one-path subscriptions nothing: the test shows nothing")
	assert.Positive(t, s.Counters("drip_second_path_bytes_total", "")[""])
	assert.Positive(t, s.Counters("drip_redundant_copies_suppressed_total", "")[""])
	assert.Zero(t, s.Counters("drip_duplicates_suppressed_total", "verdict")["duplicate"],
		"second copies counted as disagreeing routes")
	rep := s.Check(3 * time.Second)
	assert.Zero(t, rep.StreamDuplicates+rep.AppDuplicates, "%s", rep)
}

func TestDeadlineMeasuredAlongThePath(t *testing.T) {
	// A line 0–1–2–3 of 10 ms links: a message from 0 reaches 3 after
	// 30 ms. The mesh's measure of the time since acceptance (budgets set
	// as bundles leave, less each link's one-way estimate) must agree with
	// the virtual clock, and a subscription whose deadline the path cannot
	// keep (20 ms) counts every delivery as a miss, one that it can (50 ms)
	// none.
	topo := sim.Line(4)
	for i := range topo.Links {
		topo.Links[i].Delay = 10 * time.Millisecond
	}
	s, err := New(Options{
		Seed: 5, Topology: topo, Workload: qosWorkload(5),
		Subscribers: 8, Publishers: 1, Rate: 200,
		ClientBrokers: []uint32{0, 3},
		Flow: func(i int) qos.Flow {
			switch i % 4 {
			case 1:
				return qos.Flow{Deadline: 20 * time.Millisecond}
			case 3:
				return qos.Flow{Deadline: 50 * time.Millisecond}
			}
			return qos.Flow{}
		},
	})
	require.NoError(t, err)
	s.RunUntil(10 * time.Second)
	require.Empty(t, s.Errors())

	tight := 0
	for sub := 1; sub < 8; sub += 2 {
		for _, d := range s.Ledger().Received(sub) {
			if d.PublishedAt < 3*time.Second {
				continue
			}
			require.NotZero(t, d.Elapsed, "subscriber %d message %d: no elapsed time measured", sub, d.Msg)
			assert.InDelta(t, d.Latency.Seconds(), d.Elapsed.Seconds(), 0.002,
				"subscriber %d message %d: measured %v, took %v", sub, d.Msg, d.Elapsed, d.Latency)
			if sub%4 == 1 {
				tight++
			}
		}
	}
	require.Positive(t, tight)
	misses := s.Counters("drip_deadline_missed_total", "")[""]
	// Deliveries before 3 s count too: the tight subscribers' every one.
	tightAll := 0
	for sub := 1; sub < 8; sub += 4 {
		tightAll += len(s.Ledger().Received(sub))
	}
	assert.InDelta(t, float64(tightAll), misses, 2, "misses are the tight subscribers' deliveries, and only theirs")
	assert.Positive(t, s.Counters("drip_deadline_bundles_total", "")[""])
}

func TestDeadlineReroutesAtOnce(t *testing.T) {
	// Kim10 §2.2: with RTT costs and a periodic best-path check (every
	// 30 s here), a link whose delay jumps is routed around only at the
	// next check, unless a deadline flow's budget breaks: then at the next
	// hello. A square 0–1–3, 0–2–3 with the 0–1–3 side fast (5 ms links)
	// and the 0–2–3 side slower (15 ms); at 8 s link 0–1 gains 60 ms.
	// Subscribers at 3 ask for 45 ms (or nothing); the time until
	// latencies fall back under 45 ms is the reaction time. The check's
	// phase is jittered per router; in this run node 0's next check comes
	// 14 s after the jump.
	topo := sim.Topology{Routers: []uint32{0, 1, 2, 3}, Links: []sim.Link{
		{A: 0, B: 1, Weight: 1, Delay: 5 * time.Millisecond},
		{A: 1, B: 3, Weight: 1, Delay: 5 * time.Millisecond},
		{A: 0, B: 2, Weight: 1, Delay: 15 * time.Millisecond},
		{A: 2, B: 3, Weight: 1, Delay: 15 * time.Millisecond},
	}}
	react := func(deadline time.Duration) time.Duration {
		s, err := New(Options{
			Seed: 3, Topology: topo, Workload: qosWorkload(3),
			Subscribers: 8, Publishers: 1, Rate: 300,
			ClientBrokers: []uint32{0, 3},
			Config: func(c *broker.Config) {
				c.LinkState.CostMode = linkstate.CostRTT
				c.LinkState.CostInterval = 30 * time.Second
			},
			Flow: func(int) qos.Flow { return qos.Flow{Deadline: deadline} },
		})
		require.NoError(t, err)
		s.RunUntil(8 * time.Second)
		s.SetExtraDelay(0, 1, 60*time.Millisecond)
		s.RunUntil(50 * time.Second)
		require.Empty(t, s.Errors())
		// The reaction ends at the last message above 45 ms.
		var last time.Duration
		for sub := 1; sub < 8; sub += 2 {
			for _, d := range s.Ledger().Received(sub) {
				if d.PublishedAt >= 8*time.Second && d.Latency > 45*time.Millisecond {
					last = max(last, d.PublishedAt)
				}
			}
		}
		return last - 8*time.Second
	}
	with, without := react(45*time.Millisecond), react(0)
	t.Logf("slow for %v with a deadline, %v without", with, without)
	assert.Less(t, with, 3*time.Second, "a deadline flow's budget broke and nothing rerouted within two hellos")
	assert.Greater(t, without, 5*time.Second, "without deadlines the periodic check should decide: the test shows nothing")

}
