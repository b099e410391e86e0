package brokertest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dripmesh/drip/internal/sim"
	"github.com/dripmesh/drip/internal/workload"
)

// hubTopology is a ring of eight brokers (0–7, links of weight 4) with a
// hub, 8, linked to 0 and 4 by cheap links: while the hub runs, shortest
// paths across the ring go through it, and the hub must route them beyond
// its neighbours; without it the ring carries them. The hub is no cut
// vertex.
func hubTopology(hubDelay time.Duration) sim.Topology {
	t := sim.Topology{Routers: []uint32{0, 1, 2, 3, 4, 5, 6, 7, 8}}
	for i := range uint32(8) {
		t.Links = append(t.Links, sim.Link{A: i, B: (i + 1) % 8, Weight: 4, Delay: 2 * time.Millisecond})
	}
	t.Links = append(t.Links, sim.Link{A: 0, B: 8, Weight: 1, Delay: hubDelay}, sim.Link{A: 4, B: 8, Weight: 1, Delay: hubDelay})
	return t
}

func TestRejoinLosesNothing(t *testing.T) {
	// docs/design.md §3 and §10: a broker that returns — after a
	// crash or a graceful stop — takes transit traffic only once it holds the
	// mesh's database, so subscribers elsewhere lose nothing while routes
	// move onto it. Slow links to the returning broker make its database
	// exchange long enough for the mesh to route through it before it could.
	for _, tc := range []struct {
		name  string
		leave FaultKind
		delay time.Duration
	}{
		{"kill, fast links", Kill, 2 * time.Millisecond},
		{"kill, slow links", Kill, 150 * time.Millisecond},
		{"stop, slow links", Stop, 150 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wl := workload.SingleConstraint()
			wl.Seed, wl.FiltersPerPredicate = 7, 5
			sc := Schedule{
				Options: Options{
					Seed: 7, Topology: hubTopology(tc.delay), Workload: wl,
					Subscribers: 24, Publishers: 8, Rate: 100,
					// Clients live on the ring, so what the hub's return
					// could lose is transit.
					ClientBrokers: []uint32{0, 1, 2, 3, 4, 5, 6, 7},
				},
				Faults: []Fault{
					{At: 4 * time.Second, Kind: tc.leave, A: 8},
					{At: 12 * time.Second, Kind: Restart, A: 8},
				},
				PublishFor: 18 * time.Second, Duration: 22 * time.Second,
			}
			s, rep, err := Run(sc)
			require.NoError(t, err)
			require.Empty(t, s.Errors())
			t.Logf("%s", rep)
			require.True(t, rep.OK(), "%s", rep)
			require.Positive(t, rep.Protected)
		})
	}
}
