package linkstate

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"time"
)

// NeighborState is the state of an adjacency.
type NeighborState uint8

const (
	// StateDown: the link is up but nothing was heard within DeadInterval.
	StateDown NeighborState = iota
	// StateInit: we hear the neighbour, but it has not heard us yet.
	StateInit
	// StateFull: hellos flow both ways, the neighbour receives floods and
	// the databases are exchanged. It enters our LSA once the exchange is
	// done (neighbor.advertised), as in OSPF's Loading→Full, so no router
	// sends traffic over the link before the router behind it has routes.
	StateFull
)

// String returns "down", "init" or "full", usable as a metric label.
func (s NeighborState) String() string {
	switch s {
	case StateDown:
		return "down"
	case StateInit:
		return "init"
	case StateFull:
		return "full"
	}
	return fmt.Sprintf("NeighborState(%d)", uint8(s))
}

// neighbor is the state of one link.
type neighbor struct {
	id     uint32
	name   string
	state  NeighborState
	weight uint32 // from LinkUp
	cost   uint32 // what the own LSA advertises for this link

	nextHello time.Duration
	// lastHeard is when the neighbour last showed it is alive: a hello,
	// or a frame of any kind on the link (Alive). lastHello is when its
	// last hello arrived, which bounds how long frames alone keep the
	// adjacency (helloSilence).
	lastHeard time.Duration
	lastHello time.Duration
	// theirSentAt and theirRecvAt describe the last hello received, which
	// the next hello echoes once (echoPending) so each hello yields one
	// RTT sample.
	theirSentAt time.Duration
	theirRecvAt time.Duration
	echoPending bool

	// keepalive is what the neighbour's hellos announce (Hello.Keepalive);
	// suspect says its link is left out of the LSA for its silence since
	// suspectAt, probeAt when a probe asked for its RTT after it was heard
	// again, and penalty doubles the silence that makes it suspect after
	// false alarms, until calmAt forgives one (suspect.go).
	keepalive time.Duration
	suspect   bool
	suspectAt time.Duration
	probeAt   time.Duration
	penalty   uint
	calmAt    time.Duration

	srtt    time.Duration
	samples int
	budget  time.Duration // one-way delay budget of deadline flows (budget.go); 0: none

	// The database exchange of the adjacency (adjacencyUp to advertised):
	// upAt is when it came up; gotSummary says the neighbour's summary
	// arrived; pending holds what we requested from it and the sequence
	// number each request waits for; peerSeqAtUp is the sequence number of
	// the neighbour's LSA we held at upAt (see peerReady).
	advertised  bool
	upAt        time.Duration
	gotSummary  bool
	pending     map[Key]uint64
	peerSeqAtUp uint64

	mismatches   int       // hellos in a row showing mismatchPair
	mismatchPair [2]uint64 // our digest and the neighbour's
	badVersion   bool      // reported a version mismatch already
	versionSeen  uint32
}

// NeighborInfo describes a neighbour for metrics and status pages.
type NeighborInfo struct {
	ID    uint32
	Name  string
	State NeighborState
	// Advertised says the adjacency is full and its database exchange is
	// done: the link is in the router's LSA unless it is Suspect.
	Advertised bool
	// Suspect says the link is left out of the LSA for its silence
	// (Config.SuspectMultiplier) since SuspectAt.
	Suspect   bool
	SuspectAt time.Duration
	// Weight is the configured weight from LinkUp.
	Weight uint32
	// Cost is the cost the router currently advertises for the link.
	Cost uint32
	// RTT is the smoothed round-trip time, valid when Samples > 0.
	RTT     time.Duration
	Samples int
	// Budget is the link's delay budget (SetDelayBudget); 0: none.
	Budget time.Duration
	// LastHeard is when the neighbour last showed it is alive, by a hello
	// or any frame (Node.Alive), on the node's clock.
	LastHeard time.Duration
}

// Neighbors lists the neighbours in ascending ID order.
func (n *Node) Neighbors() []NeighborInfo {
	out := make([]NeighborInfo, 0, len(n.nbrIDs))
	for _, id := range n.nbrIDs {
		nb := n.nbrs[id]
		out = append(out, NeighborInfo{
			ID: id, Name: nb.name, State: nb.state, Advertised: nb.advertised, Weight: nb.weight, Cost: nb.cost,
			RTT: nb.srtt, Samples: nb.samples, LastHeard: nb.lastHeard, Budget: nb.budget,
			Suspect: nb.suspect, SuspectAt: nb.suspectAt,
		})
	}
	return out
}

func (n *Node) sendHello(nb *neighbor) { n.send(nb.id, n.hello(nb)) }

