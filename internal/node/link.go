package node

import (
	"time"

	"github.com/dripmesh/drip/internal/linkstate"
	"github.com/dripmesh/drip/internal/qos"
)

// Link is what a Node sends through: an established link to a neighbour,
// the whole of what the node asks of it. transport.Link implements it;
// virtual-time harnesses pass the same.
type Link interface {
	Peer() uint32
	Name() string
	// SendControl queues a link-state message; control is never dropped.
	// The link encodes it, a predicate advertisement as a delta against
	// the last one of its origin it carried where both ends take deltas.
	SendControl(linkstate.Message) error
	// PushBundle queues a bundle in its wire form and reports whether it
	// was queued; the link counts what it refuses.
	PushBundle(b []byte) bool
	// PushUrgent is PushBundle for a bundle with a deadline: it leaves as
	// its urgency says, and its budget is set as it leaves.
	PushUrgent(b []byte, u qos.Urgency) bool
	// Now reads the link's clock, in nanoseconds, the clock of qos.Urgency
	// and LastReceived; links' clocks may differ from the node's.
	Now() int64
	// SetOneWay tells the link the neighbour's one-way delay, which the
	// budgets of leaving bundles are reduced by.
	SetOneWay(time.Duration)
	// LastReceived is when the last frame from the neighbour arrived, on
	// the link's clock (0: none yet).
	LastReceived() int64
	// Down reports whether the link takes no more bundles: it has ended,
	// or is draining because a newer link replaced it.
	Down() bool
	// Finish says the node will queue nothing more on the link; once what
	// is queued has left, the neighbour is told so.
	Finish()
	Finishing() bool
	// PeerFinished reports whether the neighbour has said it sends nothing
	// more on the link, or the link has ended.
	PeerFinished() bool
	// Close ends the link at once.
	Close(reason error)
	// Recent returns the bundles the link took to send at or after since,
	// on its clock, as far back as it keeps them, oldest first: what it may
	// have lost if it has failed silently (replay.go).
	Recent(since int64) [][]byte
	// Congested reports whether the link's queue is filling: past the
	// bytes from which the bundles queued on it are marked (congestion
	// experienced); never when marking is off.
	Congested() bool
	// Unsent hands each bundle that was still queued when the link
	// ended, never sent, to resend once, and counts those it refuses as
	// dropped; it returns how many were dropped.
	Unsent(resend func(raw []byte) bool) int
}

// Peer is a configured neighbour: the broker dials it, and joins the mesh
// once linked to every one (Node.Joined).
type Peer struct {
	ID   uint32
	Addr string // host:port of the neighbour's peer listener
	// Weight is the configured link cost, used when the link-state
	// protocol runs with configured weights (the default).
	Weight uint32
}
