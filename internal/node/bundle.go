package node

import (
	"time"

	"github.com/dripmesh/drip/internal/dedup"
)

// bundleHeader is what a message's bundles carry beside the message.
type bundleHeader struct {
	stamp       dedup.Stamp
	publishedAt int64
	hops        uint32
	// elapsed is the time since acceptance as the mesh measured it, for a
	// message that travels with a deadline (0: not measured).
	elapsed time.Duration
	// marked says a broker before this one queued the bundle on a link
	// whose queue was filling: the mark goes on to the message's
	// deliveries (wire.BundleQoS.Marked).
	marked bool
}
