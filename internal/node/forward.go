package node

import (
	"time"

	"github.com/bits-and-blooms/bitset"
	"go.uber.org/zap"

	"github.com/dripmesh/drip/internal/content"
	"github.com/dripmesh/drip/internal/dedup"
	"github.com/dripmesh/drip/internal/drp"
	"github.com/dripmesh/drip/internal/encoding"
	"github.com/dripmesh/drip/internal/linkstate"
	"github.com/dripmesh/drip/internal/match"
	"github.com/dripmesh/drip/internal/qos"
	"github.com/dripmesh/drip/internal/wire"
)

// Forwarder is the data plane of one goroutine — a publishing stream or a
// link's reader. Its scratch space makes matching and partitioning
// allocation-light without locks; it reads only the snapshots the control
// plane publishes. Create one per goroutine with NewForwarder.
type Forwarder struct {
	n       *Node
	fwd     *drp.Forwarder
	dest    bitset.BitSet
	in      bitset.BitSet // a received bundle's destinations
	words   []uint64      // their words
	ids     []match.SubscriberID
	targets []*Subscription
	qos     qosPlan      // scratch for messages with deadlines or two paths
	dec     wire.Decoder // decodes the messages of bundles to deliver here
	enc     *encoding.MessageEncoder
	count   uint64 // messages handled, for sampling the latency histograms
	// rerouting says bundles decided for links this broker has finished
	// are being decided again (Forwarder.reroute).
	rerouting bool
	// heldUntil is, while ReleaseHeld hands unverified bundles in again,
	// how long they may still wait (admitSource); linkHeldUntil is the
	// same for bundles held for a link that had ended (holdForLink).
	heldUntil     time.Time
	linkHeldUntil time.Time
}

// sampleEvery is how often the match-latency histograms are observed: a
// clock read costs as much as a small match.
const sampleEvery = 64

// NewForwarder returns a data plane for one goroutine.
func (n *Node) NewForwarder() *Forwarder {
	fwd, err := drp.NewForwarder(n.cfg.DRP)
	if err != nil {
		panic(err) // cfg.DRP was validated by NewNode
	}
	return &Forwarder{n: n, fwd: fwd, enc: encoding.NewMessageEncoder(n.cfg.Encoding)}
}

// Publish routes a message accepted from a local publisher (Carzaniga09
// §2.2): it stamps it, delivers it to matching local subscribers, matches it
// once against every broker's encoded predicate, and sends one bundle per
// next hop (dynamic receiver partitioning). m is the message decoded from
// raw, its wire form (wire.DecodeMessage), which bundles and deliveries
// carry unchanged and which must not change; deadline is the one its
// publisher set (0: none); at is when the broker accepted it, on the
// node's clock, which the deliveries tell as its publication time: the
// caller reads the clock once for all the messages of a request, which
// arrived together, since a clock read costs as much as a small match.
// It reports whether any subscriber, local or remote, may want the
// message.
func (f *Forwarder) Publish(m content.Message, raw []byte, deadline time.Duration, at time.Time) bool {
	n := f.n
	n.m.published.Inc()
	h := bundleHeader{
		stamp:       dedup.Stamp{Origin: n.cfg.ID, Epoch: n.epoch, Seq: n.seq.Add(1)},
		publishedAt: at.UnixNano(),
	}
	local := f.deliverLocal(m, raw, h)

	preds := n.preds.Load()
	if ids := preds.Routers(); len(ids) == 0 || len(ids) == 1 && ids[0] == n.cfg.ID {
		// No other broker advertises anything: nothing to encode or match.
		if local == 0 {
			n.m.unmatched.Inc()
		}
		return local > 0
	}
	sample := f.count%sampleEvery == 0
	var start time.Time
	if sample {
		start = n.clock.Now()
	}
	bm := f.enc.Encode(m)
	f.dest.ClearAll()
	preds.Match(bm, &f.dest)
	f.dest.Clear(uint(n.cfg.ID))
	if s := n.matchAll.snap.Load(); s != nil {
		if k := s.add(&f.dest, n.cfg.ID); k > 0 {
			n.m.routeDropped.WithLabelValues(routeDropMatchAll).Add(float64(k))
		}
	}
	if sample {
		n.m.matchEncoded.Observe(n.clock.Since(start).Seconds())
	}
	remote := f.dest.Count()
	n.m.destinations.Observe(float64(remote))
	if remote == 0 {
		if local == 0 {
			n.m.unmatched.Inc()
		}
		return local > 0
	}
	n.sent.record(h.stamp, raw)
	routes := n.routes.Load()
	d := f.fwd.Ingress(routes, &f.dest)
	if t := n.qos.Load(); !t.Empty() || deadline != 0 {
		p := f.plan(t, deadline, deadline)
		p.bloom = bm
		p.lookup(&f.dest)
		f.send(d, routes, p, 0, raw, h)
		if p.two.Any() {
			f.send(f.fwd.Ingress(routes.Second(n.cfg.ID), &p.two), routes, p, wire.PathSecond, raw, h)
		}
		return true
	}
	f.sendPlain(d, routes, raw, h)
	return true
}