// hello is the next hello to nb, echoing the last one received from it
// once.
func (n *Node) hello(nb *neighbor) *Hello {
	h := &Hello{
		Router:    n.cfg.ID,
		Name:      n.cfg.Name,
		Version:   Version,
		SentAt:    n.now,
		Heard:     nb.state != StateDown,
		Digest:    n.digest,
		Keepalive: n.cfg.Keepalive,
	}
	if nb.echoPending {
		h.Echoed, h.Echo, h.Hold = true, nb.theirSentAt, n.now-nb.theirRecvAt
		nb.echoPending = false
	}
	nb.nextHello = n.now + n.cfg.HelloInterval
	return h
}

func (n *Node) stepHello(nb *neighbor, h *Hello) error {
	if h.Router != nb.id {
		return fmt.Errorf("hello on the link to router %d claims to come from router %d", nb.id, h.Router)
	}
	if h.Version != Version {
		if !nb.badVersion || nb.versionSeen != h.Version {
			nb.badVersion, nb.versionSeen = true, h.Version
			n.events = append(n.events, Event{Type: EventVersionMismatch, Peer: nb.id, Seq: uint64(h.Version)})
		}
		return nil
	}
	nb.badVersion = false
	nb.name = h.Name
	nb.keepalive = h.Keepalive
	nb.lastHeard, nb.lastHello = n.now, n.now
	nb.theirSentAt, nb.theirRecvAt, nb.echoPending = h.SentAt, n.now, true
	if h.Echoed {
		// The sample is on our clock alone: we sent at Echo, the peer held
		// the hello for Hold, and it is back now.
		if rtt := n.now - h.Echo - h.Hold; rtt >= 0 && h.Hold >= 0 {
			n.rttSample(nb, rtt)
		}
	}
	prev := nb.state
	nb.state = StateInit
	if h.Heard {
		nb.state = StateFull
	}
	switch {
	case prev == StateFull && nb.state != StateFull:
		// It stopped hearing us: it restarted or our hellos are lost.
		n.adjacencyDown(nb, DownPeerReset)
	case prev != StateFull && nb.state == StateFull:
		n.adjacencyUp(nb)
	case nb.state == StateFull:
		n.compareDigest(nb, h.Digest)
	}
	if nb.suspect && nb.state == StateFull && h.Echoed && nb.probeAt > nb.suspectAt && h.Echo >= nb.probeAt {
		// The probe's answer: the link's RTT is known again, and its cost
		// follows it (rttSample, above) before it returns to the LSA.
		n.restore(nb)
	}
	// Answer at once when the neighbour has not heard us yet, our side
	// just came up, or it probes, so an adjacency forms (or a silent link's
	// RTT is known) in about one RTT rather than one HelloInterval. None
	// of these holds for the answer, so this cannot ping-pong.
	if !h.Heard || prev != StateFull && nb.state == StateFull || h.Probe {
		n.sendHello(nb)
	}
	return nil
}

// compareDigest counts hellos that show the same disagreement: both our
// digest and the neighbour's unchanged, and different. Floods crossing on
// the link cause disagreements that change as they land; one that
// survives DigestMismatchHellos hellos means a message was lost. The
// lower-ID side then sends a summary (both sides see the disagreement, and
// one summary synchronises both).
func (n *Node) compareDigest(nb *neighbor, theirs uint64) {
	if theirs == n.digest {
		nb.mismatches = 0
		return
	}
	if pair := [2]uint64{n.digest, theirs}; pair != nb.mismatchPair {
		nb.mismatchPair, nb.mismatches = pair, 0
	}
	nb.mismatches++
	if nb.mismatches < n.cfg.DigestMismatchHellos {
		return
	}
	nb.mismatches = 0
	if n.cfg.ID < nb.id {
		n.events = append(n.events, Event{Type: EventAntiEntropy, Peer: nb.id})
		n.sendSummary(nb)
	}
}

// adjacencyUp starts the database exchange: both sides send a summary and
// request what the other's lists newer; the link enters the LSA once that
// is done (advance).
func (n *Node) adjacencyUp(nb *neighbor) {
	nb.mismatches = 0
	nb.advertised, nb.upAt, nb.gotSummary, nb.pending = false, n.now, false, nil
	nb.peerSeqAtUp = 0
	if e := n.lsdb[Key{KindRouter, nb.id}]; e != nil {
		nb.peerSeqAtUp = e.seq
	}
	n.events = append(n.events, Event{Type: EventAdjacencyUp, Peer: nb.id, Cost: nb.cost})
	n.sendSummary(nb)
}

func (n *Node) adjacencyDown(nb *neighbor, why DownReason) {
	nb.mismatches = 0
	nb.suspect = false
	if nb.advertised {
		n.lsaDirty = true
	}
	nb.advertised, nb.gotSummary, nb.pending = false, false, nil
	n.events = append(n.events, Event{Type: EventAdjacencyDown, Peer: nb.id, Reason: why})
}

