package wire

import (
	"fmt"
	"math"
	"time"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/dripmesh/drip/internal/congestion"
	"github.com/dripmesh/drip/internal/encoding"
)

// CongestionParams is the Bloom encoding of congestion control's filters
// and publication records (docs/design.md §12): small, because every
// message carries k of them, and fixed, because the publishing and the
// subscribing client must agree without asking a broker. With M = 512 a
// record entry is 64 bytes; a message of 20 categories sets about 15% of
// its bits, so a filter of three categories (12 bits) shows a loss that
// did not happen once in 10^10.
var CongestionParams = encoding.Params{Scheme: encoding.SchemeCatV2, M: 512, K: 4}

// CongestionTo is the attribute of a feedback message: the publisher's ID
// as a signed integer, which the publisher subscribes to.
const CongestionTo = "drip.cc.to"

// Bounds on a decoded header: a peer cannot make a subscriber hold more.
const (
	maxHeaderTags   = 64
	maxHeaderEchoes = 16
	maxHeaderStamps = 64
)

// Field numbers of drip.v1.CongestionHeader, Tag and Echo.
const (
	fieldCCPublisher = 1
	fieldCCSeq       = 2
	fieldCCSentAt    = 3
	fieldCCRate      = 4
	fieldCCRecord    = 5
	fieldCCTags      = 6
	fieldCCEchoes    = 7
	fieldCCStamps    = 8

	fieldTagSubscriber = 1
	fieldTagFilter     = 2
	fieldTagFeedback   = 3

	fieldEchoSubscriber = 1
	fieldEchoSentAt     = 2
	fieldEchoHeld       = 3

	fieldStampSubscriber = 1
	fieldStampSeq        = 2
)

// AppendCongestionHeader appends h's wire form (a drip.v1.CongestionHeader):
// by hand, because every message of a controlled publisher has one.
func AppendCongestionHeader(dst []byte, h *congestion.Header) []byte {
	dst = appendFixed64(dst, fieldCCPublisher, h.Publisher)
	dst = appendVarint(dst, fieldCCSeq, h.Seq)
	dst = appendVarint(dst, fieldCCSentAt, uint64(h.SentAt.UnixNano()))
	dst = appendFixed64(dst, fieldCCRate, math.Float64bits(h.Rate))
	n := CongestionParams.Bytes()
	for _, r := range h.Record {
		dst = protowire.AppendTag(dst, fieldCCRecord, protowire.BytesType)
		dst = protowire.AppendVarint(dst, uint64(n))
		dst = r.AppendBinary(dst, CongestionParams)
	}
	for _, t := range h.Tags {
		var body [32]byte
		m := appendTag(body[:0], t)
		dst = protowire.AppendTag(dst, fieldCCTags, protowire.BytesType)
		dst = protowire.AppendBytes(dst, m)
	}
	for _, e := range h.Echoes {
		var body [40]byte
		m := appendEcho(body[:0], e)
		dst = protowire.AppendTag(dst, fieldCCEchoes, protowire.BytesType)
		dst = protowire.AppendBytes(dst, m)
	}
	for _, st := range h.Stamps {
		var body [20]byte
		m := appendFixed64(body[:0], fieldStampSubscriber, st.Subscriber)
		m = appendVarint(m, fieldStampSeq, st.Seq)
		dst = protowire.AppendTag(dst, fieldCCStamps, protowire.BytesType)
		dst = protowire.AppendBytes(dst, m)
	}
	return dst
}

// appendTag and appendEcho write what protobuf writes: fields in order,
// zero values left out.
func appendTag(dst []byte, t congestion.Tag) []byte {
	dst = appendFixed64(dst, fieldTagSubscriber, t.Subscriber)
	dst = appendVarint(dst, fieldTagFilter, uint64(t.Filter))
	return appendVarint(dst, fieldTagFeedback, protowire.EncodeZigZag(int64(t.Feedback)))
}

func appendEcho(dst []byte, e congestion.EchoReply) []byte {
	dst = appendFixed64(dst, fieldEchoSubscriber, e.Subscriber)
	dst = appendVarint(dst, fieldEchoSentAt, uint64(e.SentAt.UnixNano()))
	return appendVarint(dst, fieldEchoHeld, uint64(e.Held))
}

func appendVarint(dst []byte, num protowire.Number, v uint64) []byte {
	if v == 0 {
		return dst
	}
	dst = protowire.AppendTag(dst, num, protowire.VarintType)
	return protowire.AppendVarint(dst, v)
}

func appendFixed64(dst []byte, num protowire.Number, v uint64) []byte {
	if v == 0 {
		return dst
	}
	dst = protowire.AppendTag(dst, num, protowire.Fixed64Type)
	return protowire.AppendFixed64(dst, v)
}

