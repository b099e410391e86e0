package wire

import (
	"fmt"
	"math"
	"math/bits"

	"github.com/bits-and-blooms/bitset"
	"google.golang.org/protobuf/encoding/protowire"

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
	QoS         BundleQoS
}

// BundleQoS is what a bundle carries for deadlines and two-path delivery
// (Kim10 §2.2–2.3, docs/design.md §11).
type BundleQoS struct {
	// Deadline is the tightest delivery deadline among the bundle's
	// destinations, from the message's acceptance at its ingress; 0: none.
	Deadline int64
	// Budget is the time left until Deadline at the receiver, as the
	// sender estimated it (nanoseconds; negative once passed). Valid only
	// with a Deadline.
	Budget int64
	// Path is PathFirst or PathSecond for the copies of a two-path
	// message, else 0.
	Path uint32
	// Marked says a broker on the way queued the bundle on a link whose
	// queue was filling (congestion experienced).
	Marked bool
}

// Bundle.path values: the copies of a message sent on two paths.
const (
	// PathFirst marks the copy on the shortest-path tree.
	PathFirst = 1
	// PathSecond marks the copy on the second path.
	PathSecond = 2
)

func lastSet(s *bitset.BitSet) (uint, bool) {
	w := s.Words()
	for i := len(w) - 1; i >= 0; i-- {
		if w[i] != 0 {
			return uint(i)*64 + uint(63-bits.LeadingZeros64(w[i])), true
		}
	}
	return 0, false
}

// Field numbers of drip.v1.Bundle: exchanged between brokers,
// never renumbered.
const (
	fieldBundleSource      = 1
	fieldBundleDest        = 2 // repeated fixed64, packed
	fieldBundleHopsLeft    = 3
	fieldBundleBroadcast   = 4
	fieldBundleMessage     = 5
	fieldBundlePublishedAt = 6
	fieldBundleHops        = 7
	fieldBundleEpoch       = 8
	fieldBundleSeq         = 9
	fieldBundleDestDeltas  = 10 // repeated uint32, packed: ascending IDs as differences
	fieldBundleDeadline    = 30
	fieldBundleBudget      = 31 // sfixed64, written last (BudgetSize)
	fieldBundlePath        = 32
	fieldBundleMarked      = 33
)

// AppendBundle appends the wire form (a drip.v1.Bundle) of one forwarding
// decision, for link queues that hold bundles encoded.
func AppendBundle(dst []byte, b drp.Bundle, s dedup.Stamp, publishedAt int64, hops uint32, msg []byte) []byte {
	return AppendBundleQoS(dst, b, s, publishedAt, hops, msg, BundleQoS{})
}

// BudgetSize is the size of the budget field AppendBundleQoS writes last
// in a bundle with a deadline: SetBudget rewrites it in place.
const BudgetSize = 8

// SetBudget sets the budget of a bundle AppendBundleQoS encoded with a
// deadline, in place: a link queue sets it as the bundle leaves, so that
// the receiver learns the time left then, queueing included.
func SetBudget(bundle []byte, budget int64) {
	protowire.AppendFixed64(bundle[len(bundle)-BudgetSize:len(bundle)-BudgetSize], uint64(budget))
}

