package brokertest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dripmesh/drip/internal/linkstate"
	"github.com/dripmesh/drip/internal/sim"
)

func TestSlowControlPlaneKeepsItsAdjacencies(t *testing.T) {
	// docs/design.md §3: a broker short of CPU keeps reading its links and
	// forwarding data while the hellos in those frames wait in its core's
	// queue, past the dead interval. Any frame proves the neighbour alive,
	// so the adjacency must not flap while frames keep arriving; but a
	// control plane that falls too far behind must still lose it.
	topo := sim.Line(2)
	topo.Links[0].Delay = 10 * time.Millisecond
	s, err := New(Options{
		Seed: 7, Topology: topo, Workload: qosWorkload(7),
		Subscribers: 8, Publishers: 1, Rate: 500,
		ClientBrokers: []uint32{0, 1}, // publisher at 0, odd subscribers at 1
	})
	require.NoError(t, err)
	s.RunUntil(3 * time.Second)
	require.True(t, s.Converged())
	dead := SimConfig(0, "").LinkState.DeadInterval

	// Router 1's control plane falls 1.5 dead intervals behind while
	// router 0 keeps publishing to it.
	s.SlowControl(1, dead*3/2)
	s.RunUntil(3*time.Second + 3*dead)
	s.SlowControl(1, 0)
	s.RunUntil(3*time.Second + 5*dead)
	require.Empty(t, s.Errors())
	var got int
	for sub := 1; sub < 8; sub += 2 {
		for _, d := range s.Ledger().Received(sub) {
			if d.PublishedAt > 3*time.Second && d.PublishedAt < 3*time.Second+3*dead {
				got++
			}
		}
	}
	require.Positive(t, got, "no data reached router 1 while it was slow: the test shows nothing")
	downs := s.Counters("drip_linkstate_events_total", "event")[linkstate.EventAdjacencyDown.String()]
	assert.Zero(t, downs, "router 1 dropped its adjacency while data from router 0 kept arriving")

	// A control plane further behind than three dead intervals is dead to
	// routing, however many frames its links carry.
	s.SlowControl(1, 4*dead)
	s.RunUntil(3*time.Second + 10*dead)
	downs = s.Counters("drip_linkstate_events_total", "event")[linkstate.EventAdjacencyDown.String()]
	assert.Positive(t, downs, "hellos four dead intervals late kept the adjacency")
}

// TestSlowBuildsKeepAdjacencies: PREDICATES index builds that take longer
// than the dead interval, as full builds took on the starved machine of the
// 42-site lab (docs/results/experiments/scale), run beside the control
// plane: no adjacency goes down while they run, and once the mesh has
// installed them it delivers every message it must. The pacing (ten times
// the last build's time) spaces such builds by nearly a minute, hence the
// long run.
func TestSlowBuildsKeepAdjacencies(t *testing.T) {
	dead := SimConfig(0, "").LinkState.DeadInterval
	s, err := New(Options{
		Seed: 11, Topology: ring(4, 5*time.Millisecond), Workload: qosWorkload(11),
		Subscribers: 8, Publishers: 4, Rate: 10,
		BuildTime: dead + time.Second,
	})
	require.NoError(t, err)
	s.publishUntil = 130 * time.Second
	s.watchConvergence(ConvergenceCheckEvery)
	s.RunUntil(140 * time.Second)
	require.Empty(t, s.Errors())
	advertised := 0
	for _, f := range s.Node(0).Inspect().Predicates {
		if f > 0 {
			advertised++
		}
	}
	require.Equal(t, 4, advertised, "router 0's data plane lacks some router's filters: changes were lost or builds never installed")
	downs := s.Counters("drip_linkstate_events_total", "event")[linkstate.EventAdjacencyDown.String()]
	assert.Zero(t, downs, "an adjacency went down while builds of %v ran", dead+time.Second)
	rep := s.Check(DeliveryBound)
	assert.True(t, rep.OK(), "%s", rep)
	assert.Positive(t, rep.Protected, "the mesh never converged: the test shows nothing")
}
