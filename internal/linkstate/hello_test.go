package linkstate

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func state(n *Node, peer uint32) NeighborState {
	for _, nb := range n.Neighbors() {
		if nb.ID == peer {
			return nb.State
		}
	}
	return 255
}

func rtt(n *Node, peer uint32) (time.Duration, int) {
	for _, nb := range n.Neighbors() {
		if nb.ID == peer {
			return nb.RTT, nb.Samples
		}
	}
	return -1, -1
}

func TestHelloHandshake(t *testing.T) {
	// docs/design.md §3: hellos with timestamps prove two-way reachability and
	// measure the RTT; the adjacency forms in about one RTT because a
	// router answers at once a neighbour that has not heard it yet.
	a, b := newNode(t, 1), newNode(t, 2)
	drain(a)
	drain(b)

	require.NoError(t, a.LinkUp(2, 1, 0))
	ha0 := only[*Hello](to(drain(a), 2))
	require.Len(t, ha0, 1)
	assert.Equal(t, Hello{Router: 1, Name: "rb", Version: Version, Digest: a.Digest()}, *ha0[0])

	require.ErrorIs(t, b.Step(1, ha0[0], 5*ms), ErrUnknownPeer, "no link yet")
	require.NoError(t, b.LinkUp(1, 1, 5*ms))
	hb0 := only[*Hello](to(drain(b), 1))
	require.Len(t, hb0, 1)
	assert.Equal(t, 5*ms, hb0[0].SentAt)

	require.NoError(t, b.Step(1, ha0[0], 10*ms))
	assert.Equal(t, StateInit, state(b, 1))
	hb1 := only[*Hello](to(drain(b), 1))
	require.Len(t, hb1, 1, "immediate answer to a neighbour that has not heard us")
	assert.True(t, hb1[0].Heard)
	assert.True(t, hb1[0].Echoed)
	assert.Equal(t, time.Duration(0), hb1[0].Echo)
	assert.Equal(t, time.Duration(0), hb1[0].Hold)

	require.NoError(t, a.Step(2, hb0[0], 15*ms))
	assert.Equal(t, StateInit, state(a, 2))
	ha1 := only[*Hello](to(drain(a), 2))
	require.Len(t, ha1, 1)
	assert.Equal(t, 5*ms, ha1[0].Echo)

	require.NoError(t, a.Step(2, hb1[0], 20*ms))
	assert.Equal(t, StateFull, state(a, 2))
	rd := drain(a)
	assert.Len(t, events(rd, EventAdjacencyUp), 1)
	d, n := rtt(a, 2)
	assert.Equal(t, 20*ms, d, "sent at 0, echoed without hold, back at 20 ms")
	assert.Equal(t, 1, n)
	out := to(rd, 2)
	assert.Len(t, only[*Hello](out), 1, "announce the adjacency at once")
	sa := only[*DBSummary](out)
	assert.Len(t, sa, 1, "each side starts its half of the database exchange")
	assert.Empty(t, only[*LSA](out), "the link is not advertised before the exchange")

	require.NoError(t, b.Step(1, ha1[0], 25*ms))
	assert.Equal(t, StateFull, state(b, 1))
	rd = drain(b)
	sb := only[*DBSummary](to(rd, 1))
	require.Len(t, sb, 1, "the higher ID sends its summary too")
	d, _ = rtt(b, 1)
	assert.Equal(t, 20*ms, d)

	// Each requests the other's own entries; once they arrive, the link
	// enters both LSAs.
	require.NoError(t, a.Step(2, sb[0], 30*ms))
	rd = drain(a)
	reqs := only[*DBRequest](to(rd, 2))
	require.Len(t, reqs, 1)
	assert.Equal(t, []Key{{KindRouter, 2}, {KindPredicate, 2}}, reqs[0].Keys)
	assert.Empty(t, only[*LSA](to(rd, 2)), "still waiting for what it requested")
	assert.Empty(t, events(rd, EventAdjacencyAdvertised))
	require.NoError(t, b.Step(1, reqs[0], 30*ms))
	for _, m := range to(drain(b), 1) {
		require.NoError(t, a.Step(2, m, 35*ms))
	}
	rd = drain(a)
	assert.Len(t, events(rd, EventAdjacencyAdvertised), 1)
	lsas := only[*LSA](to(rd, 2))
	require.Len(t, lsas, 1)
	assert.Equal(t, []Link{{Neighbor: 2, Cost: 1}}, lsas[0].Links)
	assert.True(t, a.Neighbors()[0].Advertised)
	assert.False(t, b.Neighbors()[0].Advertised, "b has not had a's summary")
}