// AppendBundleQoS is AppendBundle for a bundle with a deadline or on a
// second path. With a deadline the budget is the last field, at the fixed
// width BudgetSize, so that SetBudget can set it later.
func AppendBundleQoS(dst []byte, b drp.Bundle, s dedup.Stamp, publishedAt int64, hops uint32, msg []byte, q BundleQoS) []byte {
	if b.Source != 0 {
		dst = protowire.AppendTag(dst, fieldBundleSource, protowire.VarintType)
		dst = protowire.AppendVarint(dst, uint64(b.Source))
	}
	if words := b.Dest.Words(); len(words) > sparseMinWords {
		dst = appendDest(dst, words)
	} else if len(words) > 0 {
		dst = appendDenseDest(dst, words)
	}
	if b.HopsLeft != 0 {
		dst = protowire.AppendTag(dst, fieldBundleHopsLeft, protowire.VarintType)
		dst = protowire.AppendVarint(dst, uint64(b.HopsLeft))
	}
	if b.Broadcast {
		dst = protowire.AppendTag(dst, fieldBundleBroadcast, protowire.VarintType)
		dst = protowire.AppendVarint(dst, 1)
	}
	if len(msg) > 0 {
		dst = protowire.AppendTag(dst, fieldBundleMessage, protowire.BytesType)
		dst = protowire.AppendBytes(dst, msg)
	}
	if publishedAt != 0 {
		dst = protowire.AppendTag(dst, fieldBundlePublishedAt, protowire.VarintType)
		dst = protowire.AppendVarint(dst, uint64(publishedAt))
	}
	if hops != 0 {
		dst = protowire.AppendTag(dst, fieldBundleHops, protowire.VarintType)
		dst = protowire.AppendVarint(dst, uint64(hops))
	}
	if s.Epoch != 0 {
		dst = protowire.AppendTag(dst, fieldBundleEpoch, protowire.Fixed64Type)
		dst = protowire.AppendFixed64(dst, s.Epoch)
	}
	if s.Seq != 0 {
		dst = protowire.AppendTag(dst, fieldBundleSeq, protowire.VarintType)
		dst = protowire.AppendVarint(dst, s.Seq)
	}
	if q.Path != 0 {
		dst = protowire.AppendTag(dst, fieldBundlePath, protowire.VarintType)
		dst = protowire.AppendVarint(dst, uint64(q.Path))
	}
	if q.Marked {
		dst = protowire.AppendTag(dst, fieldBundleMarked, protowire.VarintType)
		dst = protowire.AppendVarint(dst, 1)
	}
	if q.Deadline != 0 {
		dst = protowire.AppendTag(dst, fieldBundleDeadline, protowire.VarintType)
		dst = protowire.AppendVarint(dst, uint64(q.Deadline))
		dst = protowire.AppendTag(dst, fieldBundleBudget, protowire.Fixed64Type)
		dst = protowire.AppendFixed64(dst, uint64(q.Budget))
	}
	return dst
}

// sparseMinWords is the largest bitset always written as one: at most
// 32 bytes, for router IDs below 256, which the list of destinations
// would rarely beat.
const sparseMinWords = 4

// appendDest appends a destination set of more than sparseMinWords words
// as the shorter of its two forms: the bitset, whose size follows the
// largest router ID, or the list of IDs (destination_deltas), whose size
// follows the number of destinations.
func appendDest(dst []byte, words []uint64) []byte {
	if n := deltasSize(words); n < 8*len(words) {
		dst = protowire.AppendTag(dst, fieldBundleDestDeltas, protowire.BytesType)
		dst = protowire.AppendVarint(dst, uint64(n))
		prev := uint64(0)
		for wi, w := range words {
			for w != 0 {
				id := uint64(wi)<<6 + uint64(bits.TrailingZeros64(w))
				w &= w - 1
				dst = protowire.AppendVarint(dst, id-prev)
				prev = id
			}
		}
		return dst
	}
	return appendDenseDest(dst, words)
}

func appendDenseDest(dst []byte, words []uint64) []byte {
	dst = protowire.AppendTag(dst, fieldBundleDest, protowire.BytesType)
	dst = protowire.AppendVarint(dst, uint64(8*len(words)))
	for _, w := range words {
		dst = protowire.AppendFixed64(dst, w)
	}
	return dst
}

// deltasSize is the size of the list form of a destination set.
func deltasSize(words []uint64) int {
	n, prev := 0, uint64(0)
	for wi, w := range words {
		for w != 0 {
			id := uint64(wi)<<6 + uint64(bits.TrailingZeros64(w))
			w &= w - 1
			n += protowire.SizeVarint(id - prev)
			prev = id
		}
	}
	return n
}

// BundleSizeBound is a size no larger than AppendBundle's output for a
// message of msgLen bytes and destination words, for preallocating; it
// allows for the QoS fields.
func BundleSizeBound(msgLen, words int) int { return msgLen + 9*words + 96 }

