package linkstate

import "time"

// Fast failure detection (Config.SuspectMultiplier). A link cut without a
// reset — a path that drops everything — keeps its TCP connection open,
// and the adjacency would only die after DeadInterval: seconds in which
// every message routed over it is lost (docs/results/harmony.md). With
// keepalives every link carries a frame at least every Keepalive, so a
// silence of a few keepalives means the link has failed; as with BFD
// (RFC 5880) under OSPF, the router then reroutes at once. Unlike a dead
// adjacency, a suspect one keeps its state: its link leaves the LSA, and
// comes back without a database exchange, so that a false alarm costs two
// LSAs and no more. It comes back once it is heard again and a probe (a
// hello answered at once) has measured its RTT: a silence is also what a
// path whose delay jumped looks like, and the link's cost must say so
// before routes lead over it again (Kim10 §2.2's reactive rerouting, a
// round trip after the jump instead of a hello interval).
//
// False alarms have two causes this code guards against. One is this
// router's own starvation: a Tick that comes late, after the CPU was
// taken from the whole process, would find every link silent. Silence is
// judged only at a Tick that follows the previous one within half the
// silence it would judge (timely). The other is a neighbour or path that
// stalls for a while without failing, a busy hub, say: each false alarm
// doubles the silence that makes that link suspect, as long as that stays
// below half the dead interval, and each suspectCalm dead intervals
// without one halves it again, as OSPF implementations damp flapping
// links.

// suspectCalm is how many dead intervals without a false alarm forgive
// one doubling of a link's silence (penalty).
const suspectCalm = 10

// MinKeepalive is the shortest keepalive interval a router may announce
// and that it believes of a neighbour: a shorter one would make every
// Tick judge silences smaller than its own period.
const MinKeepalive = 5 * time.Millisecond

// silenceAllowed is how long the link to nb may be silent before it is
// suspect, 0 when it never is: fast detection is off, the neighbour
// announced no keepalive, or the allowance, doubled once for each
// penalty, reaches half the dead interval. Hellos alone leave a link
// silent for up to HelloInterval, which may be that long.
func (n *Node) silenceAllowed(nb *neighbor, penalty uint) time.Duration {
	half := n.cfg.DeadInterval / 2
	if n.cfg.SuspectMultiplier == 0 || nb.keepalive == 0 || nb.keepalive >= half {
		return 0
	}
	d := time.Duration(n.cfg.SuspectMultiplier) * max(nb.keepalive, MinKeepalive)
	for range penalty {
		if d >= half {
			return 0
		}
		d *= 2
	}
	if d >= half {
		return 0
	}
	return d
}

// watchSilence suspects the link to nb after the silence it is allowed,
// and takes it back into the LSA once it is heard again. since is the time
// since the previous Tick.
func (n *Node) watchSilence(nb *neighbor, since time.Duration) {
	if nb.suspect {
		switch {
		case nb.state != StateFull || nb.lastHeard <= nb.suspectAt:
		case nb.probeAt <= nb.suspectAt:
			// Heard again. The silence may have been a delay that jumped
			// (a path that changed), and the link too slow now for what
			// routes over it: it returns once a probe has measured its
			// RTT (stepHello), so that its cost says so first.
			h := n.hello(nb)
			h.Probe = true
			nb.probeAt = n.now
			n.send(nb.id, h)
		case n.now-nb.probeAt >= n.cfg.HelloInterval:
			// No answer, as from a broker older than probes, whose next
			// hello would have echoed the probe by now: heard all along,
			// the link returns with the cost it has.
			n.restore(nb)
		}
		return
	}
	if nb.penalty > 0 && n.now >= nb.calmAt {
		nb.penalty--
		nb.calmAt = n.now + suspectCalm*n.cfg.DeadInterval
	}
	allowed := n.silenceAllowed(nb, nb.penalty)
	if allowed == 0 || nb.state != StateFull || !nb.advertised || since > allowed/2 {
		return
	}
	if silence := n.now - nb.lastHeard; silence >= allowed {
		nb.suspect, nb.suspectAt = true, n.now
		n.lsaDirty = true
		n.events = append(n.events, Event{Type: EventLinkSuspect, Peer: nb.id, RTT: silence})
	}
}

// restore takes the suspect link to nb back into the LSA: it was heard
// again before the adjacency died, so it had not failed, or has healed.
// Either way it was routed around for what it could not carry for a
// while; the next silence it is allowed is longer, so that a link that
// keeps stalling does not keep rerouting the mesh.
func (n *Node) restore(nb *neighbor) {
	nb.suspect = false
	n.lsaDirty = true
	n.events = append(n.events, Event{Type: EventLinkRestored, Peer: nb.id, RTT: n.now - nb.suspectAt})
	if n.silenceAllowed(nb, nb.penalty+1) != 0 {
		nb.penalty++
	}
	nb.calmAt = n.now + suspectCalm*n.cfg.DeadInterval
}
