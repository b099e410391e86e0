package broker

import (
	"context"
	"errors"
	"sync"

	"github.com/dripmesh/drip/internal/node"
	"go.uber.org/zap"
)

// Run drives the broker until ctx ends, then leaves the mesh without losing
// messages, as the node's drain says (node.Phase): clients move to other
// brokers, the node withdraws and keeps forwarding while its neighbours
// reroute, and once they have (or RerouteGrace) the links send what they
// hold and close. DrainTimeout bounds the whole. Run returns once all of
// the broker's goroutines have stopped.
func (b *Broker) Run(ctx context.Context) error {
	if !b.running.CompareAndSwap(false, true) {
		return errors.New("broker is already running")
	}
	n, cfg := b.node, b.cfg
	b.log.Info("broker starting", zap.String("mesh", cfg.Mesh), zap.Int("peers", len(cfg.Peers)),
		zap.Stringer("bloom_scheme", cfg.Encoding.Scheme), zap.Int("bloom_bits", cfg.Encoding.M), zap.Int("bloom_hashes", cfg.Encoding.K))
	dialCtx, stopDialing := context.WithCancel(context.Background())
	var dialers sync.WaitGroup
	for _, p := range cfg.Peers {
		dialers.Add(1)
		go func() {
			defer dialers.Done()
			b.dialLoop(dialCtx, p)
		}()
	}

	releasing := make(chan struct{})
	released := make(chan struct{})
	go func() {
		defer close(released)
		b.releaseBounced(releasing)
	}()

	ticker := b.clock.NewTicker(cfg.TickInterval)
	defer ticker.Stop()
	n.Tick()
	ctxDone, joined := ctx.Done(), false
	for n.Phase() != node.Stopped {
		select {
		case <-ctxDone:
			ctxDone = nil
			n.Stop()
		case <-ticker.C():
			n.Tick()
		case ev := <-b.events:
			b.handle(ev)
		case <-b.wakeCh:
			n.Flush()
		case build := <-b.built:
			n.InstallIndex(build)
		}
		if !joined && n.Joined() {
			joined = true
			close(b.joined)
		}
		if n.Phase() >= node.Rerouting {
			// Withdrawn: neighbours route around this broker, and a new
			// link would only delay them.
			stopDialing()
		}
	}
	close(b.coreDone)
	stopDialing()
	dialers.Wait()
	close(releasing)
	<-released
	b.builds.Wait()
	b.drainLinks(n.DrainDeadline())
	close(b.stopped)
	b.log.Info("broker stopped")
	return nil
}

func (b *Broker) handle(ev coreEvent) {
	n := b.node
	switch ev.kind {
	case evLinkUp:
		// Two links to one neighbour attached at once (both ends dialled)
		// can have their events queued in either order: a link replaced
		// before the core heard of it must not become current after its
		// successor, or when it closes the core is left with no link to
		// the neighbour, whose adjacency then never forms. Its successor's
		// event drains it.
		b.linksMu.Lock()
		current := b.links[ev.link.Peer()] == ev.link
		b.linksMu.Unlock()
		if current {
			n.LinkUp(ev.link)
		}
		if old := ev.replaces; old != nil {
			// Only now: the data plane pushed onto the old link until
			// LinkUp published the new one, and a push refused by a
			// closed link would be a lost bundle. The old link sends
			// what it holds, and reads what its neighbour sent, until
			// both ends have half-closed it.
			b.linkGroup.Add(1)
			go func() {
				defer b.linkGroup.Done()
				ctx, cancel := context.WithTimeout(context.Background(), replacedDrainTimeout)
				defer cancel()
				old.Drain(ctx)
			}()
		}
	case evLinkDown:
		n.LinkDown(ev.link)
	case evControl:
		b.m.controlWait.Observe(b.clock.Since(ev.arrived).Seconds())
		n.Control(ev.link, ev.ctl)
	case evInspect:
		ev.reply <- n.Inspect()
	}
}

// releaseBounced sends on the bundles the data plane held because their
// routes led back where they came from (Forwarder.ReleaseHeld), as they
// fall due, until stop is closed; then it sends every one still held,
// before the links drain.
func (b *Broker) releaseBounced(stop <-chan struct{}) {
	fwd := b.node.NewForwarder()
	t := b.clock.NewTicker(b.cfg.TickInterval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			fwd.ReleaseHeld(true)
			return
		case <-t.C():
			fwd.ReleaseHeld(false)
		}
	}
}