// ParseBundle decodes and checks a bundle a neighbour sent, without
// protobuf objects: the message aliases b, and the destinations are
// decoded into dest, whose words are reused (a bundle's set is only read).
// words is scratch space, returned for reuse. maxRouter is the largest
// router ID the mesh admits: the source and every destination must be at
// most it, so a peer cannot make this broker hold per-message state sized
// by an arbitrary ID.
func ParseBundle(b []byte, maxRouter uint32, dest *bitset.BitSet, words []uint64) (Bundle, []uint64, error) {
	var out Bundle
	var hopsLeft uint64
	var errDeltas error
	var deltas deltaState
	words = words[:0]
	for len(b) > 0 {
		num, typ, n := ConsumeTag(b)
		if n < 0 {
			return out, words, ErrTruncated
		}
		b = b[n:]
		var v uint64
		switch {
		case num == fieldBundleDest && typ == protowire.BytesType:
			packed, n := protowire.ConsumeBytes(b)
			if n < 0 || len(packed)%8 != 0 {
				return out, words, ErrTruncated
			}
			b = b[n:]
			for len(packed) > 0 {
				w, _ := protowire.ConsumeFixed64(packed)
				words = append(words, w)
				packed = packed[8:]
			}
			continue
		case num == fieldBundleDest && typ == protowire.Fixed64Type:
			w, n := protowire.ConsumeFixed64(b)
			if n < 0 {
				return out, words, ErrTruncated
			}
			b, words = b[n:], append(words, w)
			continue
		case num == fieldBundleDestDeltas && typ == protowire.BytesType:
			packed, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return out, words, ErrTruncated
			}
			b = b[n:]
			if errDeltas == nil {
				words, errDeltas = addDeltas(words, &deltas, packed, maxRouter)
			}
			continue
		case num == fieldBundleDestDeltas && typ == protowire.VarintType:
			d, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return out, words, ErrTruncated
			}
			b = b[n:]
			if errDeltas == nil {
				words, errDeltas = addDelta(words, &deltas, uint32(d), maxRouter)
			}
			continue
		case num == fieldBundleMessage && typ == protowire.BytesType:
			m, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return out, words, ErrTruncated
			}
			b, out.Message = b[n:], m
			continue
		case num == fieldBundleEpoch && typ == protowire.Fixed64Type:
			e, n := protowire.ConsumeFixed64(b)
			if n < 0 {
				return out, words, ErrTruncated
			}
			b, out.Stamp.Epoch = b[n:], e
			continue
		case num == fieldBundleBudget && typ == protowire.Fixed64Type:
			e, n := protowire.ConsumeFixed64(b)
			if n < 0 {
				return out, words, ErrTruncated
			}
			b, out.QoS.Budget = b[n:], int64(e)
			continue
		case typ == protowire.VarintType && (num >= fieldBundleSource && num <= fieldBundleSeq || num == fieldBundleDeadline || num == fieldBundlePath || num == fieldBundleMarked):
			x, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return out, words, ErrTruncated
			}
			b, v = b[n:], x
		default:
			n := protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return out, words, ErrTruncated
			}
			b = b[n:]
			continue
		}
		switch num {
		case fieldBundleSource:
			out.Source = uint32(v)
		case fieldBundleHopsLeft:
			hopsLeft = uint64(uint32(v))
		case fieldBundleBroadcast:
			out.Broadcast = v != 0
		case fieldBundlePublishedAt:
			out.PublishedAt = int64(v)
		case fieldBundleHops:
			out.Hops = uint32(v)
		case fieldBundleSeq:
			out.Stamp.Seq = v
		case fieldBundleDeadline:
			out.QoS.Deadline = int64(v)
		case fieldBundlePath:
			out.QoS.Path = uint32(v)
		case fieldBundleMarked:
			out.QoS.Marked = v != 0
		}
	}
	if out.Source > maxRouter {
		return out, words, fmt.Errorf("bundle from router %d: source beyond the largest router ID %d", out.Source, maxRouter)
	}
	if errDeltas != nil {
		return out, words, fmt.Errorf("bundle from router %d: %w", out.Source, errDeltas)
	}
	if limit := int(maxRouter/64) + 1; len(words) > limit {
		return out, words, fmt.Errorf("bundle from router %d: %d destination words, more than the %d that router IDs up to %d need",
			out.Source, len(words), limit, maxRouter)
	}
	dest.SetBitsetFrom(words)
	if top, ok := lastSet(dest); ok && top > uint(maxRouter) {
		return out, words, fmt.Errorf("bundle from router %d: destination %d beyond the largest router ID %d", out.Source, top, maxRouter)
	}
	if hopsLeft > math.MaxUint8 {
		return out, words, fmt.Errorf("bundle from router %d: hops left %d, at most %d", out.Source, hopsLeft, math.MaxUint8)
	}
	if len(out.Message) == 0 {
		return out, words, fmt.Errorf("bundle from router %d: no message", out.Source)
	}
	if out.QoS.Deadline < 0 {
		return out, words, fmt.Errorf("bundle from router %d: negative deadline %d ns", out.Source, out.QoS.Deadline)
	}
	if p := out.QoS.Path; p > PathSecond {
		return out, words, fmt.Errorf("bundle from router %d: path %d, want 0, %d or %d", out.Source, p, PathFirst, PathSecond)
	}
	out.Bundle.Dest, out.HopsLeft = dest, uint8(hopsLeft)
	out.Stamp.Origin = out.Source
	return out, words, nil
}

