package node

import (
	"time"

	"github.com/bits-and-blooms/bitset"

	"github.com/dripmesh/drip/internal/linkstate"
)

// Bundles whose destinations this broker would send straight back to the
// neighbour they came from are held, not sent (drp.Decision.Bounced): the
// two disagree while link state floods, and sending back starts a
// ping-pong that spends the bundle's whole hop limit in tens of
// milliseconds, before either broker has learnt better (docs/design.md
// §10, "Bounced bundles wait for the routes"). A held bundle is decided again
// when this broker's routes change (what still bounces waits on), and
// after bounceHoldFor whatever the routes then say, back included: by
// then the neighbour has most likely learnt the new routes, and if not,
// the hop limit still ends the loop.
const (
	// bounceHoldFor bounds how long a bounced bundle waits: a few times
	// what link state takes to flood a mesh of tens of brokers.
	bounceHoldFor = 500 * time.Millisecond
	// maxHeldBundles and maxHeldBytes bound the hold; a bundle that does
	// not fit is sent back at once, as before holding.
	maxHeldBundles = 4096
	maxHeldBytes   = 8 << 20
)

// heldBundle is a bounced bundle's destinations with what sending them
// needs.
type heldBundle struct {
	from uint32 // the neighbour the bundle came from
	// linkEnded says the bundle did not bounce: the link to its next hop
	// had ended (Forwarder.holdForLink), and it is decided again at this
	// broker, as if published here.
	linkEnded bool
	source    uint32
	dest      *bitset.BitSet
	hops      uint8 // HopsLeft as received
	routes    *linkstate.Table
	until     time.Time
	msg       []byte
	h         bundleHeader
}

// bounceHold is the node's bounced bundles waiting for its routes.
type bounceHold = routeHold[heldBundle]

func (hb heldBundle) wait() (*linkstate.Table, time.Time, int) {
	return hb.routes, hb.until, len(hb.msg)
}
func (heldBundle) bounds() (int, int) { return maxHeldBundles, maxHeldBytes }