func TestHelloEchoesEachHelloOnce(t *testing.T) {
	a := newNode(t, 1)
	require.NoError(t, a.LinkUp(2, 1, 0))
	drain(a)
	require.NoError(t, a.Step(2, &Hello{Router: 2, Version: Version, SentAt: 7 * ms, Heard: true}, 10*ms))
	first := only[*Hello](to(drain(a), 2))
	require.Len(t, first, 1)
	assert.True(t, first[0].Echoed)
	assert.Equal(t, 7*ms, first[0].Echo)
	a.Tick(time.Second + 10*ms)
	next := only[*Hello](to(drain(a), 2))
	require.Len(t, next, 1)
	assert.False(t, next[0].Echoed, "a second echo of one hello would weigh its sample twice")
}

func TestRTTSample(t *testing.T) {
	for _, tc := range []struct {
		name            string
		echo, hold, now time.Duration
		want            time.Duration
		samples         int
	}{
		{"no hold", 0, 0, 20 * ms, 20 * ms, 1},
		{"hold subtracted", 100 * ms, 300 * ms, 440 * ms, 40 * ms, 1},
		{"zero rtt", 50 * ms, 10 * ms, 60 * ms, 0, 1},
		{"negative sample ignored", 50 * ms, 20 * ms, 60 * ms, 0, 0},
		{"negative hold ignored", 0, -5 * ms, 60 * ms, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := newNode(t, 1)
			require.NoError(t, a.LinkUp(2, 1, 0))
			require.NoError(t, a.Step(2, &Hello{Router: 2, Version: Version, Echoed: true, Echo: tc.echo, Hold: tc.hold}, tc.now))
			got, n := rtt(a, 2)
			assert.Equal(t, tc.samples, n)
			assert.Equal(t, tc.want, got)
		})
	}
}

// sample delivers a hello from peer to n that yields an RTT sample of s.
func sample(t *testing.T, n *Node, peer uint32, now, s time.Duration) Ready {
	t.Helper()
	require.NoError(t, n.Step(peer, &Hello{
		Router: peer, Version: Version, SentAt: now, Heard: true,
		Echoed: true, Echo: now - s, Digest: n.Digest(),
	}, now))
	if nb := n.nbrs[peer]; nb.state == StateFull && !nb.gotSummary && !nb.advertised {
		// The peer's half of the database exchange: an empty database.
		require.NoError(t, n.Step(peer, &DBSummary{}, now))
	}
	return drain(n)
}

func TestEWMA(t *testing.T) {
	// Kim10 §2.1: an EWMA with weight 0.25 on the new measurement.
	a := newNode(t, 1)
	require.NoError(t, a.LinkUp(2, 1, 0))
	want := []time.Duration{20 * ms, 25 * ms, 28750 * time.Microsecond, 26562500 * time.Nanosecond}
	for i, s := range []time.Duration{20 * ms, 40 * ms, 40 * ms, 20 * ms} {
		now := time.Duration(i+1) * time.Second
		sample(t, a, 2, now, s)
		got, _ := rtt(a, 2)
		assert.Equal(t, want[i], got, "after sample %d", i)
	}
	assert.Equal(t, 55*ms, ewma(40*ms, 100*ms, 0.25, false))
	assert.Equal(t, 100*ms, ewma(40*ms, 100*ms, 0.25, true))
}

func TestRTTCost(t *testing.T) {
	assert.Equal(t, uint32(1000), rttCost(0, 1000))
	assert.Equal(t, uint32(1000), rttCost(999*time.Microsecond, 1000))
	assert.Equal(t, uint32(20000), rttCost(20*ms, 1000))
	assert.Equal(t, uint32(1<<32-1), rttCost(time.Duration(1<<62), 1000))
}

