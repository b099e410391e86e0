package brokertest

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/dripmesh/drip/internal/broker"
	"github.com/dripmesh/drip/internal/sim"
	"github.com/dripmesh/drip/internal/workload"
)

// TestStopEndsWhenNeighboursFinish: a broker stopped while its neighbours
// still send it bundles closes its links once every neighbour has said it
// routes around it and sent its last bundle (node.Link.PeerFinished), not
// after RerouteGrace, and nothing published meanwhile is lost. The grace
// here is far longer than the run lets the drain take, so a node that did
// not look at its neighbours' finish would still be up at the check.
func TestStopEndsWhenNeighboursFinish(t *testing.T) {
	const grace = 30 * time.Second
	for _, seed := range []uint64{1, 2, 3} {
		t.Run(fmt.Sprintf("seed %d", seed), func(t *testing.T) {
			topo := sim.Ring(6)
			topo.Links = append(topo.Links, sim.Link{A: 0, B: 3, Weight: 1})
			for i := range topo.Links {
				topo.Links[i].Delay = time.Duration(1+i%4) * time.Millisecond
			}
			wl := workload.SingleConstraint()
			wl.Seed, wl.FiltersPerPredicate = int64(seed), 5
			core, logs := observer.New(zap.InfoLevel)
			s, err := New(Options{
				Seed: seed, Topology: topo, Workload: wl,
				Subscribers: 18, Publishers: 6, Rate: 100,
				Logger: zap.New(core),
				Config: func(c *broker.Config) {
					c.RerouteGrace = grace
					c.DrainTimeout = 3 * grace
				},
			})
			require.NoError(t, err)
			s.publishUntil = 12 * time.Second
			s.watchConvergence(ConvergenceCheckEvery)
			const stopAt = 4 * time.Second
			s.at(stopAt, func() { s.Stop(2) })
			var downAt time.Duration
			for s.Now() < 16*time.Second {
				s.RunUntil(s.Now() + 50*time.Millisecond)
				if downAt == 0 && s.Node(2) == nil && s.Now() > stopAt {
					downAt = s.Now()
				}
			}
			require.Empty(t, s.Errors())
			rep := s.Check(DeliveryBound)
			require.True(t, rep.OK(), "%s", rep)
			require.Positive(t, rep.Protected)
			require.NotZero(t, downAt, "router 2 was still up %v after its stop", s.Now()-stopAt)
			// Its subscribers move within the overlap (2 s), its neighbours
			// finish within a few round trips.
			assert.Less(t, downAt-stopAt, 5*time.Second, "the drain waited for the grace")
			assert.Equal(t, 1, logs.FilterMessage("neighbours route around this broker").Len())
			assert.Zero(t, logs.FilterMessage("neighbours did not all route around this broker in time; closing links anyway").Len())
		})
	}
}
