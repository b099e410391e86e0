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
// BroadcastFraction 0.5 bounds the cost of a broadcast to less than twice
// the links partitioning would use (doc.go) while sparing every hop the
// per-destination lookups once D covers most of the network. HopLimit 64,
// IP's customary TTL, is several times the diameter of the largest
// topology in Carzaniga09 §5 (42 brokers, diameter ≈ 11).
func DefaultConfig() Config {
	return Config{BroadcastFraction: 0.5, HopLimit: 64}
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
