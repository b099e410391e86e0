package broker

import (
	"github.com/bits-and-blooms/bitset"
	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	dripv1 "github.com/dripmesh/drip/api/proto/drip/v1"
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
	n    *Node
	fwd  *drp.Forwarder
	dest bitset.BitSet
	ids  []match.SubscriberID
}

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
// next hop (dynamic receiver partitioning). m and pm are the same message;
// pm is what is sent. It reports whether any subscriber, local or remote,
// may want the message.
func (f *Forwarder) Publish(m content.Message, pm *dripv1.Message) bool {
	n := f.n
	n.m.published.Inc()
	stamp := dedup.Stamp{Origin: n.cfg.ID, Epoch: n.epoch, Seq: n.seq.Add(1)}
	now := n.clock.Now()
	published := &dripv1.Published{Message: pm, IngressRouter: n.cfg.ID, PublishedUnixNano: now.UnixNano(),
		IngressEpoch: stamp.Epoch, Seq: stamp.Seq}
	local := f.deliverLocal(m, published)

	start := n.clock.Now()
	bm := n.cfg.Encoding.EncodeMessage(m)
	f.dest.ClearAll()
	n.preds.Load().Match(bm, &f.dest)
	f.dest.Clear(uint(n.cfg.ID))
	n.m.matchEncoded.Observe(n.clock.Since(start).Seconds())
	remote := f.dest.Count()
	n.m.destinations.Observe(float64(remote))
	if remote == 0 {
		if local == 0 {
			n.m.unmatched.Inc()
		}
		return local > 0
	}
	raw, err := proto.Marshal(pm)
	if err != nil {
		n.log.Error("cannot encode message for peers", zap.Error(err))
		return true
	}
	d := f.fwd.Ingress(n.routes.Load(), &f.dest)
	f.send(d, raw, stamp, published.PublishedUnixNano, 0)
	return true
}

// Bundles handles the bundles of one frame from a neighbour: each is
// delivered here if this broker is a destination — exactly, once per
// stamp — and its other destinations are repartitioned.
func (f *Forwarder) Bundles(from Link, bs []*dripv1.Bundle) {
	n := f.n
	for _, pb := range bs {
		b, err := wire.BundleFromProto(pb, n.cfg.MaxRouterID)
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
	var pm dripv1.Message
	if err := proto.Unmarshal(b.Message, &pm); err != nil {
		n.m.malformedBundles.Inc()
		n.log.Debug("undecodable message in bundle", zap.String("peer", from.Name()), zap.Error(err))
		return
	}
	m, err := wire.MessageFromProto(&pm, n.cfg.Messages)
	if err != nil {
		n.m.malformedBundles.Inc()
		n.log.Debug("invalid message in bundle", zap.String("peer", from.Name()), zap.Error(err))
		return
	}
	published := &dripv1.Published{Message: &pm, IngressRouter: b.Source, PublishedUnixNano: b.PublishedAt, Hops: b.Hops + 1,
		IngressEpoch: b.Stamp.Epoch, Seq: b.Stamp.Seq}
	if f.deliverLocal(m, published) == 0 {
		n.m.falsePositives.Inc()
	}
}

func (f *Forwarder) deliverLocal(m content.Message, p *dripv1.Published) int {
	start := f.n.clock.Now()
	d := &dripv1.Delivery{Event: &dripv1.Delivery_Message{Message: p}}
	var k int
	k, f.ids = f.n.subs.deliver(m, d, f.ids)
	f.n.m.matchExact.Observe(f.n.clock.Since(start).Seconds())
	return k
}

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
		bu := wire.NewBundle(fw.Bundle, s, publishedAt, hops, raw)
		l.PushBundle(bu, proto.Size(bu))
	}
}
