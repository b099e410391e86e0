package node

import (
	"time"

	"go.uber.org/zap"

	"github.com/dripmesh/drip/internal/drp"
	"github.com/dripmesh/drip/internal/linkstate"
	"github.com/dripmesh/drip/internal/wire"
)

// A link that fails silently has taken bundles it will never deliver: in
// the moments before the silence showed, it passed them to TCP, and they
// wait in its buffers or were dropped on the way. Routing around the link
// (linkstate's suspect.go) saves what comes after; what went before is
// lost with the connection, however fast the failure was found
// (docs/results/harmony.md). So when a link becomes suspect, this broker
// sends again, on the routes around it, what the link took in the time
// that may not have arrived: the silence that made it suspect, a round
// trip and a keepalive. Whatever had arrived after all is a duplicate,
// which the broker that delivers it recognises by its stamp (dedup) as it
// does the copies of two-path messages; a neighbour that was only slow
// gets nothing twice but a few bundles.
//
// Broadcast bundles follow the source's tree, which a broker cannot
// repair from where it stands; they are not sent again (those a link
// never sent count as destinations dropped, link_down).

// replayBundle is a bundle sent on a link that became suspect, waiting to
// be decided again (Forwarder.ReleaseHeld).
type replayBundle struct {
	raw []byte // as pushed to the link
	// unsent says the link never sent it: it was still queued when the
	// link ended (resendUnsent).
	unsent bool
}

// Bounds of the bundles waiting to be sent again: what a few links keep
// (broker.Config.LinkReplayBytes) if they are suspected at once.
const (
	maxReplayBundles = 16384
	maxReplayBytes   = 4 << 20
)

// Replayed bundles are due at once: nil routes are never the node's.
func (r replayBundle) wait() (*linkstate.Table, time.Time, int) { return nil, time.Time{}, len(r.raw) }
func (replayBundle) bounds() (int, int)                         { return maxReplayBundles, maxReplayBytes }

type replayHold = routeHold[replayBundle]

// replayLink takes back what the link to peer sent in the window before
// it became suspect, silence after its last frame, for the data plane to
// send again (a control-plane call).
func (n *Node) replayLink(peer uint32, silence time.Duration) {
	l := n.current[peer]
	if l == nil {
		return
	}
	window := silence + n.cfg.LinkState.Keepalive
	for _, nb := range n.ls.Neighbors() {
		if nb.ID == peer && nb.Samples > 0 {
			window += nb.RTT
		}
	}
	raws := l.Recent(l.Now() - int64(window))
	kept := 0
	for _, raw := range raws {
		if !n.replays.add(replayBundle{raw: raw}) {
			break
		}
		kept++
	}
	n.m.replayed.Add(float64(kept))
	if kept < len(raws) {
		n.log.Warn("bundles of a silent link not sent again: too many wait already",
			zap.String("peer", l.Name()), zap.Int("bundles", len(raws)-kept))
	}
}

// resendUnsent takes back the bundles still queued on l when it ended,
// which it never sent, for the data plane to decide again on the routes
// that now lead around it, as a silent link's last bundles are (a
// control-plane call, once the core has taken the link out of its
// routes). A link ends with bundles queued when its neighbour closes first:
// a neighbour whose drain timed out, or a link replaced by a newer one that
// could not send what it held in time. Dropped, their deliveries were lost
// though the mesh had another way.
func (n *Node) resendUnsent(l Link) {
	kept := 0
	dropped := l.Unsent(func(raw []byte) bool {
		if !n.replays.add(replayBundle{raw: raw, unsent: true}) {
			return false
		}
		kept++
		return true
	})
	if kept == 0 && dropped == 0 {
		return
	}
	n.m.unsentResent.Add(float64(kept))
	n.log.Info("bundles queued on an ended link sent again around it", zap.String("peer", l.Name()),
		zap.Int("bundles", kept), zap.Int("dropped", dropped))
}

// replay decides again, here and on the current routes, a bundle that the
// link took before it fell silent, or never sent, and sends it on around
// it.
func (f *Forwarder) replay(r replayBundle) {
	n := f.n
	var b wire.Bundle
	var err error
	b, f.words, err = wire.ParseBundle(r.raw, n.cfg.MaxRouterID, &f.in, f.words)
	if err != nil {
		return // this broker encoded it: never malformed
	}
	if b.Broadcast {
		if r.unsent {
			// Lost with the link: counted, as the destinations of a
			// route to a link that went down are.
			n.m.routeDropped.WithLabelValues(routeDropLinkDown).Add(float64(b.Dest.Count()))
		}
		return
	}
	b.QoS = saneQoS(b.QoS)
	routes := n.routes.Load()
	var rt drp.Routing = routes
	if b.QoS.Path == wire.PathSecond {
		rt = routes.Second(b.Source)
	}
	// As it was decided when it was sent: Transit passes on one hop less
	// than it is given.
	bb := b.Bundle
	bb.HopsLeft++
	d := f.decideHere(rt, bb)
	d.Deliver = false // its destinations lay behind the link
	h := bundleHeader{stamp: b.Stamp, publishedAt: b.PublishedAt, hops: b.Hops, marked: b.QoS.Marked}
	if b.QoS.Deadline != 0 {
		h.elapsed = max(time.Duration(b.QoS.Deadline-b.QoS.Budget), 1)
	}
	if len(d.Forwards) > 0 {
		n.sent.record(b.Stamp, b.Message) // what may come back (own.go)
	}
	if b.QoS.Deadline == 0 && b.QoS.Path == 0 {
		f.sendPlain(d, routes, b.Message, h)
		return
	}
	p := f.plan(nil, time.Duration(b.QoS.Deadline), time.Duration(b.QoS.Budget))
	f.send(d, routes, p, b.QoS.Path, b.Message, h)
}
