package node

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/bits-and-blooms/bitset"
	"go.uber.org/zap"

	"github.com/dripmesh/drip/internal/drp"
	"github.com/dripmesh/drip/internal/linkstate"
)

// Bundles whose destinations this broker would send straight back to the
// neighbour they came from are held, not sent (drp.Decision.Bounced): the
// two disagree while link state floods, and sending back starts a
// ping-pong that spends the bundle's whole hop limit in tens of
// milliseconds, before either broker has learnt better — the e2e suite's
// rolling restart once lost deliveries this way (docs/design.md §10,
// "Bounced bundles wait for the routes"). A held bundle is decided again
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

// Outcomes of a bounced bundle, the values of drip_bounced_bundles_total's
// label.
const (
	bounceRerouted = "rerouted"  // held until the routes changed, then sent on
	bounceReturned = "returned"  // held bounceHoldFor (or until the broker stopped), then sent as the routes said
	bounceSentBack = "sent_back" // not held: sent back at once
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

// hold holds the destinations d bounced, of bundle b received from from
// and decided on routes, unless the hold is full.
func (f *Forwarder) hold(d drp.Decision, routes *linkstate.Table, from uint32, b drp.Bundle, raw []byte, h bundleHeader) bool {
	n := f.n
	hb := heldBundle{from: from, source: b.Source, dest: d.Bounced, hops: b.HopsLeft, routes: routes,
		until: n.clock.Now().Add(bounceHoldFor), msg: raw, h: h}
	if !n.bounces.add(hb) {
		return false
	}
	n.m.bouncedHeld.Set(float64(n.bounces.count.Load()))
	n.bounceLog.Do(func() {
		n.log.Info("bundle held: its routes lead back to the neighbour it came from", zap.Uint32("from", from),
			zap.Uint32s("routers", loggedRouters(d.Bounced)), zap.Uint32("ingress", h.stamp.Origin),
			zap.Uint64("epoch", h.stamp.Epoch), zap.Uint64("seq", h.stamp.Seq), zap.Uint32("hops", h.hops),
			zap.Duration("since_start", n.clock.Since(n.start)))
	})
	return true
}

// sendBack adds to d the bundle that takes the destinations it bounced
// back to the neighbour b came from, as forwarding did before holding.
func (f *Forwarder) sendBack(d drp.Decision, routes drp.Routing, b drp.Bundle) drp.Decision {
	f.n.m.bounced.WithLabelValues(bounceSentBack).Inc()
	back := f.decideHere(routes, drp.Bundle{Source: b.Source, Dest: d.Bounced, HopsLeft: b.HopsLeft})
	d.Forwards = append(d.Forwards, back.Forwards...)
	d.Bounced = nil
	return d
}

// decideHere decides b's destinations again at this broker, wherever the
// routes now lead, back to the neighbour b came from included (Transit
// from this router itself never bounces). b.HopsLeft is what the bundle
// arrived with: Transit passes on one less.
func (f *Forwarder) decideHere(routes drp.Routing, b drp.Bundle) drp.Decision {
	return f.fwd.Transit(routes, f.n.cfg.ID, b)
}

// ReleaseHeld decides again the held bundles that are due — this broker's
// routes changed since they bounced, or they waited bounceHoldFor — and
// sends them; all releases every one (the broker is stopping). A driver
// calls it from one goroutine of the data plane, with a Forwarder of its
// own, every TickInterval; with nothing held it returns at once. It may
// wait for room on a link, as every forwarding does.
func (f *Forwarder) ReleaseHeld(all bool) {
	n := f.n
	if n.bounces.count.Load() == 0 {
		return
	}
	routes := n.routes.Load()
	now := n.clock.Now()
	for _, hb := range n.bounces.take(routes, now, all) {
		b := drp.Bundle{Source: hb.source, Dest: hb.dest, HopsLeft: hb.hops}
		if all || !now.Before(hb.until) {
			n.m.bounced.WithLabelValues(bounceReturned).Inc()
			f.sendPlain(f.decideHere(routes, b), hb.msg, hb.h)
			continue
		}
		// The routes changed: what they still send back waits on.
		d := f.fwd.Transit(routes, hb.from, b)
		if len(d.Forwards) > 0 || d.DroppedTotal() > 0 {
			n.m.bounced.WithLabelValues(bounceRerouted).Inc()
		}
		if d.Bounced != nil {
			hb.dest, hb.routes = d.Bounced, routes
			if n.bounces.add(hb) {
				d.Bounced = nil
			} else {
				d = f.sendBack(d, routes, b)
			}
		}
		f.sendPlain(d, hb.msg, hb.h)
	}
	n.m.bouncedHeld.Set(float64(n.bounces.count.Load()))
}
