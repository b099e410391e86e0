package node

import (
	"time"

	"go.uber.org/zap"
)

// Phase is where the node stands in leaving the mesh.
func (n *Node) Phase() Phase { return n.phase }

// Stop starts a graceful departure: new subscriptions are refused, each
// local subscriber is told to move (Subscription.Draining, with the overlap
// its client should keep both subscriptions for), and Draining is closed
// so that publish streams hand their publishers over. The phases that
// follow (Phase) need no more calls than the driver's ticks and inputs:
// the next of them moves the drain on.
func (n *Node) Stop() {
	if n.phase != Running {
		return
	}
	now := n.clock.Now()
	n.phase, n.drainStart, n.phaseEnd = Moving, now, now.Add(n.cfg.DrainTimeout/2)
	n.log.Info("broker draining: clients move to other brokers", zap.Int("subscriptions", n.Subscriptions()))
	n.draining.Store(true)
	n.subs.drain(DrainNotice{Deadline: n.DrainDeadline(), Overlap: n.cfg.DrainOverlap})
	close(n.drain)
}

// Draining is closed once Stop has run.
func (n *Node) Draining() <-chan struct{} { return n.drain }

// DrainDeadline is when the whole drain must be over, links included:
// DrainTimeout after Stop (zero before).
func (n *Node) DrainDeadline() time.Time {
	if n.phase == Running {
		return time.Time{}
	}
	return n.drainStart.Add(n.cfg.DrainTimeout)
}

// advanceDrain moves the drain on to its next phase once the current one
// is over; every control-plane call runs it (flush), before the routing
// protocol's output is sent, which then carries a withdrawal.
func (n *Node) advanceDrain() {
	if n.phase == Running || n.phase == Stopped {
		return
	}
	now := n.clock.Now()
	switch n.phase {
	case Moving:
		if n.Subscriptions() > 0 && now.Before(n.phaseEnd) {
			return
		}
		// Subscriptions still open here were kept by clients that saw
		// messages routed to this broker alone: ending them can lose.
		n.log.Info("subscribers' move over", zap.Int("subscriptions_ended", n.Subscriptions()),
			zap.Duration("after", now.Sub(n.drainStart)), zap.Strings("ended", n.subs.describe(5)))
		n.subs.closeAll()
		n.withdraw()
		n.phase, n.withdrawnAt = Rerouting, now
		n.phaseEnd = now.Add(min(n.cfg.RerouteGrace, max(0, n.DrainDeadline().Sub(now))))
	case Rerouting:
		finished := n.peersFinished()
		if !finished && now.Before(n.phaseEnd) {
			return
		}
		if finished {
			n.log.Info("neighbours route around this broker", zap.Duration("after", now.Sub(n.withdrawnAt)))
		} else {
			n.log.Warn("neighbours did not all route around this broker in time; closing links anyway",
				zap.Duration("waited", now.Sub(n.withdrawnAt)))
		}
		n.phase = Stopped
	}
}

// peersFinished reports whether every neighbour has said that it routes
// around this withdrawn node and has sent its last bundle here
// (Link.PeerFinished), or its link has ended.
func (n *Node) peersFinished() bool {
	for _, l := range n.current {
		if !l.PeerFinished() {
			return false
		}
	}
	return true
}

// withdraw floods a withdrawal of this router so that neighbours reroute
// around it at once, and stops the routing protocol. The data plane keeps
// forwarding with the last routes, for the bundles still on their way.
func (n *Node) withdraw() {
	if n.withdrawn {
		return
	}
	n.withdrawn = true
	n.log.Info("withdrawing from the mesh")
	n.ls.Shutdown() // flush sends its withdrawal
}

// Stopping reports whether Stop has run. Safe from any goroutine.
func (n *Node) Stopping() bool { return n.draining.Load() }
