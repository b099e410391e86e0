package broker

import (
	"compress/flate"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	dripv1 "github.com/dripmesh/drip/api/proto/drip/v1"
	"github.com/dripmesh/drip/internal/linkstate"
	"github.com/dripmesh/drip/internal/transport"
	"github.com/dripmesh/drip/internal/wire"
)

var (
	controlToProto   = wire.ControlToProto
	controlFromProto = wire.ControlFromProto
)

// peerLink is an established link to a neighbour: the connection, its send
// queue, and the two goroutines that own them.
type peerLink struct {
	peer   uint32
	name   string
	weight uint32
	dialed bool // by this broker: decides which of two simultaneous links survives
	conn   transport.Conn
	queue  *transport.Queue
	m      linkMetrics
	// comp compresses what this side sends, when both sides agreed to;
	// decomp inflates what the neighbour sends, when this side offered.
	comp   *transport.FrameCompressor
	decomp *transport.FrameDecompressor
	// writerDone is closed when the writer goroutine has sent its last
	// frame (queue closed and drained, or the link failed).
	writerDone chan struct{}
}

func (l *peerLink) close(reason error) { l.conn.Close(reason) }

// HandleLink serves a link a neighbour dialled (transport.Handler). It
// returns when the link ends.
func (b *Broker) HandleLink(c transport.Conn) {
	l, err := b.attach(c, false)
	if err != nil {
		c.Close(err)
		return
	}
	<-l.conn.Done()
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

// attach registers a new link and starts its goroutines. When two links to
// one neighbour race (both sides dialled), the one dialled by the lower
// router ID wins on both sides, so exactly one survives; a new link in the
// same direction as an existing one replaces it.
func (b *Broker) attach(c transport.Conn, dialed bool) (*peerLink, error) {
	if b.stopping.Load() {
		return nil, errors.New("broker shutting down")
	}
	remote := c.Remote()
	l := &peerLink{
		peer:   remote.RouterId,
		name:   remote.RouterName,
		weight: b.weightOf(remote.RouterId),
		dialed: dialed,
		conn:   c,
		queue:  transport.NewQueue(b.cfg.LinkQueueBytes),
		m:      b.m.forLink(remote.RouterName),

		writerDone: make(chan struct{}),
	}
	if b.cfg.PeerCompression {
		l.decomp = transport.NewFrameDecompressor(0)
		if slices.Contains(remote.GetCompression(), transport.CompressionDeflate) {
			var err error
			if l.comp, err = transport.NewFrameCompressor(flate.DefaultCompression); err != nil {
				return nil, err
			}
		}
	}
	b.linksMu.Lock()
	if old := b.links[l.peer]; old != nil {
		// Same direction: the neighbour restarted or redialled, and the old
		// link is stale. Opposite directions: both sides dialled at once.
		lowerDials := b.cfg.ID < l.peer
		if old.dialed != l.dialed && old.dialed == lowerDials {
			b.linksMu.Unlock()
			b.m.linkHandshakeFails.WithLabelValues("duplicate").Inc()
			return nil, fmt.Errorf("%w (%s)", errDuplicate, l.name)
		}
		defer old.close(fmt.Errorf("%w: replaced by a newer link", errDuplicate))
	}
	b.links[l.peer] = l
	b.linkGroup.Add(2)
	b.linksMu.Unlock()

	l.m.queueBytes.Set(0)
	b.m.linkUp.WithLabelValues(l.name).Set(1)
	b.log.Info("link up", zap.String("peer", l.name), zap.Uint32("peer_router", l.peer), zap.Bool("dialed", dialed))
	b.toCore(coreEvent{kind: evLinkUp, link: l})
	go b.writeLoop(l)
	go b.readLoop(l)
	return l, nil
}

func (b *Broker) weightOf(peer uint32) uint32 {
	for _, p := range b.cfg.Peers {
		if p.ID == peer && p.Weight > 0 {
			return p.Weight
		}
	}
	return 1
}

// toCore hands an event to the core goroutine unless the broker has stopped.
func (b *Broker) toCore(ev coreEvent) {
	select {
	case b.events <- ev:
	case <-b.stopped:
	}
}

func (b *Broker) detach(l *peerLink) {
	b.linksMu.Lock()
	if b.links[l.peer] == l {
		delete(b.links, l.peer)
		b.m.linkUp.WithLabelValues(l.name).Set(0)
	}
	b.linksMu.Unlock()
	if n := l.queue.Close(); n > 0 {
		l.m.droppedDown.Add(float64(n))
	}
	l.m.queueBytes.Set(0)
	b.log.Info("link down", zap.String("peer", l.name), zap.Error(l.conn.Err()))
	b.toCore(coreEvent{kind: evLinkDown, link: l})
}

// link returns the current link to a neighbour, or nil.
func (b *Broker) link(peer uint32) *peerLink {
	b.linksMu.RLock()
	defer b.linksMu.RUnlock()
	return b.links[peer]
}

func (b *Broker) writeLoop(l *peerLink) {
	defer b.linkGroup.Done()
	defer close(l.writerDone)
	for {
		f, ok := l.queue.Next(l.conn.Done(), b.cfg.MaxFrameBytes)
		if !ok {
			return
		}
		bundles, plain := len(f.Bundles), 0
		if l.comp != nil {
			var err error
			if f, plain, err = l.comp.Compress(f); err != nil {
				l.close(fmt.Errorf("link to %s: %w", l.name, err))
				return
			}
		}
		size := proto.Size(f)
		if l.comp == nil {
			plain = size
		}
		if err := l.conn.Send(f); err != nil {
			return
		}
		l.m.sentBytes.Add(float64(size))
		l.m.sentPlainBytes.Add(float64(plain))
		l.m.sentBundles.Add(float64(bundles))
		l.m.queueBytes.Set(float64(l.queue.Bytes()))
	}
}

func (b *Broker) readLoop(l *peerLink) {
	defer b.linkGroup.Done()
	defer b.detach(l)
	in := newForwarding(b)
	for {
		f, err := l.conn.Recv()
		if err != nil {
			return
		}
		l.m.recvBytes.Add(float64(proto.Size(f)))
		if l.decomp != nil {
			if f, err = l.decomp.Decompress(f); err != nil {
				l.close(fmt.Errorf("link from %s: %w", l.name, err))
				return
			}
		} else if len(f.GetDeflated()) > 0 {
			l.close(fmt.Errorf("link from %s: compressed frame, but this broker did not offer compression", l.name))
			return
		}
		if len(f.Control) > 0 {
			msgs := make([]linkstate.Message, 0, len(f.Control))
			for _, c := range f.Control {
				msg, err := controlFromProto(c)
				if err != nil {
					// A peer that sends malformed control messages is
					// broken; keeping the link would corrupt routing.
					l.close(fmt.Errorf("malformed control message from %s: %w", l.name, err))
					return
				}
				msgs = append(msgs, msg)
			}
			b.toCore(coreEvent{kind: evControl, link: l, msgs: msgs})
		}
		if len(f.Bundles) > 0 {
			l.m.recvBundles.Add(float64(len(f.Bundles)))
			for _, bu := range f.Bundles {
				in.transit(l, bu)
			}
		}
	}
}

// dialLoop keeps a link to one configured neighbour, redialling with
// jittered exponential backoff whenever it is down.
func (b *Broker) dialLoop(ctx context.Context, p Peer) {
	backoff := b.cfg.DialBackoffMin
	failures := 0
	for ctx.Err() == nil {
		if l := b.link(p.ID); l != nil {
			select {
			case <-l.conn.Done():
			case <-ctx.Done():
				return
			}
			continue
		}
		dctx, cancel := context.WithTimeout(ctx, b.cfg.DialTimeout)
		c, err := b.dialer.Dial(dctx, p.Addr, b.open)
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
			backoff, failures = b.cfg.DialBackoffMin, 0
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
		sleep := backoff/2 + rand.N(backoff/2+1)
		select {
		case <-time.After(sleep):
		case <-ctx.Done():
			return
		}
		backoff = min(2*backoff, b.cfg.DialBackoffMax)
	}
}
