package transport

import (
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	dripv1 "github.com/dripmesh/drip/api/proto/drip/v1"
	"github.com/dripmesh/drip/internal/wire"
)

// Peer links carry frames in their wire form: a link's writer concatenates
// the control messages (protobuf-encoded; they are few) and the bundles
// (encoded once, when queued) of a drip.v1.Frame, and its reader parses
// them in place. The bytes are the protobuf encoding of the Frame, so a
// broker that decodes frames with protobuf reads them alike.

// Field numbers of drip.v1.Frame: exchanged between brokers, never
// renumbered.
const (
	fieldFrameOpen         = 1
	fieldFrameControl      = 2
	fieldFrameBundles      = 3
	fieldFrameDeflated     = 4
	fieldFrameInflatedSize = 5
	fieldFrameFinished     = 50
)

// AppendFrame appends the wire form of a Frame holding control and the
// encoded bundles.
func AppendFrame(dst []byte, control []*dripv1.Control, bundles [][]byte) ([]byte, error) {
	for _, c := range control {
		dst = protowire.AppendTag(dst, fieldFrameControl, protowire.BytesType)
		dst = protowire.AppendVarint(dst, uint64(proto.Size(c)))
		var err error
		if dst, err = (proto.MarshalOptions{}).MarshalAppend(dst, c); err != nil {
			return nil, fmt.Errorf("encoding a control message: %w", err)
		}
	}
	for _, b := range bundles {
		dst = protowire.AppendTag(dst, fieldFrameBundles, protowire.BytesType)
		dst = protowire.AppendBytes(dst, b)
	}
	return dst, nil
}

// FrameSize is the size AppendFrame needs for these bundles, and for
// control messages of controlSize bytes in all.
func FrameSize(controlSize int, bundles [][]byte) int {
	n := controlSize
	for _, b := range bundles {
		n += protowire.SizeTag(fieldFrameBundles) + protowire.SizeBytes(len(b))
	}
	return n
}

// ParsedFrame is a frame's contents: control messages decoded, bundles in
// their wire form (aliasing the frame's bytes).
type ParsedFrame struct {
	Open         bool // the frame carries an Open
	Control      []*dripv1.Control
	Bundles      [][]byte
	Deflated     []byte
	InflatedSize uint64
	// Finished: the sender queues nothing more on the link (the frame
	// comes after every bundle it will send there).
	Finished bool
	controls int
}

// Compressed says whether the frame carries a compressed frame. As for
// protobuf's decoder, an empty field is an absent one.
func (f *ParsedFrame) Compressed() bool { return len(f.Deflated) > 0 || f.InflatedSize > 0 }

// Plain says whether the frame carries an Open, control messages or
// bundles: the fields a compressed frame must not have besides its own.
func (f *ParsedFrame) Plain() bool {
	return f.Open || f.controls > 0 || len(f.Bundles) > 0 || f.Finished
}

// ParseFrame parses a frame in its wire form into f, reusing its slices.
func ParseFrame(b []byte, f *ParsedFrame) error { return parseFrame(b, f, true) }

// PeekFrame parses a frame like ParseFrame but leaves its control messages
// undecoded (f.Control stays empty; Plain counts them): enough to tell a
// compressed frame from a plain one, at the cost of a walk over the tags.
func PeekFrame(b []byte, f *ParsedFrame) error { return parseFrame(b, f, false) }

func parseFrame(b []byte, f *ParsedFrame, decodeControl bool) error {
	clear(f.Bundles)
	*f = ParsedFrame{Control: f.Control[:0], Bundles: f.Bundles[:0]}
	for len(b) > 0 {
		num, typ, n := wire.ConsumeTag(b)
		if n < 0 {
			return wire.ErrTruncated
		}
		b = b[n:]
		switch {
		case num == fieldFrameOpen && typ == protowire.BytesType:
			_, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return wire.ErrTruncated
			}
			b, f.Open = b[n:], true
		case num == fieldFrameControl && typ == protowire.BytesType:
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return wire.ErrTruncated
			}
			b = b[n:]
			if f.controls++; !decodeControl {
				continue
			}
			c := new(dripv1.Control)
			if err := proto.Unmarshal(v, c); err != nil {
				return fmt.Errorf("control message: %w", err)
			}
			f.Control = append(f.Control, c)
		case num == fieldFrameBundles && typ == protowire.BytesType:
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return wire.ErrTruncated
			}
			b, f.Bundles = b[n:], append(f.Bundles, v)
		case num == fieldFrameDeflated && typ == protowire.BytesType:
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return wire.ErrTruncated
			}
			b, f.Deflated = b[n:], v
		case num == fieldFrameInflatedSize && typ == protowire.VarintType:
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return wire.ErrTruncated
			}
			b, f.InflatedSize = b[n:], uint64(uint32(v))
		case num == fieldFrameFinished && typ == protowire.VarintType:
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return wire.ErrTruncated
			}
			b, f.Finished = b[n:], v != 0
		default:
			n := protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return wire.ErrTruncated
			}
			b = b[n:]
		}
	}
	return nil
}

// AppendFinishedFrame appends the wire form of a Frame that says its
// sender queues nothing more on the link.
func AppendFinishedFrame(dst []byte) []byte {
	dst = protowire.AppendTag(dst, fieldFrameFinished, protowire.VarintType)
	return protowire.AppendVarint(dst, 1)
}

// AppendCompressedFrame appends the wire form of a Frame carrying deflated
// bytes that inflate to inflatedSize bytes.
func AppendCompressedFrame(dst, deflated []byte, inflatedSize int) []byte {
	if len(deflated) > 0 {
		dst = protowire.AppendTag(dst, fieldFrameDeflated, protowire.BytesType)
		dst = protowire.AppendBytes(dst, deflated)
	}
	if inflatedSize != 0 {
		dst = protowire.AppendTag(dst, fieldFrameInflatedSize, protowire.VarintType)
		dst = protowire.AppendVarint(dst, uint64(inflatedSize))
	}
	return dst
}