// DecodeCongestionHeader decodes a header into h, reusing its slices (a
// subscriber measures every message and keeps no header). It refuses what
// no publisher sends: a rate that is not a rate, a record entry of the
// wrong size, more record entries, tags, echoes or stamps than the bounds.
func DecodeCongestionHeader(b []byte, h *congestion.Header) error {
	*h = congestion.Header{Record: h.Record[:0], Tags: h.Tags[:0], Echoes: h.Echoes[:0], Stamps: h.Stamps[:0]}
	return fields(b, "congestion header", func(num protowire.Number, typ protowire.Type, b []byte) (int, error) {
		switch {
		case num == fieldCCPublisher && typ == protowire.Fixed64Type:
			v, k := protowire.ConsumeFixed64(b)
			h.Publisher = v
			return k, nil
		case num == fieldCCSeq && typ == protowire.VarintType:
			v, k := protowire.ConsumeVarint(b)
			h.Seq = v
			return k, nil
		case num == fieldCCSentAt && typ == protowire.VarintType:
			v, k := protowire.ConsumeVarint(b)
			h.SentAt = time.Unix(0, int64(v))
			return k, nil
		case num == fieldCCRate && typ == protowire.Fixed64Type:
			v, k := protowire.ConsumeFixed64(b)
			h.Rate = math.Float64frombits(v)
			if math.IsNaN(h.Rate) || math.IsInf(h.Rate, 0) || h.Rate < 0 {
				return k, fmt.Errorf("congestion header: publish rate %v is not a rate", h.Rate)
			}
			return k, nil
		case num == fieldCCRecord && typ == protowire.BytesType:
			v, k := protowire.ConsumeBytes(b)
			if len(h.Record) == congestion.MaxRecordSize {
				return k, fmt.Errorf("congestion header: more than %d record entries", congestion.MaxRecordSize)
			}
			if cap(h.Record) == 0 {
				h.Record = make([]encoding.Bloom, 0, 8) // k is 5 by default
			}
			bl, err := encoding.BloomFromBytes(v, CongestionParams)
			if err != nil {
				return k, fmt.Errorf("congestion header: record entry %d: %w", len(h.Record), err)
			}
			h.Record = append(h.Record, bl)
			return k, nil
		case num == fieldCCTags && typ == protowire.BytesType:
			v, k := protowire.ConsumeBytes(b)
			if len(h.Tags) == maxHeaderTags {
				return k, fmt.Errorf("congestion header: more than %d tags", maxHeaderTags)
			}
			var t congestion.Tag
			err := fields(v, "congestion header tag", func(num protowire.Number, typ protowire.Type, b []byte) (int, error) {
				return tagField(&t, num, typ, b), nil
			})
			h.Tags = append(h.Tags, t)
			return k, err
		case num == fieldCCEchoes && typ == protowire.BytesType:
			v, k := protowire.ConsumeBytes(b)
			if len(h.Echoes) == maxHeaderEchoes {
				return k, fmt.Errorf("congestion header: more than %d echoes", maxHeaderEchoes)
			}
			var e congestion.EchoReply
			err := fields(v, "congestion header echo", func(num protowire.Number, typ protowire.Type, b []byte) (int, error) {
				return echoField(&e, num, typ, b), nil
			})
			h.Echoes = append(h.Echoes, e)
			return k, err
		case num == fieldCCStamps && typ == protowire.BytesType:
			v, k := protowire.ConsumeBytes(b)
			if len(h.Stamps) == maxHeaderStamps {
				return k, fmt.Errorf("congestion header: more than %d stamps", maxHeaderStamps)
			}
			var st congestion.Stamp
			err := fields(v, "congestion header stamp", func(num protowire.Number, typ protowire.Type, b []byte) (int, error) {
				return stampField(&st, num, typ, b), nil
			})
			h.Stamps = append(h.Stamps, st)
			return k, err
		}
		return 0, nil
	})
}

// fields walks the wire form of one message, handing field each field's
// number and type and the bytes from its value on. field returns how many
// bytes the value took (negative: truncated), or 0 for a field it does not
// know, which is skipped; its error stops the walk.
func fields(b []byte, what string, field func(protowire.Number, protowire.Type, []byte) (int, error)) error {
	for len(b) > 0 {
		num, typ, k := ConsumeTag(b)
		if k < 0 {
			return fmt.Errorf("%s: truncated", what)
		}
		b = b[k:]
		k, err := field(num, typ, b)
		if k == 0 {
			k = protowire.ConsumeFieldValue(num, typ, b)
		}
		if k < 0 {
			return fmt.Errorf("%s: truncated", what)
		}
		if err != nil {
			return err
		}
		b = b[k:]
	}
	return nil
}

func tagField(t *congestion.Tag, num protowire.Number, typ protowire.Type, b []byte) int {
	if typ == protowire.Fixed64Type && num == fieldTagSubscriber {
		v, k := protowire.ConsumeFixed64(b)
		t.Subscriber = v
		return k
	}
	if typ != protowire.VarintType {
		return 0
	}
	v, k := protowire.ConsumeVarint(b)
	switch num {
	case fieldTagFilter:
		t.Filter = uint32(v)
	case fieldTagFeedback:
		t.Feedback = time.Duration(protowire.DecodeZigZag(v))
	default:
		return 0
	}
	return k
}

func stampField(st *congestion.Stamp, num protowire.Number, typ protowire.Type, b []byte) int {
	switch {
	case num == fieldStampSubscriber && typ == protowire.Fixed64Type:
		v, k := protowire.ConsumeFixed64(b)
		st.Subscriber = v
		return k
	case num == fieldStampSeq && typ == protowire.VarintType:
		v, k := protowire.ConsumeVarint(b)
		st.Seq = v
		return k
	}
	return 0
}

func echoField(e *congestion.EchoReply, num protowire.Number, typ protowire.Type, b []byte) int {
	if typ == protowire.Fixed64Type && num == fieldEchoSubscriber {
		v, k := protowire.ConsumeFixed64(b)
		e.Subscriber = v
		return k
	}
	if typ != protowire.VarintType {
		return 0
	}
	v, k := protowire.ConsumeVarint(b)
	switch num {
	case fieldEchoSentAt:
		e.SentAt = time.Unix(0, int64(v))
	case fieldEchoHeld:
		e.Held = time.Duration(v)
	default:
		return 0
	}
	return k
}
