package broker

import (
	"time"

	"github.com/bits-and-blooms/bitset"
	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	dripv1 "github.com/dripmesh/drip/api/proto/drip/v1"
	"github.com/dripmesh/drip/internal/content"
	"github.com/dripmesh/drip/internal/drp"
	"github.com/dripmesh/drip/internal/match"
	"github.com/dripmesh/drip/internal/wire"
)

// forwarding is the data plane of one goroutine (a publishing stream or a
// link reader): its scratch space makes matching and partitioning
// allocation-light without locks.
type forwarding struct {
	b    *Broker
	fwd  *drp.Forwarder
	dest bitset.BitSet
	ids  []match.SubscriberID
}

func newForwarding(b *Broker) *forwarding {
	fwd, err := drp.NewForwarder(b.cfg.DRP)
	if err != nil {
		panic(err) // cfg.DRP was validated by New
	}
	return &forwarding{b: b, fwd: fwd}
}

// ingress routes a message published at this broker (Carzaniga09 §2.2): exact
// local delivery, one match against every broker's encoded predicate, then
// dynamic receiver partitioning. It reports whether any subscriber,
// local or remote, may want the message.
func (f *forwarding) ingress(m content.Message, pm *dripv1.Message) bool {
	b := f.b
	b.m.published.Inc()
	now := time.Now()
	published := &dripv1.Published{Message: pm, IngressRouter: b.cfg.ID, PublishedUnixNano: now.UnixNano()}
	local := f.deliverLocal(m, published)

	start := time.Now()
	bm := b.cfg.Encoding.EncodeMessage(m)
	f.dest.ClearAll()
	b.preds.Load().Match(bm, &f.dest)
	f.dest.Clear(uint(b.cfg.ID))
	b.m.matchEncoded.Observe(time.Since(start).Seconds())
	remote := f.dest.Count()
	b.m.destinations.Observe(float64(remote))
	if remote == 0 {
		if local == 0 {
			b.m.unmatched.Inc()
		}
		return local > 0
	}
	raw, err := proto.Marshal(pm)
	if err != nil {
		b.log.Error("cannot encode message for peers", zap.Error(err))
		return true
	}
	d := f.fwd.Ingress(b.routes.Load(), &f.dest)
	f.send(d, raw, published.PublishedUnixNano, 0)
	return true
}

// transit handles a bundle from a neighbour: deliver here if this broker is
// a destination (exactly: a Bloom false positive is counted, not
// delivered), then repartition the remaining destinations.
func (f *forwarding) transit(from *peerLink, bu *dripv1.Bundle) {
	b := f.b
	dest := bitset.From(bu.Destinations)
	in := drp.Bundle{Source: bu.Source, Dest: dest, HopsLeft: uint8(min(bu.HopsLeft, 255)), Broadcast: bu.Broadcast}
	d := f.fwd.Transit(b.routes.Load(), from.peer, in)
	if d.Deliver {
		f.deliverRemote(from, bu)
	}
	f.send(d, bu.Message, bu.PublishedUnixNano, bu.Hops+1)
}

func (f *forwarding) deliverRemote(from *peerLink, bu *dripv1.Bundle) {
	b := f.b
	var pm dripv1.Message
	if err := proto.Unmarshal(bu.Message, &pm); err != nil {
		b.log.Warn("undecodable message in bundle", zap.String("peer", from.name), zap.Error(err))
		return
	}
	m, err := wire.MessageFromProto(&pm, b.cfg.Messages)
	if err != nil {
		b.log.Warn("invalid message in bundle", zap.String("peer", from.name), zap.Error(err))
		return
	}
	published := &dripv1.Published{Message: &pm, IngressRouter: bu.Source, PublishedUnixNano: bu.PublishedUnixNano, Hops: bu.Hops + 1}
	if f.deliverLocal(m, published) == 0 {
		b.m.falsePositives.Inc()
	}
}

func (f *forwarding) deliverLocal(m content.Message, p *dripv1.Published) int {
	start := time.Now()
	d := &dripv1.Delivery{Event: &dripv1.Delivery_Message{Message: p}}
	var n int
	n, f.ids = f.b.subs.deliver(m, d, f.ids)
	f.b.m.matchExact.Observe(time.Since(start).Seconds())
	return n
}

// send queues one bundle per next hop and counts what cannot leave.
func (f *forwarding) send(d drp.Decision, raw []byte, publishedAt int64, hops uint32) {
	b := f.b
	for reason, n := range d.Dropped {
		if n > 0 {
			b.m.routeDropped.WithLabelValues(drp.DropReason(reason).String()).Add(float64(n))
		}
	}
	for _, fw := range d.Forwards {
		bu := &dripv1.Bundle{
			Source:            fw.Bundle.Source,
			Destinations:      fw.Bundle.Dest.Words(),
			HopsLeft:          uint32(fw.Bundle.HopsLeft),
			Broadcast:         fw.Bundle.Broadcast,
			Message:           raw,
			PublishedUnixNano: publishedAt,
			Hops:              hops,
		}
		l := b.link(fw.Next)
		if l == nil {
			// The routing snapshot is ahead of or behind the links.
			b.m.routeDropped.WithLabelValues("link_down").Add(float64(fw.Bundle.Dest.Count()))
			continue
		}
		if !l.queue.PushBundle(bu, proto.Size(bu)) {
			l.m.droppedFull.Inc()
			continue
		}
		l.m.queueBytes.Set(float64(l.queue.Bytes()))
	}
}