// plan readies the Forwarder's QoS scratch for one message.
func (f *Forwarder) plan(t *qos.Table, deadline, budget time.Duration) *qosPlan {
	p := &f.qos
	if p.flows == nil {
		p.flows = map[uint32]qos.Flow{}
	}
	clear(p.flows)
	p.two.ClearAll()
	p.table, p.deadline, p.budget = t, deadline, budget
	n := f.n
	p.m, p.budgets, p.measured = n.m, &n.budgets, n.cfg.LinkState.CostMode == linkstate.CostRTT
	return p
}

// Bundles handles the bundles of one frame from a neighbour, in their wire
// form (which must not change afterwards): each is delivered here if this
// broker is a destination — exactly, once per stamp — and its other
// destinations are repartitioned, a second copy along its second path.
func (f *Forwarder) Bundles(from Link, bs [][]byte) {
	n := f.n
	for _, raw := range bs {
		var b wire.Bundle
		var err error
		b, f.words, err = wire.ParseBundle(raw, n.cfg.MaxRouterID, &f.in, f.words)
		if err != nil {
			n.m.malformedBundles.Inc()
			n.log.Debug("malformed bundle", zap.String("peer", from.Name()), zap.Error(err))
			continue
		}
		b.QoS = saneQoS(b.QoS)
		routes := n.routes.Load()
		if !n.admitSource(from, raw, &b, routes, f.heldUntil) {
			continue
		}
		var rt drp.Routing = routes
		if b.QoS.Path == wire.PathSecond {
			rt = routes.Second(b.Source)
		}
		d := f.fwd.Transit(rt, from.Peer(), b.Bundle)
		if len(d.Forwards) > 0 || d.Bounced != nil {
			n.sent.record(b.Stamp, b.Message) // what may come back (own.go)
		}
		h := bundleHeader{stamp: b.Stamp, publishedAt: b.PublishedAt, hops: b.Hops + 1, marked: b.QoS.Marked}
		if b.QoS.Deadline != 0 {
			// Measured, so never 0: a delivery says it was.
			h.elapsed = max(time.Duration(b.QoS.Deadline-b.QoS.Budget), 1)
		}
		// A bundle of this broker's own messages has come back on routes
		// that disagreed; its local subscribers had the message at ingress.
		if d.Deliver && b.Source != n.cfg.ID {
			switch v := n.dups.Admit(b.Stamp, n.clock.Now()); {
			case v == dedup.First:
				f.deliverRemote(from, b, h)
			case b.QoS.Path != 0 && v == dedup.Duplicate:
				n.m.redundantCopies.Inc()
			default:
				n.m.duplicates.WithLabelValues(v.String()).Inc()
			}
		}
		plain := b.QoS.Deadline == 0 && b.QoS.Path == 0
		if d.Bounced != nil {
			// Bundles with deadlines or on second paths do not wait.
			if plain && f.hold(d, routes, from.Peer(), b.Bundle, b.Message, h) {
				d.Bounced = nil
			} else {
				d = f.sendBack(d, rt, b.Bundle)
			}
		}
		if plain {
			f.sendPlain(d, routes, b.Message, h)
			continue
		}
		p := f.plan(nil, time.Duration(b.QoS.Deadline), time.Duration(b.QoS.Budget))
		f.send(d, routes, p, b.QoS.Path, b.Message, h)
	}
}

func (f *Forwarder) deliverRemote(from Link, b wire.Bundle, h bundleHeader) {
	n := f.n
	f.dec.Reset()
	m, _, err := f.dec.Decode(b.Message, n.cfg.Messages)
	if err != nil {
		n.m.malformedBundles.Inc()
		n.log.Debug("invalid message in bundle", zap.String("peer", from.Name()), zap.Error(err))
		return
	}
	if f.deliverLocal(m, b.Message, h) == 0 {
		n.m.falsePositives.Inc()
		if n.draining.Load() {
			n.orphanLog.Do(func() {
				n.log.Info("bundle for this draining broker matched no local subscriber",
					zap.String("peer", from.Name()), zap.Uint32("ingress", h.stamp.Origin),
					zap.Uint64("epoch", h.stamp.Epoch), zap.Uint64("seq", h.stamp.Seq), zap.Uint32("hops", h.hops),
					zap.Duration("since_start", n.clock.Since(n.start)))
			})
		}
	}
}

