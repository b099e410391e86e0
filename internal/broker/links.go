package broker

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"go.uber.org/zap"

	dripv1 "github.com/dripmesh/drip/api/proto/drip/v1"
	"github.com/dripmesh/drip/internal/linkstate"
	"github.com/dripmesh/drip/internal/transport"
)

// The broker's links: those its neighbours dial (HandleLink) and those it
// dials (dialLoop), attached to the core, and detached when they end.

// HandleLink serves a link a neighbour dialled (transport.Handler). It
// returns when the link ends.
func (b *Broker) HandleLink(c transport.Conn) {
	l, err := b.attach(c, false)
	if err != nil {
		// A claimant of a linked router's ID is logged by attach, a few.
		if !b.stopping.Load() && !errors.Is(err, errEstablished) {
			b.log.Warn("refused peer link", zap.String("peer", c.Remote().GetRouterName()),
				zap.Uint32("peer_router", c.Remote().GetRouterId()), zap.Error(err))
		}
		c.Close(err)
		return
	}
	<-l.Done()
}

// PeerService returns the drip.v1.Peer service of this broker.
func (b *Broker) PeerService() *transport.PeerServer {
	ps := transport.NewPeerServer(b.open, b.HandleLink)
	ps.Rejected = func(remote *dripv1.Open, err error) {
		reason, _ := transport.IsIncompatible(err)
		b.m.linkHandshakeFails.WithLabelValues(reason).Inc()
		b.log.Warn("refused peer link", zap.String("peer", remote.GetRouterName()), zap.Uint32("peer_router", remote.GetRouterId()), zap.Error(err))
	}
	return ps
}

var errDuplicate = errors.New("a link to this router already exists")

// errEstablished refuses a link claiming the router ID of a neighbour
// linked and talking (Broker.established).
var errEstablished = errors.New("router ID in use")

// replacedDrainTimeout bounds the drain of a link a newer one replaced: a
// neighbour that restarted will never half-close the old one.
const replacedDrainTimeout = 5 * time.Second

