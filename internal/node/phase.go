package node

// Phase is where a node stands in leaving the mesh (docs/design.md §10).
// Stop starts the drain; the node's own clock ticks and inputs move it on,
// whoever drives it, so that production and the virtual-time harness run
// the same drain.
type Phase uint8

const (
	// Running: the node serves.
	Running Phase = iota
	// Moving: Stop was called. Subscribers are told to move to other
	// brokers, new subscriptions are refused and publishers hand over
	// (Draining is closed). It lasts until no subscription is left, or
	// half of DrainTimeout.
	Moving
	// Rerouting: the subscriptions still open have ended and the node has
	// withdrawn from the mesh. Its neighbours reroute around it while the
	// bundles on their way still arrive and are forwarded; the driver
	// stops dialling. It lasts until every neighbour has said it sends
	// nothing more (Link.PeerFinished), or RerouteGrace.
	Rerouting
	// Stopped: the driver sends on any bounced bundles still held, drains
	// the links and closes them, by DrainDeadline.
	Stopped
)

func (p Phase) String() string {
	switch p {
	case Running:
		return "running"
	case Moving:
		return "moving"
	case Rerouting:
		return "rerouting"
	case Stopped:
		return "stopped"
	}
	return "unknown"
}
