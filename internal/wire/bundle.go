package wire

import (
	"fmt"
	"math"
	"math/bits"

	"github.com/bits-and-blooms/bitset"

	dripv1 "github.com/dripmesh/drip/api/proto/drip/v1"
	"github.com/dripmesh/drip/internal/dedup"
	"github.com/dripmesh/drip/internal/drp"
)

// Bundle is a received bundle <D, m> (Carzaniga09 §2.2) with its header
// decoded and checked; the message stays in its wire form, which transit
// brokers pass on without decoding.
type Bundle struct {
	drp.Bundle
	Stamp       dedup.Stamp
	PublishedAt int64 // Unix nanoseconds, on the ingress broker's clock
	Hops        uint32
	Message     []byte
}

// NewBundle builds the wire form of one forwarding decision. It shares
// b.Dest's words: the caller must not change the set afterwards (each
// drp.Forward owns its set).
func NewBundle(b drp.Bundle, s dedup.Stamp, publishedAt int64, hops uint32, msg []byte) *dripv1.Bundle {
	return &dripv1.Bundle{
		Source:            b.Source,
		Destinations:      b.Dest.Words(),
		HopsLeft:          uint32(b.HopsLeft),
		Broadcast:         b.Broadcast,
		Message:           msg,
		PublishedUnixNano: publishedAt,
		Hops:              hops,
		Epoch:             s.Epoch,
		Seq:               s.Seq,
	}
}

// BundleFromProto checks a bundle a neighbour sent. maxRouter is the
// largest router ID the mesh admits: the source and every destination must
// be at most it, so a peer cannot make this broker hold per-message state
// sized by an arbitrary ID. Destinations share b's words.
func BundleFromProto(b *dripv1.Bundle, maxRouter uint32) (Bundle, error) {
	if b.GetSource() > maxRouter {
		return Bundle{}, fmt.Errorf("bundle from router %d: source beyond the largest router ID %d", b.GetSource(), maxRouter)
	}
	words := b.GetDestinations()
	if limit := int(maxRouter/64) + 1; len(words) > limit {
		return Bundle{}, fmt.Errorf("bundle from router %d: %d destination words, more than the %d that router IDs up to %d need",
			b.GetSource(), len(words), limit, maxRouter)
	}
	dest := bitset.From(words)
	if top, ok := lastSet(dest); ok && top > uint(maxRouter) {
		return Bundle{}, fmt.Errorf("bundle from router %d: destination %d beyond the largest router ID %d", b.GetSource(), top, maxRouter)
	}
	if b.GetHopsLeft() > math.MaxUint8 {
		return Bundle{}, fmt.Errorf("bundle from router %d: hops left %d, at most %d", b.GetSource(), b.GetHopsLeft(), math.MaxUint8)
	}
	if len(b.GetMessage()) == 0 {
		return Bundle{}, fmt.Errorf("bundle from router %d: no message", b.GetSource())
	}
	return Bundle{
		Bundle:      drp.Bundle{Source: b.GetSource(), Dest: dest, HopsLeft: uint8(b.GetHopsLeft()), Broadcast: b.GetBroadcast()},
		Stamp:       dedup.Stamp{Origin: b.GetSource(), Epoch: b.GetEpoch(), Seq: b.GetSeq()},
		PublishedAt: b.GetPublishedUnixNano(),
		Hops:        b.GetHops(),
		Message:     b.GetMessage(),
	}, nil
}

func lastSet(s *bitset.BitSet) (uint, bool) {
	w := s.Words()
	for i := len(w) - 1; i >= 0; i-- {
		if w[i] != 0 {
			return uint(i)*64 + uint(63-bits.LeadingZeros64(w[i])), true
		}
	}
	return 0, false
}
