package broker

import (
	"time"

	"github.com/bits-and-blooms/bitset"
	"go.uber.org/zap"

	"github.com/dripmesh/drip/internal/content"
	"github.com/dripmesh/drip/internal/dedup"
	"github.com/dripmesh/drip/internal/drp"
	"github.com/dripmesh/drip/internal/match"
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
	count   uint64 // messages handled, for sampling the latency histograms
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
	return &Forwarder{n: n, fwd: fwd}
}

// Publish routes a message accepted from a local publisher (Carzaniga09
// §2.2): it stamps it, delivers it to matching local subscribers, matches it
// once against every broker's encoded predicate, and sends one bundle per
// next hop (dynamic receiver partitioning). m is the message decoded from
// raw, its wire form (wire.DecodeMessage), which bundles and deliveries
// carry unchanged and which must not change. It reports whether any
// subscriber, local or remote, may want the message.
func (f *Forwarder) Publish(m content.Message, raw []byte) bool {
	n := f.n
	n.m.published.Inc()
	stamp := dedup.Stamp{Origin: n.cfg.ID, Epoch: n.epoch, Seq: n.seq.Add(1)}
	publishedAt := n.clock.Now().UnixNano()
	local := f.deliverLocal(m, raw, stamp, publishedAt, 0)

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
	bm := n.cfg.Encoding.EncodeMessage(m)
	f.dest.ClearAll()
	preds.Match(bm, &f.dest)
	f.dest.Clear(uint(n.cfg.ID))
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
	d := f.fwd.Ingress(n.routes.Load(), &f.dest)
	f.send(d, raw, stamp, publishedAt, 0)
	return true
}

// Bundles handles the bundles of one frame from a neighbour, in their wire
// form (which must not change afterwards): each is delivered here if this
// broker is a destination — exactly, once per stamp — and its other
// destinations are repartitioned.
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
		d := f.fwd.Transit(n.routes.Load(), from.Peer(), b.Bundle)
		// A bundle of this broker's own messages has come back on routes
		// that disagreed; its local subscribers had the message at ingress.
		if d.Deliver && b.Source != n.cfg.ID {
			switch v := n.dups.Admit(b.Stamp, n.clock.Now()); v {
			case dedup.First:
				f.deliverRemote(from, b)
			default:
				n.m.duplicates.WithLabelValues(v.String()).Inc()
			}
		}
		f.send(d, b.Message, b.Stamp, b.PublishedAt, b.Hops+1)
	}
}

func (f *Forwarder) deliverRemote(from Link, b wire.Bundle) {
	n := f.n
	m, err := wire.DecodeMessage(b.Message, n.cfg.Messages)
	if err != nil {
		n.m.malformedBundles.Inc()
		n.log.Debug("invalid message in bundle", zap.String("peer", from.Name()), zap.Error(err))
		return
	}
	if f.deliverLocal(m, b.Message, b.Stamp, b.PublishedAt, b.Hops+1) == 0 {
		n.m.falsePositives.Inc()
	}
}

// deliverLocal queues the message to every local subscriber it matches
// exactly, encoding the delivery once for all of them, and returns how many
// matched.
func (f *Forwarder) deliverLocal(m content.Message, raw []byte, s dedup.Stamp, publishedAt int64, hops uint32) int {
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
	published := wire.AppendPublished(make([]byte, 0, len(raw)+publishedOverhead), raw, s.Origin, publishedAt, hops, s.Epoch, s.Seq)
	for i, sub := range f.targets {
		sub.offer(Queued{Published: published})
		f.targets[i] = nil
	}
	return len(f.targets)
}

// publishedOverhead bounds what a Published adds to its message's bytes.
const publishedOverhead = 48

// send queues one bundle per next hop and counts what cannot leave.
func (f *Forwarder) send(d drp.Decision, raw []byte, s dedup.Stamp, publishedAt int64, hops uint32) {
	n := f.n
	for reason, k := range d.Dropped {
		if k > 0 {
			n.m.routeDropped.WithLabelValues(drp.DropReason(reason).String()).Add(float64(k))
		}
	}
	if len(d.Forwards) == 0 {
		return
	}
	links := *n.links.Load()
	for _, fw := range d.Forwards {
		l := links[fw.Next]
		if l == nil {
			// The routing snapshot is ahead of or behind the links.
			n.m.routeDropped.WithLabelValues("link_down").Add(float64(fw.Bundle.Dest.Count()))
			continue
		}
		l.PushBundle(wire.AppendBundle(make([]byte, 0, wire.BundleSizeBound(len(raw), len(fw.Bundle.Dest.Words()))),
			fw.Bundle, s, publishedAt, hops, raw))
	}
}