// advance puts full neighbours whose database exchange is done into the
// LSA. Done means: the neighbour's summary arrived, every entry requested
// from it is here at the requested sequence number or later, and peerReady.
// An exchange still open after DeadInterval (a neighbour that never sends
// a summary, or an entry that expired before it was sent) is taken as
// done, with EventLoadTimeout: the link is then advertised as it was
// before this phase existed, rather than never.
func (n *Node) advance() {
	for _, id := range n.nbrIDs {
		nb := n.nbrs[id]
		if nb.state != StateFull || nb.advertised {
			continue
		}
		for k, seq := range nb.pending {
			if e := n.lsdb[k]; e != nil && e.seq >= seq {
				delete(nb.pending, k)
			}
		}
		done := nb.gotSummary && len(nb.pending) == 0 && n.peerReady(nb)
		timedOut := !done && n.now-nb.upAt >= n.cfg.DeadInterval
		if !done && !timedOut {
			continue
		}
		if timedOut {
			n.events = append(n.events, Event{Type: EventLoadTimeout, Peer: nb.id, Seq: uint64(len(nb.pending))})
		}
		nb.advertised, nb.pending, n.lsaDirty = true, nil, true
		n.events = append(n.events, Event{Type: EventAdjacencyAdvertised, Peer: nb.id, Cost: nb.cost})
	}
}

// peerReady reports whether the neighbour's LSA we hold can be trusted to
// say whether it has routes: it does not list us, or it came after the
// adjacency did. An LSA from before that lists us is stale — the
// neighbour's previous incarnation, or its view before the link broke —
// and with it our own advertisement would complete the two-way link at
// once, while the neighbour, restarted with an empty database, would drop
// what it is sent. The neighbour's next LSA (its sequence jump after a
// restart, or its reply to our older copy in the exchange) supersedes it.
func (n *Node) peerReady(nb *neighbor) bool {
	e := n.lsdb[Key{KindRouter, nb.id}]
	if e == nil || e.seq > nb.peerSeqAtUp {
		return true
	}
	_, listed := slices.BinarySearchFunc(e.lsa.Links, n.cfg.ID, func(l Link, id uint32) int { return cmp.Compare(l.Neighbor, id) })
	return !listed
}

func (n *Node) neighborDead(nb *neighbor) {
	prev := nb.state
	nb.state = StateDown
	nb.echoPending = false
	if prev == StateFull {
		n.adjacencyDown(nb, DownDead)
	}
}

// rttSample folds a sample into the smoothed RTT (Kim10 §2.1: EWMA with
// weight EWMAWeight on the new sample) and, in CostRTT mode, re-advertises
// the link's cost when it moved past the hysteresis threshold.
func (n *Node) rttSample(nb *neighbor, rtt time.Duration) {
	nb.srtt = ewma(nb.srtt, rtt, n.cfg.EWMAWeight, nb.samples == 0)
	nb.samples++
	if n.cfg.CostMode != CostRTT {
		return
	}
	if n.budgetViolated(nb, rtt) {
		n.violation(nb, rtt)
		return
	}
	c := rttCost(nb.srtt, n.cfg.CostFloor)
	// The first sample replaces the LinkUp weight, which was a placeholder.
	// With CostInterval later changes wait for the periodic check.
	if nb.samples == 1 || n.cfg.CostInterval <= 0 && beyondThreshold(c, nb.cost, n.cfg.CostThreshold) {
		n.setCost(nb, c)
	}
}

func (n *Node) setCost(nb *neighbor, c uint32) {
	if c == nb.cost {
		return
	}
	n.events = append(n.events, Event{Type: EventCostChanged, Peer: nb.id, OldCost: nb.cost, Cost: c, RTT: nb.srtt})
	nb.cost = c
	if nb.advertised {
		n.lsaDirty = true
	}
}

// ewma returns the smoothed value after a sample; the first sample is
// taken as is, since there is nothing to smooth it with.
func ewma(avg, sample time.Duration, w float64, first bool) time.Duration {
	if first {
		return sample
	}
	return time.Duration(math.Round((1-w)*float64(avg) + w*float64(sample)))
}

// rttCost converts a smoothed RTT to a link cost in microseconds, no lower
// than floor and saturating at the largest cost.
func rttCost(srtt time.Duration, floor uint32) uint32 {
	us := srtt.Microseconds()
	switch {
	case us < int64(floor):
		return floor
	case us > math.MaxUint32:
		return math.MaxUint32
	}
	return uint32(us)
}

// beyondThreshold reports whether measured differs from advertised by more
// than the fraction threshold of advertised (Kim10 §2.1's 20%).
func beyondThreshold(measured, advertised uint32, threshold float64) bool {
	d := math.Abs(float64(measured) - float64(advertised))
	return d > threshold*float64(advertised)
}