// deltaState is where a bundle's destination_deltas stand: the last ID
// and whether there was one. Protobuf concatenates a repeated field's
// elements, packed or not, in order; so do the parsers.
type deltaState struct {
	id  uint64
	any bool
}

// addDelta sets in words the next destination of a destination_deltas
// field, d more than the last. Every ID must be at most maxRouter, which
// bounds the words a peer can make this broker hold, and above the last.
func addDelta(words []uint64, st *deltaState, d uint32, maxRouter uint32) ([]uint64, error) {
	if uint64(d) > uint64(maxRouter)-st.id || st.any && d == 0 {
		return words, fmt.Errorf("destinations not ascending router IDs up to the largest, %d", maxRouter)
	}
	st.id += uint64(d)
	st.any = true
	for uint64(len(words)) <= st.id>>6 {
		words = append(words, 0)
	}
	words[st.id>>6] |= 1 << (st.id & 63)
	return words, nil
}

// addDeltas is addDelta for each element of a packed field.
func addDeltas(words []uint64, st *deltaState, packed []byte, maxRouter uint32) ([]uint64, error) {
	for len(packed) > 0 {
		d, n := protowire.ConsumeVarint(packed)
		if n < 0 {
			return words, ErrTruncated
		}
		packed = packed[n:]
		var err error
		if words, err = addDelta(words, st, uint32(d), maxRouter); err != nil {
			return words, err
		}
	}
	return words, nil
}

// DenseDestinations returns a bundle AppendBundleQoS encoded with its
// destinations as the bitset, for a neighbour whose Open does not offer
// sparse destinations (a broker older than destination_deltas): b itself
// when it carries none, else a copy with the bitset where the list was,
// the other fields in their order (the budget still last).
func DenseDestinations(b []byte) []byte {
	var words []uint64
	var st deltaState
	at := -1 // where the list starts in b
	for rest := b; len(rest) > 0; {
		num, typ, n := protowire.ConsumeTag(rest)
		m := protowire.ConsumeFieldValue(num, typ, rest[max(n, 0):])
		if n < 0 || m < 0 {
			return b // not one of ours: as it is
		}
		if num == fieldBundleDestDeltas && typ == protowire.BytesType {
			if at < 0 {
				at = len(b) - len(rest)
			}
			packed, _ := protowire.ConsumeBytes(rest[n:])
			words, _ = addDeltas(words, &st, packed, math.MaxUint32)
		}
		rest = rest[n+m:]
	}
	if at < 0 {
		return b
	}
	out := appendDenseDest(append(make([]byte, 0, len(b)+8*len(words)), b[:at]...), words)
	for rest := b[at:]; len(rest) > 0; {
		num, typ, n := protowire.ConsumeTag(rest)
		m := protowire.ConsumeFieldValue(num, typ, rest[n:])
		if num != fieldBundleDestDeltas || typ != protowire.BytesType {
			out = append(out, rest[:n+m]...)
		}
		rest = rest[n+m:]
	}
	return out
}
