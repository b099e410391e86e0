package node

import (
	"sync"
	"sync/atomic"
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
	from   uint32 // the neighbour the bundle came from
	source uint32
	dest   *bitset.BitSet
	hops   uint8 // HopsLeft as received
	routes *linkstate.Table
	until  time.Time
	msg    []byte
	h      bundleHeader
}

// bounceHold is the node's held bundles, shared by the link readers that
// hold and the goroutine that releases (Forwarder.ReleaseHeld).
type bounceHold struct {
	mu    sync.Mutex
	held  []heldBundle
	bytes int
	count atomic.Int64 // len(held), read without the lock
}

// add holds hb unless the hold is full.
func (bh *bounceHold) add(hb heldBundle) bool {
	bh.mu.Lock()
	defer bh.mu.Unlock()
	if len(bh.held) >= maxHeldBundles || bh.bytes+len(hb.msg) > maxHeldBytes {
		return false
	}
	bh.held = append(bh.held, hb)
	bh.bytes += len(hb.msg)
	bh.count.Store(int64(len(bh.held)))
	return true
}

// take removes and returns the held bundles that are due: decided on other
// routes than routes, or held until now. all takes every one.
func (bh *bounceHold) take(routes *linkstate.Table, now time.Time, all bool) []heldBundle {
	bh.mu.Lock()
	defer bh.mu.Unlock()
	var due []heldBundle
	kept := bh.held[:0]
	for _, hb := range bh.held {
		if all || hb.routes != routes || !now.Before(hb.until) {
			due = append(due, hb)
			bh.bytes -= len(hb.msg)
		} else {
			kept = append(kept, hb)
		}
	}
	clear(bh.held[len(kept):])
	bh.held = kept
	bh.count.Store(int64(len(kept)))
	return due
}
