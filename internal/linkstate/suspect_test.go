package linkstate

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// lab is a mesh whose links carry the link layer's keepalives: every
// tick, each end of a link that is not cut hears a frame from the other
// (Alive), and control messages across a cut link are lost.
type lab struct {
	*mesh
	cut map[[2]uint32]bool
	now time.Duration
}

func newLab(t *testing.T, n int, edit ...func(*Config)) *lab {
	var nodes []*Node
	for id := 1; id <= n; id++ {
		nodes = append(nodes, newNode(t, uint32(id), edit...))
	}
	l := &lab{mesh: newMesh(t, nodes...), cut: map[[2]uint32]bool{}}
	l.drop = func(from, to uint32, _ Message) bool { return l.cut[[2]uint32{from, to}] }
	return l
}

// silence cuts (or heals) the link a–b in both directions, silently: no
// LinkDown, as on a path that drops everything.
func (l *lab) silence(a, b uint32, on bool) {
	l.cut[[2]uint32{a, b}], l.cut[[2]uint32{b, a}] = on, on
}

// run ticks every router every step until to; tick, if set, sees each
// tick's time and what each router said.
func (l *lab) run(step, to time.Duration, tick func(now time.Duration)) {
	for l.now+step <= to {
		l.now += step
		for _, id := range l.ids() {
			for _, nb := range l.nodes[id].Neighbors() {
				if !l.cut[[2]uint32{nb.ID, id}] {
					l.nodes[id].Alive(nb.ID, l.now)
				}
			}
		}
		l.reset()
		l.tick(l.now)
		if tick != nil {
			tick(l.now)
		}
	}
}

func (l *lab) inLSA(origin, peer uint32) bool {
	a, ok := l.nodes[origin].LSA(origin)
	require.True(l.t, ok)
	for _, k := range a.Links {
		if k.Neighbor == peer {
			return true
		}
	}
	return false
}

func (l *lab) info(id, peer uint32) NeighborInfo {
	for _, nb := range l.nodes[id].Neighbors() {
		if nb.ID == peer {
			return nb
		}
	}
	l.t.Fatalf("router %d has no neighbour %d", id, peer)
	return NeighborInfo{}
}

// triangle is three routers where 1 reaches 2 directly (cost 1) or over 3
// (cost 2 + 2), with fast detection of keepalives every 20 ms, three of
// them of silence.
func triangle(t *testing.T, edit ...func(*Config)) *lab {
	l := newLab(t, 3, append([]func(*Config){fastDetect(20*ms, 3)}, edit...)...)
	l.link(1, 2, 1, 0)
	l.link(1, 3, 2, 0)
	l.link(2, 3, 2, 0)
	l.run(10*ms, time.Second, nil) // the exchanges finish
	next, ok := l.nodes[3].Routes().NextHop(2)
	require.True(t, ok)
	require.Equal(t, uint32(2), next)
	next, _ = l.nodes[1].Routes().NextHop(2)
	require.Equal(t, uint32(2), next, "the direct link first")
	return l
}