// attach starts a new link and tells the core. A link claiming the router
// ID of an established one is refused (established). When two links to
// one neighbour race (both sides dialled), the one dialled by the lower
// router ID wins on both sides, so exactly one survives; a new link in the
// same direction as an existing one that carries nothing, or nothing any
// more, replaces it (the neighbour restarted or redialled).
func (b *Broker) attach(c transport.Conn, dialed bool) (*transport.Link, error) {
	if b.stopping.Load() {
		return nil, errors.New("broker shutting down")
	}
	cfg := b.cfg
	remote := c.Remote()
	if id := remote.GetRouterId(); id > cfg.MaxRouterID {
		// Per-message state is sized by the largest router ID known.
		b.m.linkHandshakeFails.WithLabelValues("router_id").Inc()
		return nil, fmt.Errorf("peer %q claims router ID %d, beyond the largest this mesh admits (--max-router-id %d)",
			remote.GetRouterName(), id, cfg.MaxRouterID)
	}
	fwd := b.node.NewForwarder()
	l, err := transport.NewLink(c, transport.LinkConfig{
		QueueBytes: cfg.LinkQueueBytes, MaxFrameBytes: cfg.MaxFrameBytes,
		Compression: cfg.PeerCompression, PredicateDeltas: cfg.PeerPredicateDeltas, MaxAdFilters: cfg.LinkState.MaxFilters,
		Dialed: dialed, Metrics: b.m.forLink(remote.GetRouterName()),
		Account:      b.node.Budget().Account,
		Backpressure: transport.Backpressure{Stalled: cfg.SlowLinks.Stalled, Behind: cfg.SlowLinks.Behind},
		Control:      b.control,
		Clock:        b.clock,
		Keepalive:    cfg.LinkState.Keepalive,
		ReplayBytes:  cfg.LinkReplayBytes,
		MarkBytes:    cfg.LinkMarkBytes,
	}, func(l *transport.Link, msgs []linkstate.Message, bundles [][]byte) error {
		if len(msgs) > 0 {
			b.toCore(coreEvent{kind: evControl, link: l, ctl: msgs, arrived: b.clock.Now()})
		}
		if len(bundles) > 0 {
			fwd.Bundles(l, bundles)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	peer := l.Peer()
	var replaced *transport.Link
	b.linksMu.Lock()
	if old := b.links[peer]; old != nil {
		if b.established(old) {
			// The neighbour is talking on the link it has: whoever else
			// claims its router ID is refused, and told why.
			b.linksMu.Unlock()
			b.m.linkHandshakeFails.WithLabelValues(refusedEstablished).Inc()
			err := fmt.Errorf("%w: router %d (%s) has an established link; refused %s claiming its ID", errEstablished, peer, old.Name(), l.Name())
			b.establishedLog.Do(func() {
				b.log.Warn("refused a second link claiming a linked neighbour's router ID (more are counted, not logged)",
					zap.Uint32("peer_router", peer), zap.String("linked", old.Name()), zap.String("claimant", l.Name()), zap.Bool("dialed", dialed))
			})
			l.Close(err)
			return nil, err
		}
		lowerDials := cfg.ID < peer
		if refuseNew(old.Dialed(), dialed, lowerDials, b.silent(old)) {
			b.linksMu.Unlock()
			b.m.linkHandshakeFails.WithLabelValues("duplicate").Inc()
			b.readRefused(l)
			return nil, fmt.Errorf("%w (%s)", errDuplicate, l.Name())
		}
		replaced = old
	}
	b.links[peer] = l
	b.linkGroup.Add(1)
	b.linksMu.Unlock()

	b.m.linkUp.WithLabelValues(l.Name()).Set(1)
	b.log.Info("link up", zap.String("peer", l.Name()), zap.Uint32("peer_router", peer), zap.Bool("dialed", dialed))
	b.toCore(coreEvent{kind: evLinkUp, link: l, replaces: replaced})
	l.Start()
	go func() {
		defer b.linkGroup.Done()
		<-l.Done()
		l.Wait()
		b.detach(l)
	}()
	return l, nil
}

// readRefused reads what the neighbour sends on a link this broker
// refused, until the neighbour ends it or replacedDrainTimeout, and sends
// nothing on it. When both ends dial at once, each end sees the two links
// arrive in its own order: the neighbour may have taken the link refused
// here as its only one and sent bundles on it before the link both ends
// keep reached it. It then replaces this one and drains it — sends what it
// holds and half-closes — and what it sent is forwarded from here instead
// of going down with the connection. Its control messages are ignored (the
// core knows only the link it keeps).
func (b *Broker) readRefused(l *transport.Link) {
	l.Start()
	ctx, cancel := context.WithTimeout(context.Background(), replacedDrainTimeout)
	defer cancel()
	select {
	case <-l.Done():
	case <-ctx.Done():
	case <-b.coreDone:
	}
	l.Close(errDuplicate)
	l.Wait()
}

func (b *Broker) detach(l *transport.Link) {
	b.linksMu.Lock()
	current := b.links[l.Peer()] == l
	if current {
		delete(b.links, l.Peer())
		close(b.detached)
		b.detached = make(chan struct{})
	}
	b.forgetLink(l, current)
	b.linksMu.Unlock()
	l.Close(nil) // keeps what was still queued for the core to send again (Node.LinkDown)
	b.log.Info("link down", zap.String("peer", l.Name()), zap.Error(l.Err()), zap.Int("unsent_bundles", l.UnsentAtClose()))
	b.toCore(coreEvent{kind: evLinkDown, link: l})
}

// forgetLink updates the per-link gauges of l, which has ended: a
// configured neighbour's link shows 0 while it is down, since it will be
// dialled again; the series of any other name no current link carries
// (a neighbour that dialled in and left, a link replaced under another
// name) go away, rather than show 1 for a peer long gone. Call it with
// linksMu held.
func (b *Broker) forgetLink(l *transport.Link, current bool) {
	name := l.Name()
	for _, o := range b.links {
		if o.Name() == name {
			return
		}
	}
	if current && slices.ContainsFunc(b.cfg.Peers, func(p Peer) bool { return p.ID == l.Peer() }) {
		b.m.linkUp.WithLabelValues(name).Set(0)
		return
	}
	b.m.linkUp.DeleteLabelValues(name)
	b.m.linkQueueBytes.DeleteLabelValues(name)
}

// refuseNew says whether a new link to a neighbour that already has one is
// refused. When two links race (both sides dialled), the one dialled by the
// lower router ID wins on both sides; a new link in the direction of the
// old one replaces it (the neighbour restarted or redialled), and so does
// any new link once the old one has gone silent.
func refuseNew(oldDialed, newDialed, lowerDials, oldSilent bool) bool {
	return oldDialed != newDialed && oldDialed == lowerDials && !oldSilent
}

// established says whether l, a neighbour's current link, carries an
// established adjacency: it has been up for a dead interval, frames have
// arrived on it, the last within a dead interval. A second link claiming
// the neighbour's router ID is then refused rather than replace it, so
// that an impostor on a plaintext mesh cannot take the link over, and a
// neighbour that restarted or redialled links again once the old link
// has ended or fallen silent. A
// younger link is not established: of two links racing, as when both
// sides dial at once, the one the lower router ID dialled wins on both
// sides (refuseNew), whichever carried frames first.
func (b *Broker) established(l *transport.Link) bool {
	return l.Now() > int64(b.cfg.LinkState.DeadInterval) && l.LastReceived() != 0 && !b.silent(l) && !l.Down()
}

// silent says whether nothing has arrived on l for a dead interval: its
// neighbour is gone or cannot reach it (a path that drops rather than
// resets keeps a TCP connection open for minutes), and a new link from the
// same neighbour replaces it whichever side dialled. Without this a link
// cut silently and healed would stay down until TCP gave up on the old
// connection, the neighbour's every redial refused as a duplicate.
func (b *Broker) silent(l *transport.Link) bool {
	last := l.LastReceived()
	return last != 0 && l.Now()-last > int64(b.cfg.LinkState.DeadInterval)
}

// closeIfSilent ends l, so that its neighbour is dialled again at once,
// if nothing has arrived on it for a dead interval. A path that fails by
// dropping everything leaves the connection open: once the path heals, its
// TCP retransmissions, backed off over the outage, may take as long again
// to resume it, and the neighbour's redials are refused while this side
// holds it (refuseNew). A new connection is up one dial after the heal.
func (b *Broker) closeIfSilent(l *transport.Link) {
	if !b.silent(l) || l.Down() {
		return
	}
	b.log.Info("link silent for a dead interval: closed, dialling again", zap.String("peer", l.Name()))
	l.Close(errors.New("silent for a dead interval"))
}

// link returns the current link to a neighbour, or nil, and a channel
// closed once a link (this one, say) has been detached.
func (b *Broker) link(peer uint32) (*transport.Link, <-chan struct{}) {
	b.linksMu.Lock()
	defer b.linksMu.Unlock()
	return b.links[peer], b.detached
}

// dialLoop keeps a link to one configured neighbour, redialling with
// jittered exponential backoff whenever it is down. A link that ends within
// a dead interval of coming up counts as a failed attempt: a neighbour that
// takes the handshake and then drops the link (one shutting down, or one
// that refuses it as a duplicate) would otherwise be redialled at once,
// again and again.
func (b *Broker) dialLoop(ctx context.Context, p Peer) {
	cfg := b.cfg
	backoff := cfg.DialBackoffMin
	failures := 0
	var watched *transport.Link // the link last seen up, since upAt
	var upAt time.Time
	for ctx.Err() == nil {
		if l, detached := b.link(p.ID); l != nil {
			if l != watched {
				watched, upAt = l, b.clock.Now()
			}
			// Until it is detached, not only done: a link that has ended
			// stays attached until its goroutines have returned, and
			// looking again meanwhile would spin.
			select {
			case <-detached:
			case <-ctx.Done():
				return
			case <-b.clock.After(cfg.LinkState.DeadInterval / 2):
				b.closeIfSilent(l)
			}
			continue
		}
		if watched != nil {
			lived := b.clock.Since(upAt)
			watched = nil
			if lived >= cfg.LinkState.DeadInterval {
				backoff, failures = cfg.DialBackoffMin, 0
			} else if !b.pause(ctx, &backoff) {
				return
			}
		}
		dctx, cancel := context.WithTimeout(ctx, cfg.DialTimeout)
		c, err := b.o.dialer.Dial(dctx, p.Addr, b.open)
		cancel()
		if err == nil {
			if c.Remote().RouterId != p.ID {
				err = fmt.Errorf("peer at %s is router %d (%s), configured as router %d", p.Addr, c.Remote().RouterId, c.Remote().RouterName, p.ID)
				c.Close(err)
			} else if _, err = b.attach(c, true); err != nil {
				c.Close(err)
			}
		}
		if err == nil {
			continue
		}
		if ctx.Err() != nil {
			return
		}
		failures++
		if reason, ok := transport.IsIncompatible(err); ok {
			b.m.linkHandshakeFails.WithLabelValues(reason).Inc()
			b.log.Warn("peer refused or incompatible", zap.String("addr", p.Addr), zap.Error(err))
		} else if failures == 1 || failures%20 == 0 {
			// The first failure and then every twentieth: a neighbour that
			// is down for long must not flood the log.
			b.log.Info("cannot reach peer, retrying", zap.String("addr", p.Addr), zap.Int("attempts", failures), zap.Error(err))
		}
		if !b.pause(ctx, &backoff) {
			return
		}
	}
}

// pause waits a jittered *backoff and doubles it, up to DialBackoffMax;
// false when ctx ends first.
func (b *Broker) pause(ctx context.Context, backoff *time.Duration) bool {
	sleep := *backoff/2 + rand.N(*backoff/2+1)
	*backoff = min(2**backoff, b.cfg.DialBackoffMax)
	select {
	case <-b.clock.After(sleep):
		return true
	case <-ctx.Done():
		return false
	}
}

// toCore hands an event to the core goroutine unless it has returned.
func (b *Broker) toCore(ev coreEvent) {
	select {
	case b.events <- ev:
	case <-b.coreDone:
		if ev.kind == evLinkDown {
			// No core to send them another way: the broker is stopping.
			ev.link.Unsent(nil)
		}
		if ev.replaces != nil {
			// No core to publish the successor: the broker is stopping.
			ev.replaces.Close(fmt.Errorf("%w: replaced by a newer link", errDuplicate))
		}
	}
}

// drainLinks sends what every link has queued, half-closes it and waits for
// the neighbour to close, until deadline.
func (b *Broker) drainLinks(deadline time.Time) {
	b.stopping.Store(true)
	b.linksMu.Lock()
	links := make([]*transport.Link, 0, len(b.links))
	for _, l := range b.links {
		links = append(links, l)
	}
	b.linksMu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), max(deadline.Sub(b.clock.Now()), time.Second))
	defer cancel()
	var wg sync.WaitGroup
	for _, l := range links {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l.Drain(ctx)
		}()
	}
	wg.Wait()
	b.linkGroup.Wait()
}
