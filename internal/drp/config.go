package drp

import (
	"fmt"
	"math"
)

// Config tunes the forwarding decision. The zero value is invalid; start
// from DefaultConfig.
type Config struct {
	// BroadcastFraction is the broadcast threshold of Carzaniga09 §2.3 as a
	// fraction of the other reachable routers: the ingress broadcasts when
	// more than BroadcastFraction × (Known−1) reachable routers are
	// destinations. 0 disables broadcast; values must lie in [0, 1].
	BroadcastFraction float64
	// HopLimit is the largest number of links a bundle may cross from its
	// ingress router. It bounds transient routing loops; it must be at
	// least 1 and should exceed the network diameter in hops.
	HopLimit uint8
}

// DefaultConfig returns the configuration brokers run with.
//
// Broadcast is off (BroadcastFraction 0). A broadcast is forwarded down
// the source's shortest-path tree as each router computes it, and while
// link state reconverges two routers can compute different trees: a
// destination that each thinks the other's child is reached by neither,
// and no router counts it (doc.go). Partitioned bundles carry every
// destination explicitly until it is delivered or counted as dropped, so
// they lose nothing silently whatever the tables; a rolling restart of
// four brokers lost deliveries in 3 of 10 runs with broadcast at 0.5 and
// in none of 20 without (client.TestRollingRestartLosesNothing; design
// §4 has the runs that lost otherwise, on a starved machine). What
// broadcast saves — a next-hop lookup per destination at each hop — is a
// bitset walk here. HopLimit 64,
// IP's customary TTL, is several times the diameter of the largest
// topology in Carzaniga09 §5 (42 brokers, diameter ≈ 11).
func DefaultConfig() Config {
	return Config{BroadcastFraction: 0, HopLimit: 64}
}

// Validate reports the first field that is out of range.
func (c Config) Validate() error {
	if math.IsNaN(c.BroadcastFraction) || c.BroadcastFraction < 0 || c.BroadcastFraction > 1 {
		return fmt.Errorf("drp: Config.BroadcastFraction = %v, want a value in [0, 1] (0 disables broadcast)", c.BroadcastFraction)
	}
	if c.HopLimit == 0 {
		return fmt.Errorf("drp: Config.HopLimit = 0, want at least 1 (no bundle could leave its ingress router)")
	}
	return nil
}
