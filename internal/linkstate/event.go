package linkstate

import (
	"fmt"
	"time"
)

// EventType says what an Event reports.
type EventType uint8

const (
	// EventAdjacencyUp: hellos flow both ways with Peer; Cost is the cost
	// the link is advertised with.
	EventAdjacencyUp EventType = iota + 1
	// EventAdjacencyDown: the adjacency with Peer dropped for Reason.
	EventAdjacencyDown
	// EventCostChanged: the advertised cost of the link to Peer went from
	// OldCost to Cost; RTT is the smoothed RTT at the time.
	EventCostChanged
	// EventSPF: SPF ran; Routers are reachable, this one included.
	EventSPF
	// EventSeqJump: the mesh remembered an own entry of Kind from an
	// earlier incarnation, and the router re-originated it with Seq.
	EventSeqJump
	// EventExpired: the entry of Kind from Peer reached MaxAge unrefreshed
	// and was dropped.
	EventExpired
	// EventAntiEntropy: LSDB digests with Peer kept differing, and a
	// database exchange started.
	EventAntiEntropy
	// EventVersionMismatch: Peer speaks protocol version Seq, so its
	// hellos are ignored.
	EventVersionMismatch
	// EventParamsMismatch: the predicate advertisement Seq of Peer uses
	// other Bloom parameters and is left out of the PREDICATES table.
	EventParamsMismatch
	// EventAdjacencyAdvertised: the database exchange with Peer is done
	// and the link enters the router's LSA with Cost.
	EventAdjacencyAdvertised
	// EventLoadTimeout: the database exchange with Peer did not finish
	// within DeadInterval (Seq entries still awaited); the link is
	// advertised anyway.
	EventLoadTimeout
	// EventBudgetViolation: an RTT sample of the link to Peer broke the
	// link's delay Budget (budget.go), and its cost went from OldCost to
	// Cost at once; RTT is the sample.
	EventBudgetViolation
	// EventSeqFlush: an own entry of Kind reached MaxSeq (a forged or
	// corrupt copy carried it); the router flushed it from the mesh and
	// started its sequence again at 1.
	EventSeqFlush
	// EventSealFailed: Config.Auth could not sign the own entry of Kind
	// with Seq; it went out unsigned and neighbours will refuse it.
	EventSealFailed
	// EventLinkSuspect: nothing arrived from Peer for RTT, a few of its
	// keepalives (Config.SuspectMultiplier); its link left the LSA.
	EventLinkSuspect
	// EventLinkRestored: Peer was heard again RTT after its link became
	// suspect, before the adjacency died; the link is back in the LSA.
	EventLinkRestored
)

var eventNames = [...]string{
	EventAdjacencyUp:     "adjacency_up",
	EventAdjacencyDown:   "adjacency_down",
	EventCostChanged:     "cost_changed",
	EventSPF:             "spf",
	EventSeqJump:         "seq_jump",
	EventExpired:         "expired",
	EventAntiEntropy:     "anti_entropy",
	EventVersionMismatch: "version_mismatch",
	EventParamsMismatch:  "params_mismatch",

	EventAdjacencyAdvertised: "adjacency_advertised",
	EventLoadTimeout:         "load_timeout",
	EventBudgetViolation:     "budget_violation",
	EventSeqFlush:            "seq_flush",
	EventSealFailed:          "seal_failed",
	EventLinkSuspect:         "link_suspect",
	EventLinkRestored:        "link_restored",
}

// String returns a snake_case name usable as a metric label.
func (t EventType) String() string {
	if int(t) < len(eventNames) && eventNames[t] != "" {
		return eventNames[t]
	}
	return fmt.Sprintf("event_%d", uint8(t))
}

// DownReason says why an adjacency dropped.
type DownReason uint8

const (
	// DownDead: no hello within DeadInterval.
	DownDead DownReason = iota + 1
	// DownLink: the driver reported the link down.
	DownLink
	// DownPeerReset: the neighbour's hellos say it no longer hears us, as
	// after it restarted.
	DownPeerReset
	// DownShutdown: this router shut down.
	DownShutdown
)

// String returns a snake_case name usable as a metric label.
func (r DownReason) String() string {
	switch r {
	case DownDead:
		return "dead"
	case DownLink:
		return "link_down"
	case DownPeerReset:
		return "peer_reset"
	case DownShutdown:
		return "shutdown"
	}
	return fmt.Sprintf("reason_%d", uint8(r))
}

// Event reports something a driver may log or count. Which fields are set
// depends on Type.
type Event struct {
	Type    EventType
	Peer    uint32
	Reason  DownReason
	Kind    Kind
	Seq     uint64
	OldCost uint32
	Cost    uint32
	RTT     time.Duration
	Routers int
	Budget  time.Duration
}

// String formats the event for logs and test failures.
func (e Event) String() string {
	switch e.Type {
	case EventAdjacencyUp:
		return fmt.Sprintf("adjacency_up peer=%d cost=%d", e.Peer, e.Cost)
	case EventAdjacencyDown:
		return fmt.Sprintf("adjacency_down peer=%d reason=%s", e.Peer, e.Reason)
	case EventCostChanged:
		return fmt.Sprintf("cost_changed peer=%d cost=%d→%d rtt=%v", e.Peer, e.OldCost, e.Cost, e.RTT)
	case EventSPF:
		return fmt.Sprintf("spf routers=%d", e.Routers)
	case EventSeqJump:
		return fmt.Sprintf("seq_jump kind=%s seq=%d", e.Kind, e.Seq)
	case EventSeqFlush:
		return fmt.Sprintf("seq_flush kind=%s", e.Kind)
	case EventSealFailed:
		return fmt.Sprintf("seal_failed kind=%s seq=%d", e.Kind, e.Seq)
	case EventExpired:
		return fmt.Sprintf("expired origin=%d kind=%s seq=%d", e.Peer, e.Kind, e.Seq)
	case EventAntiEntropy:
		return fmt.Sprintf("anti_entropy peer=%d", e.Peer)
	case EventVersionMismatch:
		return fmt.Sprintf("version_mismatch peer=%d version=%d", e.Peer, e.Seq)
	case EventParamsMismatch:
		return fmt.Sprintf("params_mismatch origin=%d seq=%d", e.Peer, e.Seq)
	case EventAdjacencyAdvertised:
		return fmt.Sprintf("adjacency_advertised peer=%d cost=%d", e.Peer, e.Cost)
	case EventLoadTimeout:
		return fmt.Sprintf("load_timeout peer=%d awaited=%d", e.Peer, e.Seq)
	case EventLinkSuspect:
		return fmt.Sprintf("link_suspect peer=%d silence=%v", e.Peer, e.RTT)
	case EventLinkRestored:
		return fmt.Sprintf("link_restored peer=%d after=%v", e.Peer, e.RTT)
	case EventBudgetViolation:
		return fmt.Sprintf("budget_violation peer=%d cost=%d→%d rtt=%v budget=%v", e.Peer, e.OldCost, e.Cost, e.RTT, e.Budget)
	}
	return e.Type.String()
}
