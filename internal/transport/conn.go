package transport

import (
	"context"
	"errors"
	"fmt"

	dripv1 "github.com/dripmesh/drip/api/proto/drip/v1"
)

// ProtocolVersion is the peer protocol version carried in Open. Exchanged
// between brokers: bump it only for an incompatible change of peer.proto.
const ProtocolVersion = 1

// Conn is an established link to a neighbour, after the Open handshake.
// Frames travel in their wire form (the protobuf encoding of a
// drip.v1.Frame), which the link builds and parses itself. Send and Recv
// may be called from one goroutine each, concurrently.
type Conn interface {
	// Remote is the neighbour's Open.
	Remote() *dripv1.Open
	// Send writes a frame; it blocks under flow control and fails once the
	// link is closed. The frame's bytes must not change afterwards.
	Send(frame []byte) error
	// Recv reads the next frame, whose bytes the caller then owns; it
	// fails once the link is closed.
	Recv() ([]byte, error)
	// CloseSend says no more frames will be sent: the neighbour's Recv
	// returns io.EOF once it has read every frame sent before. It is how a
	// link ends without losing data in flight; call it from the goroutine
	// that calls Send, after the last Send.
	CloseSend() error
	// Close ends the link at once, discarding frames in flight; the reason
	// is reported by Err. Safe to call more than once and concurrently
	// with Send and Recv.
	Close(reason error)
	// Done is closed when the link has ended, from either side.
	Done() <-chan struct{}
	// Err is why the link ended, once Done is closed.
	Err() error
}

// Dialer opens links to neighbours by address.
type Dialer interface {
	// Dial connects to addr, performs the handshake with local as our
	// Open, and returns the link.
	Dial(ctx context.Context, addr string, local *dripv1.Open) (Conn, error)
}

// Handler receives each accepted link. The link stays up until Handler
// returns or the link fails, whichever comes first.
type Handler func(Conn)

// ErrClosed is the reason of a link closed without a more specific one.
var ErrClosed = errors.New("link closed")

// IncompatibleError says why two brokers may not link. It is reported to
// both sides and counted in metrics by Reason.
type IncompatibleError struct {
	Reason string // stable label: "version", "mesh", "bloom", "self", "open", "identity", or "refused" (the other side said no)
	Detail string
}

func (e *IncompatibleError) Error() string {
	return fmt.Sprintf("incompatible peer (%s): %s", e.Reason, e.Detail)
}

// Compatible checks the remote's Open against ours.
func Compatible(local, remote *dripv1.Open) error {
	// A mesh runs one Bloom scheme: brokers older than the field send
	// none and encode with cat-v1.
	scheme := func(o *dripv1.Open) string {
		if o.BloomScheme == "" {
			return "cat-v1"
		}
		return o.BloomScheme
	}
	switch {
	case remote == nil:
		return &IncompatibleError{Reason: "open", Detail: "first frame carries no Open"}
	case remote.ProtocolVersion != local.ProtocolVersion:
		return &IncompatibleError{Reason: "version", Detail: fmt.Sprintf("peer %q speaks protocol version %d, we speak %d", remote.RouterName, remote.ProtocolVersion, local.ProtocolVersion)}
	case remote.Mesh != local.Mesh:
		return &IncompatibleError{Reason: "mesh", Detail: fmt.Sprintf("peer %q belongs to mesh %q, we to %q", remote.RouterName, remote.Mesh, local.Mesh)}
	case scheme(remote) != scheme(local) || remote.BloomBits != local.BloomBits || remote.BloomHashes != local.BloomHashes:
		return &IncompatibleError{Reason: "bloom", Detail: fmt.Sprintf("peer %q encodes with %s M=%d K=%d, we with %s M=%d K=%d",
			remote.RouterName, scheme(remote), remote.BloomBits, remote.BloomHashes, scheme(local), local.BloomBits, local.BloomHashes)}
	case remote.RouterId == local.RouterId:
		return &IncompatibleError{Reason: "self", Detail: fmt.Sprintf("peer %q has our router ID %d", remote.RouterName, remote.RouterId)}
	}
	return nil
}