func TestSilentLinkIsRoutedAroundAndBack(t *testing.T) {
	l := triangle(t)
	cutAt := l.now
	l.silence(1, 2, true)
	var suspected time.Duration
	l.run(10*ms, cutAt+500*ms, func(now time.Duration) {
		if s := events(*l.log[1], EventLinkSuspect); len(s) > 0 && suspected == 0 {
			suspected = now
			require.Len(t, s, 1)
			assert.Equal(t, uint32(2), s[0].Peer)
			assert.Equal(t, 60*ms, s[0].RTT, "the silence is three keepalives")
		}
	})
	assert.Equal(t, cutAt+60*ms, suspected, "three keepalives after the last frame")
	for _, ends := range [][2]uint32{{1, 2}, {2, 1}} {
		assert.False(t, l.inLSA(ends[0], ends[1]), "%d leaves %d out of its LSA", ends[0], ends[1])
		assert.True(t, l.info(ends[0], ends[1]).Suspect)
		assert.Equal(t, StateFull, state(l.nodes[ends[0]], ends[1]), "the adjacency stays")
	}
	next, _ := l.nodes[1].Routes().NextHop(2)
	assert.Equal(t, uint32(3), next, "1 reaches 2 over 3")
	next, _ = l.nodes[3].Routes().NextHop(1)
	assert.Equal(t, uint32(1), next)

	// Healed before the dead interval: back at the first frame, without a
	// database exchange and without the adjacency dropping.
	l.silence(1, 2, false)
	healAt := l.now
	var restored time.Duration
	l.run(10*ms, healAt+100*ms, func(now time.Duration) {
		for _, id := range []uint32{1, 2} {
			assert.Empty(t, events(*l.log[id], EventAdjacencyDown))
			for _, p := range []uint32{1, 2, 3} {
				assert.Empty(t, only[*DBSummary](to(*l.log[id], p)), "no database exchange")
			}
		}
		if len(events(*l.log[1], EventLinkRestored)) > 0 && restored == 0 {
			restored = now
		}
	})
	assert.Equal(t, healAt+10*ms, restored)
	assert.True(t, l.inLSA(1, 2))
	assert.True(t, l.inLSA(2, 1))
	next, _ = l.nodes[1].Routes().NextHop(2)
	assert.Equal(t, uint32(2), next, "the direct link again")
}

func TestSuspectLinkThatStaysSilentDies(t *testing.T) {
	l := triangle(t)
	l.silence(1, 2, true)
	cutAt := l.now
	var downAt time.Duration
	l.run(10*ms, cutAt+l.nodes[1].Config().DeadInterval+100*ms, func(now time.Duration) {
		if d := events(*l.log[1], EventAdjacencyDown); len(d) > 0 && downAt == 0 {
			downAt = now
			assert.Equal(t, DownDead, d[0].Reason)
			assert.Empty(t, events(*l.log[1], EventLinkRestored), "dead, not restored")
		}
	})
	assert.Equal(t, cutAt+l.nodes[1].Config().DeadInterval, downAt)
	assert.False(t, l.info(1, 2).Suspect, "a dead adjacency is not suspect")

	// The path heals: the adjacency forms again, and the link is not
	// suspect of a silence from before.
	l.silence(1, 2, false)
	l.run(10*ms, l.now+2*time.Second, nil)
	assert.Equal(t, StateFull, state(l.nodes[1], 2))
	assert.False(t, l.info(1, 2).Suspect)
	assert.True(t, l.inLSA(1, 2))
}

func TestSilenceIsJudgedOnlyOnTime(t *testing.T) {
	// A router whose own ticks come late (its process had no CPU) does not
	// suspect its links: their silence may be its own.
	l := triangle(t)
	a := l.nodes[1]
	drain(a)
	start := l.now
	// No tick and no frame for 200 ms, then a tick: late, so nothing is
	// suspected though nothing was heard for 200 ms.
	a.Tick(start + 200*ms)
	assert.Empty(t, events(drain(a), EventLinkSuspect), "a late tick judges nothing")
	// The next tick is on time, and the links were heard meanwhile.
	for _, p := range []uint32{2, 3} {
		a.Alive(p, start+205*ms)
	}
	a.Tick(start + 210*ms)
	assert.Empty(t, events(drain(a), EventLinkSuspect))

	// Without the frames, the timely tick after a late one does suspect.
	b := triangle(t).nodes[1]
	drain(b)
	b.Tick(start + 200*ms)
	b.Tick(start + 210*ms)
	assert.Len(t, events(drain(b), EventLinkSuspect), 2, "both links silent since the start")
}

