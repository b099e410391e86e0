package node

import (
	"time"

	"github.com/dripmesh/drip/internal/drp"
)

// ReleaseHeld takes in again the bundles waiting for the routes to confirm
// their source (unverified.go), and decides again the held bundles that
// are due — this broker's routes changed since they bounced, or they
// waited bounceHoldFor — and sends them; all releases every one (the
// broker is stopping). A driver calls it from one goroutine of the data
// plane, with a Forwarder of its own, every TickInterval; with nothing
// held it returns at once. It may wait for room on a link, as every
// forwarding does.
func (f *Forwarder) ReleaseHeld(all bool) {
	n := f.n
	if n.bounces.count.Load() == 0 && n.unverified.count.Load() == 0 && n.replays.count.Load() == 0 {
		return
	}
	routes := n.routes.Load()
	now := n.clock.Now()
	// Bundles waiting for the routes to confirm where they came from are
	// taken in again: those the new routes confirm pass, the others wait
	// on until their time is up (admitSource).
	for _, u := range n.unverified.take(routes, now, all) {
		f.heldUntil = u.until
		if all {
			f.heldUntil = now
		}
		f.Bundles(u.from, [][]byte{u.raw})
	}
	f.heldUntil = time.Time{}
	for _, r := range n.replays.take(routes, now, true) {
		f.replay(r)
	}
	for _, hb := range n.bounces.take(routes, now, all) {
		b := drp.Bundle{Source: hb.source, Dest: hb.dest, HopsLeft: hb.hops}
		if hb.linkEnded {
			// Held again only while its time lasts, and not when stopping.
			f.linkHeldUntil = hb.until
			if all {
				f.linkHeldUntil = now
			}
			f.sendPlain(f.decideHere(routes, b), routes, hb.msg, hb.h)
			f.linkHeldUntil = time.Time{}
			continue
		}
		if all || !now.Before(hb.until) {
			n.m.bounced.WithLabelValues(bounceReturned).Inc()
			f.sendPlain(f.decideHere(routes, b), routes, hb.msg, hb.h)
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
		f.sendPlain(d, routes, hb.msg, hb.h)
	}
	n.m.bouncedHeld.Set(float64(n.bounces.count.Load()))
}
