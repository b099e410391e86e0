package brokertest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dripmesh/drip/internal/broker"
	"github.com/dripmesh/drip/internal/sim"
	"github.com/dripmesh/drip/internal/workload"
)

// TestPredicateAdvertisementsTravelAsDeltas: with deltas on (the default),
// the re-advertisements that subscribers failing over from a stopped broker
// cause cross the mesh as deltas, smaller than whole ones, and the mesh
// delivers as with whole ones. In a mesh where only some brokers offer
// them, those send them only to each other: a delta to a broker that did not
// offer them would end the link as malformed, which Sim counts as an error.
func TestPredicateAdvertisementsTravelAsDeltas(t *testing.T) {
	for _, tc := range []struct {
		name   string
		deltas func(id uint32) bool
	}{
		{"whole", func(uint32) bool { return false }},
		{"deltas", func(uint32) bool { return true }},
		{"mixed", func(id uint32) bool { return id%3 != 0 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			topo := sim.RandomConnected(8, 2.5, 7)
			wl := workload.SingleConstraint()
			wl.Seed, wl.FiltersPerPredicate = 7, 5
			sc := Schedule{
				Options: Options{
					Seed: 7, Topology: topo, Workload: wl,
					Config:      func(c *broker.Config) { c.PeerPredicateDeltas = tc.deltas(c.ID) },
					Subscribers: 48, Publishers: 8, Rate: 20,
				},
				PublishFor: 20 * time.Second,
				Duration:   26 * time.Second,
				Faults: []Fault{
					{At: 4 * time.Second, Kind: Stop, A: topo.Routers[3]},
					{At: 12 * time.Second, Kind: Restart, A: topo.Routers[3]},
				},
			}
			s, rep, err := Run(sc)
			require.NoError(t, err)
			require.Empty(t, s.Errors())
			require.True(t, rep.OK(), "%s", rep)
			sent := s.Counters("drip_predicate_advertisements_sent_total", "form")
			b := s.Counters("drip_predicate_advertisement_sent_bytes_total", "form")
			t.Logf("advertisements sent whole %.0f (%.0f bytes), as deltas %.0f (%.0f bytes)", sent["whole"], b["whole"], sent["delta"], b["delta"])
			require.Positive(t, sent["whole"])
			if tc.name == "whole" {
				assert.Zero(t, sent["delta"])
			} else {
				require.Positive(t, sent["delta"])
				assert.Less(t, b["delta"]/sent["delta"], b["whole"]/sent["whole"], "a delta is smaller than a whole advertisement")
			}
		})
	}
}
