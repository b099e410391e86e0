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