// deliverLocal queues the message to every local subscriber it matches
// exactly, encoding the delivery once for all of them, and returns how many
// matched. A subscriber with a deadline that h.elapsed exceeds is counted
// as a miss (docs/design.md §11).
func (f *Forwarder) deliverLocal(m content.Message, raw []byte, h bundleHeader) int {
	n := f.n
	f.count++
	sample := f.count%sampleEvery == 0
	var start time.Time
	if sample {
		start = n.clock.Now()
	}
	f.ids, f.targets = n.subs.matching(m, f.ids, f.targets[:0])
	if sample {
		n.m.matchExact.Observe(n.clock.Since(start).Seconds())
	}
	if len(f.targets) == 0 {
		return 0
	}
	published := new(wire.NewPublished(raw, wire.PublishedHeader{
		Ingress: h.stamp.Origin, PublishedAt: h.publishedAt, Hops: h.hops,
		Epoch: h.stamp.Epoch, Seq: h.stamp.Seq, Elapsed: int64(h.elapsed), Marked: h.marked,
	}))
	for i, sub := range f.targets {
		if dl := sub.deadline.Load(); dl != 0 && int64(h.elapsed) > dl {
			sub.missed.Add(1)
			n.m.deadlineMissed.Inc()
		}
		sub.offer(Queued{published})
		f.targets[i] = nil
	}
	return len(f.targets)
}

// countDrops counts the destinations a decision dropped, and logs a few
// of those without a route: which routers, and which message (its ingress
// stamp), so that a loss can be traced to the routing state that caused it.
func (f *Forwarder) countDrops(d drp.Decision, h bundleHeader) {
	for reason, k := range d.Dropped {
		if k > 0 {
			f.n.m.routeDropped.WithLabelValues(drp.DropReason(reason).String()).Add(float64(k))
		}
	}
	if len(d.Unrouted) > 0 {
		f.n.noRouteLog.Do(func() {
			// The destinations that did have a route say whether the
			// message still reached where a dropped router's subscribers
			// moved.
			// Broadcast bundles each carry the whole set: union them.
			var all bitset.BitSet
			for _, fw := range d.Forwards {
				all.InPlaceUnion(fw.Bundle.Dest)
			}
			f.n.log.Info("destinations dropped: no route to them",
				zap.Uint32s("routers", d.Unrouted), zap.Uint32s("routed", loggedRouters(&all)), zap.Uint32("ingress", h.stamp.Origin),
				zap.Uint64("epoch", h.stamp.Epoch), zap.Uint64("seq", h.stamp.Seq), zap.Uint32("hops", h.hops),
				zap.Duration("since_start", f.n.clock.Since(f.n.start)))
		})
	}
}

// loggedRouters lists the first 64 routers of a destination set, for a
// log line.
func loggedRouters(dest *bitset.BitSet) []uint32 {
	var out []uint32
	for r, ok := dest.NextSet(0); ok && len(out) < 64; r, ok = dest.NextSet(r + 1) {
		out = append(out, uint32(r))
	}
	return out
}

// send queues one bundle per next hop of a decision and counts what cannot
// leave. With a plan (p not nil), each bundle carries what its
// destinations ask of delivery (pushQoS); without one it is plain.
func (f *Forwarder) send(d drp.Decision, routes *linkstate.Table, p *qosPlan, path uint32, raw []byte, h bundleHeader) {
	n := f.n
	f.countDrops(d, h)
	if len(d.Forwards) == 0 {
		return
	}
	links := *n.links.Load()
	var refused []drp.Forward // rare: only while a neighbour leaves
	for _, fw := range d.Forwards {
		l := links[fw.Next]
		down := l == nil || l.Down()
		if l != nil && down {
			// Replaced: a link drains once the links were published with
			// its successor, so a fresh load names it.
			l = (*n.links.Load())[fw.Next]
			down = l == nil || l.Down()
		}
		if down && p == nil {
			// Ended, with no successor: the routes this bundle was
			// decided on lead to a neighbour the core has not yet taken
			// out of them, or already has.
			if n.routes.Load() != routes && !f.rerouting {
				fw.Bundle.Dest = fw.Bundle.Dest.Clone() // the decision's sets are scratch
				refused = append(refused, fw)
				continue
			}
			if f.holdForLink(fw, routes, raw, h) {
				continue
			}
		}
		if l == nil {
			// The routing snapshot is ahead of or behind the links.
			n.m.routeDropped.WithLabelValues(routeDropLinkDown).Add(float64(fw.Bundle.Dest.Count()))
			continue
		}
		if l.Finishing() && !f.rerouting && path != wire.PathSecond {
			// Decided on routes loaded before the core finished this
			// link: its neighbour withdrew, and the routes published
			// before the link was finished lead around it.
			fw.Bundle.Dest = fw.Bundle.Dest.Clone() // the decision's sets are scratch
			refused = append(refused, fw)
			continue
		}
		var ok bool
		hl := h
		if !h.marked && l.Congested() {
			hl.marked = true
			n.m.marked.Inc()
		}
		if p == nil {
			size := wire.BundleSizeBound(len(raw), len(fw.Bundle.Dest.Words()))
			ok = l.PushBundle(wire.AppendBundleQoS(make([]byte, 0, size), fw.Bundle, h.stamp, h.publishedAt, h.hops, raw, wire.BundleQoS{Marked: hl.marked}))
		} else {
			ok = p.push(l, fw, routes, path, raw, hl)
		}
		if !ok {
			f.logRefused(l, fw, h)
		}
	}
	if len(refused) > 0 {
		f.reroute(refused, p, path, raw, h)
	}
}