func TestCostHysteresis(t *testing.T) {
	// Kim10 §2.1 / docs/design.md §3: a measured cost is re-advertised only when
	// it moves by more than 20% from the advertised one, so routes do not
	// flap with jitter.
	a := newNode(t, 1, rttMode)
	require.NoError(t, a.LinkUp(2, 7, 0))
	drain(a)
	rd := sample(t, a, 2, time.Second, 20*ms)
	require.Equal(t, StateFull, state(a, 2))
	lsas := only[*LSA](to(rd, 2))
	require.Len(t, lsas, 1)
	assert.Equal(t, []Link{{2, 20000}}, lsas[0].Links, "the first sample replaces the LinkUp weight")
	changed := events(rd, EventCostChanged)
	require.Len(t, changed, 1)
	assert.Equal(t, uint32(7), changed[0].OldCost)

	// A persistent 20% rise converges on 24 ms but never exceeds it.
	now := time.Second
	for range 30 {
		now += time.Second
		rd = sample(t, a, 2, now, 24*ms)
		assert.Empty(t, only[*LSA](to(rd, 2)), "at %v", now)
		assert.Empty(t, events(rd, EventCostChanged))
	}
	got, _ := rtt(a, 2)
	assert.InDelta(t, float64(24*ms), float64(got), float64(10*time.Microsecond))

	// 30 ms moves the average past 24 ms on the first sample.
	now += time.Second
	rd = sample(t, a, 2, now, 30*ms)
	lsas = only[*LSA](to(rd, 2))
	require.Len(t, lsas, 1)
	got, _ = rtt(a, 2)
	assert.Equal(t, []Link{{2, uint32(got.Microseconds())}}, lsas[0].Links)
	assert.Greater(t, lsas[0].Links[0].Cost, uint32(24000))

	// And the same threshold holds downwards, relative to the new cost.
	adv := lsas[0].Links[0].Cost
	var readvertised bool
	for range 20 {
		now += time.Second
		rd = sample(t, a, 2, now, 10*ms)
		if l := only[*LSA](to(rd, 2)); len(l) > 0 {
			readvertised = true
			got, _ = rtt(a, 2)
			assert.Less(t, float64(got.Microseconds()), 0.8*float64(adv))
			break
		}
	}
	assert.True(t, readvertised)
}

func TestCostWeightModeIgnoresRTT(t *testing.T) {
	a := newNode(t, 1)
	require.NoError(t, a.LinkUp(2, 7, 0))
	rd := sample(t, a, 2, time.Second, 20*ms)
	lsas := only[*LSA](to(rd, 2))
	require.Len(t, lsas, 1)
	assert.Equal(t, []Link{{2, 7}}, lsas[0].Links)
	rd = sample(t, a, 2, 2*time.Second, 200*ms)
	assert.Empty(t, only[*LSA](to(rd, 2)))
	// A new weight at LinkUp is advertised.
	require.NoError(t, a.LinkUp(2, 9, 3*time.Second))
	lsas = only[*LSA](to(drain(a), 2))
	require.Len(t, lsas, 1)
	assert.Equal(t, []Link{{2, 9}}, lsas[0].Links)
}

func TestDeadInterval(t *testing.T) {
	// docs/design.md §3: a neighbour silent for the dead interval loses its
	// adjacency and the router re-originates its LSA without it.
	a, b := newNode(t, 1), newNode(t, 2)
	m := newMesh(t, a, b)
	m.link(1, 2, 1, 0)
	require.Equal(t, StateFull, state(a, 2))
	dead := a.Config().DeadInterval
	for now := 100 * ms; now < dead; now += 100 * ms {
		a.Tick(now)
	}
	a.Tick(dead - 1)
	rd := drain(a)
	assert.Equal(t, StateFull, state(a, 2))
	assert.Len(t, only[*Hello](to(rd, 2)), 3, "hellos at 1 s, 2 s, 3 s")
	assert.Empty(t, events(rd, EventAdjacencyDown))

	a.Tick(dead)
	rd = drain(a)
	assert.Equal(t, StateDown, state(a, 2))
	down := events(rd, EventAdjacencyDown)
	require.Len(t, down, 1)
	assert.Equal(t, DownDead, down[0].Reason)
	assert.True(t, rd.RoutesChanged)
	_, ok := a.Routes().NextHop(2)
	assert.False(t, ok)
	own, _ := a.LSA(1)
	assert.Empty(t, own.Links)

	// Hellos after the dead interval no longer claim to hear b, and no
	// longer echo.
	a.Tick(dead + time.Second)
	h := only[*Hello](to(drain(a), 2))
	require.Len(t, h, 1)
	assert.False(t, h[0].Heard)
	assert.False(t, h[0].Echoed)

	// b is heard again: the adjacency comes back.
	require.NoError(t, a.Step(2, &Hello{Router: 2, Version: Version, Heard: true}, dead+1500*ms))
	assert.Equal(t, StateFull, state(a, 2))
	assert.Len(t, events(drain(a), EventAdjacencyUp), 1)
}

