package broker

import (
	"errors"
	"fmt"
	"time"

	"github.com/dripmesh/drip/internal/node"
	"github.com/dripmesh/drip/internal/transport"
)

// Peer is a configured neighbour that this broker dials.
type Peer = node.Peer

// Config is a broker's configuration: its Node's (embedded, so that its
// fields read as the broker's) and how the broker keeps its links.
// DefaultConfig fills every field but the identity and peers.
type Config struct {
	node.Config

	// LinkQueueBytes bounds the data queued per link; beyond it bundles
	// wait for room as SlowLinks says, or are dropped and counted (reason
	// queue_full).
	LinkQueueBytes int
	// LinkReplayBytes is how much of what each link sent last it keeps,
	// to send again around it if it turns out to have failed silently
	// (node's replay.go); 0 keeps nothing. It needs to cover a link's
	// traffic over the silence that makes it suspect and a round trip.
	LinkReplayBytes int
	// LinkMarkBytes, if positive, is the data queued on a link from which
	// the bundles queued on it are marked (congestion experienced, carried
	// to their deliveries): subscriptions with congestion control take a
	// mark as a loss event, so that their flows settle below the queue's
	// capacity instead of where it overflows (docs/design.md §12,
	// "Marks"). 0: no marks.
	LinkMarkBytes int
	// SlowLinks says what a full link queue does: while the link's writer
	// keeps sending, the publishers and upstream brokers that feed it wait
	// up to Behind for room; a link whose send has stalled for Stalled
	// drops (transport.Backpressure). Behind 0 always drops.
	SlowLinks SlowLinks
	// PeerCompression compresses the frames sent to neighbours that accept
	// it (one DEFLATE stream per link direction, see drip.v1.Frame), and
	// offers neighbours to do the same. On the seed's workload it cuts the
	// bytes on the links by 2–3× for about 20 µs of CPU per frame at each
	// end: a gain wherever links, not CPUs, are the bottleneck.
	PeerCompression bool
	// PeerPredicateDeltas sends predicate advertisements to neighbours that
	// accept them as deltas against the last one of the same origin sent on
	// the link, and offers neighbours to do the same (docs/design.md §2,
	// "Advertisements travel as deltas"). A subscription then costs the
	// mesh its own filters instead of its broker's whole predicate.
	PeerPredicateDeltas bool
	// PeerNotSentLowat bounds the bytes each peer connection, dialled or
	// accepted, keeps unsent in the kernel (TCP_NOTSENT_LOWAT; 0: the
	// host's default, which lets autotuning grow it to megabytes). Bounded,
	// a slow link's backlog waits in the link queue, where control frames
	// go first and a full queue drops or pushes back, instead of seconds
	// of it in the socket (docs/design.md §4). gRPC's own buffers, about
	// 100 KiB per link, stay below the queue either way.
	PeerNotSentLowat int
	// MaxFrameBytes bounds the bundles batched in one frame, which bounds
	// how long control traffic can wait behind data on a slow link.
	MaxFrameBytes int
	// DialBackoffMin and DialBackoffMax bound the exponential backoff
	// between dial attempts to a neighbour.
	DialBackoffMin, DialBackoffMax time.Duration
	// DialTimeout bounds one dial including the handshake.
	DialTimeout time.Duration
}

// SlowLinks is what a broker does when a link's queue is full: see
// transport.Backpressure.
type SlowLinks struct {
	Stalled time.Duration
	Behind  time.Duration
}

// DefaultConfig returns a configuration for broker id with sane defaults:
// node.DefaultConfig's, and 4 MiB per link queue.
func DefaultConfig(id uint32, name string) Config {
	return Config{
		Config:              node.DefaultConfig(id, name),
		LinkQueueBytes:      4 << 20,
		LinkReplayBytes:     128 << 10,
		MaxFrameBytes:       64 << 10,
		PeerCompression:     true,
		PeerPredicateDeltas: true,
		PeerNotSentLowat:    transport.DefaultNotSentLowat,
		DialBackoffMin:      100 * time.Millisecond,
		DialBackoffMax:      5 * time.Second,
		DialTimeout:         5 * time.Second,
		// A WAN link may take a round trip or two to reopen its flow-control
		// window, so its stall is a second; waiting stays well inside the
		// routing protocol's dead interval, since a link reader that waits
		// holds back the hellos behind its frame.
		SlowLinks: SlowLinks{Stalled: time.Second, Behind: time.Second},
	}
}

// Validate reports every problem of c at once.
func (c Config) Validate() error {
	errs := []error{c.Config.Validate()}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"dial backoff min", c.DialBackoffMin}, {"dial timeout", c.DialTimeout}} {
		if d.v <= 0 {
			errs = append(errs, fmt.Errorf("%s must be positive, got %v", d.name, d.v))
		}
	}
	for _, p := range []struct {
		name string
		v    int
	}{{"link queue bytes", c.LinkQueueBytes}, {"max frame bytes", c.MaxFrameBytes}} {
		if p.v <= 0 {
			errs = append(errs, fmt.Errorf("%s must be positive, got %d", p.name, p.v))
		}
	}
	if c.LinkMarkBytes < 0 || c.LinkMarkBytes > c.LinkQueueBytes {
		errs = append(errs, fmt.Errorf("link mark bytes must lie between 0 (no marks) and the link queue's %d, got %d", c.LinkQueueBytes, c.LinkMarkBytes))
	}
	if c.LinkReplayBytes < 0 {
		errs = append(errs, fmt.Errorf("link replay bytes must not be negative (0: none), got %d", c.LinkReplayBytes))
	}
	if c.SlowLinks.Stalled <= 0 || c.SlowLinks.Behind < 0 {
		errs = append(errs, fmt.Errorf("slow links: stalled %v must be positive, behind %v not negative",
			c.SlowLinks.Stalled, c.SlowLinks.Behind))
	}
	if err := transport.CheckNotSentLowat(c.PeerNotSentLowat); err != nil {
		errs = append(errs, fmt.Errorf("peer connections: %w", err))
	}
	if c.DialBackoffMax < c.DialBackoffMin {
		errs = append(errs, fmt.Errorf("dial backoff max %v is below min %v", c.DialBackoffMax, c.DialBackoffMin))
	}
	return errors.Join(errs...)
}