// sendPlain is send for a message that asks nothing of delivery, decided
// on routes.
func (f *Forwarder) sendPlain(d drp.Decision, routes *linkstate.Table, raw []byte, h bundleHeader) {
	f.send(d, routes, nil, 0, raw, h)
}

// holdForLink holds a plain bundle whose next hop's link has ended, with
// no successor, while the routes it was decided on still lead there: the
// link's end reaches the core a moment after the link's writer sees it,
// and the routes around the neighbour a moment after that. Pushed, the
// bundle would be refused and its deliveries lost; held, it is decided
// again once this broker's routes change, or after bounceHoldFor (or
// what is left of it, for a bundle held before: f.linkHeldUntil).
// It reports false, and the caller counts the drop, when the time is up
// or the hold is full.
func (f *Forwarder) holdForLink(fw drp.Forward, routes *linkstate.Table, raw []byte, h bundleHeader) bool {
	n := f.n
	now := n.clock.Now()
	until := f.linkHeldUntil
	if until.IsZero() {
		until = now.Add(bounceHoldFor)
	}
	if !now.Before(until) {
		return false
	}
	hb := heldBundle{linkEnded: true, from: n.cfg.ID, source: fw.Bundle.Source, dest: fw.Bundle.Dest.Clone(),
		hops: fw.Bundle.HopsLeft + 1, routes: routes, until: until, msg: raw, h: h}
	if !n.bounces.add(hb) {
		return false
	}
	n.m.heldForLink.Inc()
	n.m.bouncedHeld.Set(float64(n.bounces.count.Load()))
	n.bounceLog.Do(func() {
		n.log.Info("bundle held: its link has ended and the routes still lead there", zap.Uint32("next", fw.Next),
			zap.Uint32s("routers", loggedRouters(fw.Bundle.Dest)), zap.Uint32("ingress", h.stamp.Origin),
			zap.Uint64("epoch", h.stamp.Epoch), zap.Uint64("seq", h.stamp.Seq), zap.Uint32("hops", h.hops),
			zap.Duration("since_start", n.clock.Since(n.start)))
	})
	return true
}

// reroute decides bundles again on the current routes that were decided
// for links this broker has finished. The data plane forwards with the
// routing snapshot it loaded when a message arrived; the core publishes new
// routes and then finishes the links to neighbours that withdrew, so a
// bundle decided in between would be refused by its link and lost, though
// the routes now lead around the neighbour. Decided again once: what the
// new decision sends to a finishing link, or cannot route, is counted as
// any drop is.
func (f *Forwarder) reroute(refused []drp.Forward, p *qosPlan, path uint32, raw []byte, h bundleHeader) {
	routes := f.n.routes.Load()
	f.rerouting = true
	defer func() { f.rerouting = false }()
	for _, fw := range refused {
		// The bundle has not left this broker: it has the hops it
		// arrived with, one more than its decision gave it.
		d := f.decideHere(routes, drp.Bundle{Source: fw.Bundle.Source, Dest: fw.Bundle.Dest, HopsLeft: fw.Bundle.HopsLeft + 1})
		f.send(d, routes, p, path, raw, h)
	}
}

// logRefused logs a few bundles their link refused (the link counts them),
// with the message's stamp and whether this broker had finished the link
// to a neighbour that withdrew, so that a delivery lost around a drain can
// be traced to the bundle that carried it.
func (f *Forwarder) logRefused(l Link, fw drp.Forward, h bundleHeader) {
	f.n.refusedLog.Do(func() {
		f.n.log.Info("bundle refused by its link", zap.String("peer", l.Name()), zap.Bool("finishing", l.Finishing()),
			zap.Uint32s("routers", loggedRouters(fw.Bundle.Dest)), zap.Uint32("ingress", h.stamp.Origin), zap.Uint64("epoch", h.stamp.Epoch),
			zap.Uint64("seq", h.stamp.Seq), zap.Uint32("hops", h.hops), zap.Duration("since_start", f.n.clock.Since(f.n.start)))
	})
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