func TestFalseAlarmsLengthenTheAllowedSilence(t *testing.T) {
	// A link that stalls and comes back, again and again, is allowed twice
	// the silence after each false alarm (60, 120, 240, 480 ms), while that
	// stays below half the dead interval (500 ms). Calm dead intervals
	// shorten it again.
	l := triangle(t, func(c *Config) { c.DeadInterval = time.Second; c.HelloInterval = 250 * ms })
	var allowed []time.Duration
	for range 5 {
		l.silence(1, 2, true)
		cutAt := l.now
		var suspected time.Duration
		l.run(10*ms, cutAt+600*ms, func(now time.Duration) {
			if len(events(*l.log[1], EventLinkSuspect)) > 0 {
				suspected = now - cutAt
			}
		})
		allowed = append(allowed, suspected)
		l.silence(1, 2, false)
		l.run(10*ms, l.now+300*ms, nil) // a hello crosses
		require.False(t, l.info(1, 2).Suspect)
		require.Equal(t, StateFull, state(l.nodes[1], 2))
	}
	assert.Equal(t, []time.Duration{60 * ms, 120 * ms, 240 * ms, 480 * ms, 480 * ms}, allowed)

	// Ten dead intervals of calm forgive one doubling.
	l.run(10*ms, l.now+suspectCalm*time.Second+10*ms, nil)
	l.silence(1, 2, true)
	cutAt := l.now
	var suspected time.Duration
	l.run(10*ms, cutAt+600*ms, func(now time.Duration) {
		if len(events(*l.log[1], EventLinkSuspect)) > 0 {
			suspected = now - cutAt
		}
	})
	assert.Equal(t, 240*ms, suspected)
}

func TestSilenceAllowed(t *testing.T) {
	// What a neighbour announces cannot make this router judge silences
	// shorter than MinKeepalive allows, nor overflow, nor reach the dead
	// interval, where hellos alone leave links that silent.
	dead := DefaultConfig(1, "").DeadInterval
	for _, tt := range []struct {
		keepalive time.Duration
		mult      int
		penalty   uint
		want      time.Duration
	}{
		{0, 3, 0, 0},
		{20 * ms, 0, 0, 0},
		{20 * ms, 3, 0, 60 * ms},
		{20 * ms, 3, 2, 240 * ms},
		{20 * ms, 3, 64, 0},
		{1, 3, 0, 3 * MinKeepalive},
		{dead / 2, 2, 0, 0},
		{dead/2 - 1, 2, 0, 0},
		{dead/4 - 1, 2, 0, dead/2 - 2},
		{time.Duration(1<<62 + 1), 100, 0, 0},
	} {
		t.Run(fmt.Sprintf("%v×%d<<%d", tt.keepalive, tt.mult, tt.penalty), func(t *testing.T) {
			n := newNode(t, 1, func(c *Config) { c.SuspectMultiplier = tt.mult })
			assert.Equal(t, tt.want, n.silenceAllowed(&neighbor{keepalive: tt.keepalive}, tt.penalty))
		})
	}
}

func TestNeighbourWithoutKeepalivesIsNeverSuspect(t *testing.T) {
	// A neighbour that announces no keepalive (an older broker, or one
	// configured without) is silent between its hellos: only the dead
	// interval judges it.
	a := newNode(t, 1, fastDetect(20*ms, 3))
	b := newNode(t, 2) // no keepalives
	l := &lab{mesh: newMesh(t, a, b), cut: map[[2]uint32]bool{}}
	l.drop = func(from, to uint32, _ Message) bool { return l.cut[[2]uint32{from, to}] }
	l.link(1, 2, 1, 0)
	l.run(10*ms, time.Second, nil)
	require.Equal(t, StateFull, state(a, 2))
	l.silence(1, 2, true)
	var got []Event
	l.run(10*ms, l.now+3*time.Second, func(time.Duration) {
		got = append(got, events(*l.log[1], EventLinkSuspect)...)
	})
	assert.Empty(t, got)
	assert.True(t, l.inLSA(1, 2), "until the dead interval")
	var suspectedB []Event
	l.run(10*ms, l.now+2*time.Second, func(time.Duration) {
		suspectedB = append(suspectedB, events(*l.log[2], EventLinkSuspect)...)
	})
	assert.Empty(t, suspectedB, "b does not detect fast")
	assert.Equal(t, StateDown, state(a, 2))
}