func TestPeerResetDropsAdjacency(t *testing.T) {
	a, b := newNode(t, 1), newNode(t, 2)
	m := newMesh(t, a, b)
	m.link(1, 2, 1, 0)
	require.NoError(t, a.Step(2, &Hello{Router: 2, Version: Version, Heard: false}, 10*ms))
	rd := drain(a)
	assert.Equal(t, StateInit, state(a, 2))
	down := events(rd, EventAdjacencyDown)
	require.Len(t, down, 1)
	assert.Equal(t, DownPeerReset, down[0].Reason)
	assert.True(t, only[*Hello](to(rd, 2))[0].Heard)
}

func TestHelloErrors(t *testing.T) {
	a := newNode(t, 1)
	require.NoError(t, a.LinkUp(2, 1, 0))
	drain(a)
	err := a.Step(2, &Hello{Router: 3, Version: Version}, ms)
	require.ErrorContains(t, err, "hello on the link to router 2 claims to come from router 3")
	assert.Equal(t, StateDown, state(a, 2))

	// Another protocol version is reported once and ignored.
	for range 3 {
		require.NoError(t, a.Step(2, &Hello{Router: 2, Version: Version + 1, Heard: true}, 2*ms))
	}
	rd := drain(a)
	assert.Len(t, events(rd, EventVersionMismatch), 1)
	assert.Equal(t, StateDown, state(a, 2))

	require.ErrorContains(t, a.LinkUp(1, 1, 0), "cannot link to itself")
	require.ErrorContains(t, a.LinkUp(3, 0, 0), "weight 0")
}

func TestAliveKeepsAdjacency(t *testing.T) {
	// docs/design.md §3: any frame from the neighbour (Alive) proves it
	// alive while its hellos are late, for up to helloSilence dead
	// intervals after the last hello; it never brings an adjacency up.
	dead := DefaultConfig(1, "").DeadInterval
	tests := []struct {
		name string
		// frames arrive without a hello; each is reported at the first
		// tick at or after its seen time, stamped with its arrival at.
		frames []frame
		// downAt is when a declares b dead (0: not before the end).
		downAt time.Duration
	}{
		{"no frames: dead interval", nil, dead},
		{"frames until 2 s: dead 4 s later", []frame{{time.Second, time.Second}, {2 * time.Second, 2 * time.Second}}, 2*time.Second + dead},
		{"a stale stamp reported last counts as its arrival", []frame{{3 * time.Second, 3 * time.Second}, {3500 * ms, time.Second}}, 3*time.Second + dead},
		{"a stamp reported late keeps it alive from its arrival", []frame{{3900 * ms, 3500 * ms}}, 3500*ms + dead},
		{"frames every 500 ms: dead at the hello silence", every(500*ms, helloSilence*dead+time.Second), helloSilence * dead},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := newNode(t, 1), newNode(t, 2)
			m := newMesh(t, a, b)
			m.link(1, 2, 1, 0)
			require.Equal(t, StateFull, state(a, 2))
			drain(a)
			var downAt time.Duration
			for now := 50 * ms; now <= helloSilence*dead+2*time.Second && downAt == 0; now += 50 * ms {
				for _, f := range tt.frames {
					if f.seen <= now && f.seen > now-50*ms {
						a.Alive(2, f.at)
					}
				}
				a.Tick(now)
				if down := events(drain(a), EventAdjacencyDown); len(down) > 0 {
					require.Len(t, down, 1)
					assert.Equal(t, DownDead, down[0].Reason)
					downAt = now
				}
			}
			if tt.downAt == 0 {
				assert.Zero(t, downAt, "adjacency dropped")
				return
			}
			assert.Equal(t, tt.downAt, downAt)
		})
	}

	t.Run("frames do not revive a dead adjacency", func(t *testing.T) {
		a, b := newNode(t, 1), newNode(t, 2)
		m := newMesh(t, a, b)
		m.link(1, 2, 1, 0)
		a.Tick(dead)
		require.Equal(t, StateDown, state(a, 2))
		a.Alive(2, dead+100*ms)
		a.Alive(9, dead+100*ms) // no such neighbour: ignored
		a.Tick(dead + 200*ms)
		assert.Equal(t, StateDown, state(a, 2))
		h := only[*Hello](to(drain(a), 2))
		for _, x := range h {
			assert.False(t, x.Heard, "a frame is not a hello: b has not heard a")
		}
	})
}

// frame is a frame without a hello that arrived at at and was handed to
// the protocol at seen.
type frame struct{ seen, at time.Duration }

// every lists frames arriving at the multiples of step in (0, until], each
// handed over at once.
func every(step, until time.Duration) []frame {
	var out []frame
	for t := step; t <= until; t += step {
		out = append(out, frame{t, t})
	}
	return out
}