func TestSuspectLinkReturnsAfterItsRTTIsMeasured(t *testing.T) {
	// A silent link heard again is probed — a hello answered at once — and
	// returns to the LSA with the answer, its cost following the RTT the
	// answer measured: the silence was a delay that jumped to 100 ms one
	// way, and the link must not carry traffic at its old cost meanwhile.
	l := triangle(t, rttMode)
	a := l.nodes[1]
	l.silence(1, 2, true)
	l.run(10*ms, l.now+100*ms, nil)
	require.True(t, l.info(1, 2).Suspect)
	oldCost := l.info(1, 2).Cost

	// Frames arrive again, but b's hellos do not yet (they are 100 ms
	// away).
	l.silence(1, 2, false)
	l.drop = func(from, to uint32, m Message) bool {
		_, hello := m.(*Hello)
		return hello && (from == 2 && to == 1 || from == 1 && to == 2)
	}
	var probes []*Hello
	l.run(10*ms, l.now+30*ms, func(time.Duration) {
		for _, h := range only[*Hello](to(*l.log[1], 2)) {
			if h.Probe {
				probes = append(probes, h)
			}
		}
		assert.Empty(t, events(*l.log[1], EventLinkRestored), "back before its RTT is known")
	})
	require.Len(t, probes, 1, "one probe")
	assert.True(t, l.info(1, 2).Suspect)
	assert.False(t, l.inLSA(1, 2))

	// b's answer: it echoes the probe after 200 ms.
	probe := probes[0]
	answer := &Hello{Router: 2, Version: Version, Heard: true, Keepalive: 20 * ms, Echoed: true, Echo: probe.SentAt}
	require.NoError(t, a.Step(2, answer, probe.SentAt+200*ms))
	rd := drain(a)
	require.Len(t, events(rd, EventLinkRestored), 1)
	assert.False(t, l.info(1, 2).Suspect)
	own, _ := a.LSA(1)
	var cost uint32
	for _, k := range own.Links {
		if k.Neighbor == 2 {
			cost = k.Cost
		}
	}
	assert.Greater(t, cost, 5*oldCost, "back with the cost of its new RTT (EWMA 0.25 of 200 ms)")
	assert.Equal(t, l.info(1, 2).Cost, cost)
}

func TestProbeWithoutAnswer(t *testing.T) {
	// A neighbour that does not answer probes (older than them) sends its
	// hellos every HelloInterval, which echo the probe: the link returns
	// then at the latest, heard all along.
	l := triangle(t)
	l.silence(1, 2, true)
	l.run(10*ms, l.now+100*ms, nil)
	require.True(t, l.info(1, 2).Suspect)
	l.silence(1, 2, false)
	l.drop = func(from, to uint32, m Message) bool {
		_, hello := m.(*Hello)
		return hello && from == 2 && to == 1
	}
	heardAt := l.now + 10*ms
	var restored time.Duration
	l.run(10*ms, l.now+2*time.Second, func(now time.Duration) {
		if len(events(*l.log[1], EventLinkRestored)) > 0 && restored == 0 {
			restored = now
		}
	})
	assert.Equal(t, heardAt+l.nodes[1].Config().HelloInterval, restored)
	assert.Equal(t, StateFull, state(l.nodes[1], 2))
}

func TestProbeIsAnsweredAtOnce(t *testing.T) {
	l := triangle(t)
	b := l.nodes[2]
	drain(b)
	now := l.now + 3*ms
	require.NoError(t, b.Step(1, &Hello{Router: 1, Version: Version, Heard: true, SentAt: 777 * ms, Probe: true}, now))
	h := only[*Hello](to(drain(b), 1))
	require.Len(t, h, 1)
	assert.True(t, h[0].Echoed)
	assert.Equal(t, 777*ms, h[0].Echo)
	assert.Zero(t, h[0].Hold)
	assert.False(t, h[0].Probe, "an answer is no probe: no ping-pong")

	require.NoError(t, b.Step(1, &Hello{Router: 1, Version: Version, Heard: true, SentAt: 778 * ms}, now))
	assert.Empty(t, only[*Hello](to(drain(b), 1)), "a hello that does not probe waits for the next HelloInterval")
}
