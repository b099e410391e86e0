package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"
	"unicode/utf8"
	"unsafe"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/dripmesh/drip/internal/content"
)

// The broker's data path works on messages in their wire form: a message is
// decoded from the bytes a publisher sent, without the protobuf object tree,
// and the same bytes travel in bundles and deliveries. The field numbers
// below are those of api/proto/drip/v1: exchanged with clients and brokers
// of other versions, never renumbered.
const (
	fieldMessageAttributes = 1 // Message.attributes
	fieldMessagePayload    = 2 // Message.payload
	fieldMessageDeadline   = 30
	fieldMessageCongestion = 20 // Message.congestion, passed on unread
	fieldAttributeName     = 1  // Attribute.name
	fieldAttributeValue    = 2  // Attribute.value
	fieldValueString       = 1  // Value.string_value
	fieldValueInt          = 2  // Value.int_value (sint64)
	fieldValueFloat        = 3  // Value.float_value
	fieldValueBool         = 4  // Value.bool_value

	fieldRequestMessage = 1 // PublishRequest.message
	fieldRequestBatch   = 2 // PublishRequest.batch

	fieldPublishedMessage = 1  // Published.message
	fieldPublishedIngress = 2  // Published.ingress_router
	fieldPublishedAt      = 3  // Published.published_unix_nano
	fieldPublishedHops    = 4  // Published.hops
	fieldPublishedEpoch   = 5  // Published.ingress_epoch
	fieldPublishedSeq     = 6  // Published.seq
	fieldPublishedElapsed = 30 // Published.elapsed_ns
	fieldPublishedMarked  = 31 // Published.congestion_experienced

	fieldDeliveryMessage = 2 // Delivery.message
	fieldDeliveryBatch   = 5 // Delivery.batch
	fieldBatchMessages   = 1 // DeliveryBatch.messages
)

// The one-byte tags of the fields the decoders' fast paths read (the
// client's delivery decoder reads them too).
const (
	tagMessageAttributes = fieldMessageAttributes<<3 | byte(protowire.BytesType)
	TagAttributeName     = fieldAttributeName<<3 | byte(protowire.BytesType)
	TagAttributeValue    = fieldAttributeValue<<3 | byte(protowire.BytesType)
	TagValueString       = fieldValueString<<3 | byte(protowire.BytesType)
	TagValueInt          = fieldValueInt<<3 | byte(protowire.VarintType)
	TagValueFloat        = fieldValueFloat<<3 | byte(protowire.Fixed64Type)
	TagValueBool         = fieldValueBool<<3 | byte(protowire.VarintType)
)

// ShortField reads a length-delimited field with one-byte tag tag and a
// length under 128 at the start of b: its bytes and what follows. ok is
// false for anything else, which the caller reads the general way. It is
// the fast path of decoders for the layout encoders write.
func ShortField(b []byte, tag byte) (v, rest []byte, ok bool) {
	if len(b) < 2 || b[0] != tag || b[1] >= 0x80 || int(b[1]) > len(b)-2 {
		return nil, b, false
	}
	return b[2 : 2+b[1]], b[2+b[1]:], true
}

// ErrTruncated is what a field cut short or of an impossible length decodes to.
var ErrTruncated = errors.New("malformed protobuf: truncated or invalid field")

// DecodeMessage decodes the wire form of a drip.v1.Message into a
// content.Message, allocating only the attribute slice: names, string
// values and the payload alias b, which the caller must never change
// afterwards. It checks what MessageFromProto checks, with the same
// errors, and what protobuf decoding checks (well-formed fields, UTF-8
// strings).
func DecodeMessage(b []byte, l MessageLimits) (content.Message, error) {
	m, _, _, err := decodeMessage(nil, b, l)
	return m, err
}

// DecodeMessageDeadline is DecodeMessage that also returns the deadline
// the publisher set (Message.deadline_ns; 0: none), and refuses a
// negative one.
func DecodeMessageDeadline(b []byte, l MessageLimits) (content.Message, time.Duration, error) {
	var d Decoder
	return d.Decode(b, l)
}

// Decoder decodes messages as DecodeMessageDeadline does, into attribute
// space it reuses: a stream that decodes every message of a request
// allocates nothing per message once the space has grown to a request's
// worth. The messages it returns alias that space, and are valid until
// Reset.
type Decoder struct {
	attrs []content.Attribute
}

// Decode decodes the wire form of a drip.v1.Message.
func (d *Decoder) Decode(b []byte, l MessageLimits) (content.Message, time.Duration, error) {
	m, dl, attrs, err := decodeMessage(d.attrs, b, l)
	if err == nil && dl < 0 {
		return content.Message{}, 0, fmt.Errorf("message deadline is %v, want a positive duration or none", time.Duration(dl))
	}
	if err == nil {
		d.attrs = attrs
	}
	return m, time.Duration(dl), err
}

// Reset lets the space of the messages decoded so far be reused: they are
// invalid from now on.
func (d *Decoder) Reset() {
	clear(d.attrs) // hold no request's bytes beyond it
	d.attrs = d.attrs[:0]
}

// MaxCongestionHeader bounds the congestion-control header a message may
// carry (Message.congestion, docs/design.md §12), which brokers pass on
// without reading: k = 5 records of 64 bytes and a few tags take ~450.
const MaxCongestionHeader = 4 << 10

// decodeMessage decodes b into attributes appended to space, which it
// returns grown; a message whose attributes do not fit takes a new array,
// so that those of the messages before it stay where they are. It reads b
// once. A message it refuses is read again by decodeChecked, whose first
// pass checks the structure and counts the attributes before decoding any,
// so that the error is the one protobuf and MessageFromProto would give.
func decodeMessage(space []content.Attribute, b []byte, l MessageLimits) (content.Message, int64, []content.Attribute, error) {
	if m, deadline, grown, ok := decodeOnce(space, b, l); ok {
		return m, deadline, grown, nil
	}
	return decodeChecked(space, b, l)
}

// decodeOnce is decodeMessage in one pass, for messages without errors: ok
// is false, and what it wrote past len(space) is garbage, at the first
// thing wrong.
func decodeOnce(space []content.Attribute, b []byte, l MessageLimits) (content.Message, int64, []content.Attribute, bool) {
	var deadline int64
	var payload []byte
	base := len(space)
	attrs := space[base:base:cap(space)]
	for len(b) > 0 {
		v, rest, short := ShortField(b, tagMessageAttributes)
		num, typ := protowire.Number(fieldMessageAttributes), protowire.BytesType
		if !short {
			var k int
			if num, typ, k = ConsumeTag(b); k < 0 {
				return content.Message{}, 0, space, false
			}
			b = b[k:]
		}
		switch {
		case num == fieldMessageAttributes && typ == protowire.BytesType:
			if !short {
				var k int
				if v, k = protowire.ConsumeBytes(b); k < 0 {
					return content.Message{}, 0, space, false
				}
				rest = b[k:]
			}
			if l.MaxAttributes > 0 && len(attrs) >= l.MaxAttributes {
				return content.Message{}, 0, space, false
			}
			b = rest
			a, err := decodeAttribute(v, len(attrs), l)
			if err != nil {
				return content.Message{}, 0, space, false
			}
			if len(attrs) == cap(attrs) {
				grown := make([]content.Attribute, 0, max(2*cap(space), 2*len(attrs), 16))
				attrs = append(grown, attrs...)
				space, base = grown, 0
			}
			attrs = append(attrs, a)
		case num == fieldMessagePayload && typ == protowire.BytesType:
			v, k := protowire.ConsumeBytes(b)
			if k < 0 {
				return content.Message{}, 0, space, false
			}
			b = b[k:]
			payload = v
		case num == fieldMessageCongestion && typ == protowire.BytesType:
			v, k := protowire.ConsumeBytes(b)
			if k < 0 || len(v) > MaxCongestionHeader {
				return content.Message{}, 0, space, false
			}
			b = b[k:]
		case num == fieldMessageDeadline && typ == protowire.VarintType:
			v, k := protowire.ConsumeVarint(b)
			if k < 0 {
				return content.Message{}, 0, space, false
			}
			b = b[k:]
			deadline = int64(v)
		default:
			k := protowire.ConsumeFieldValue(num, typ, b)
			if k < 0 {
				return content.Message{}, 0, space, false
			}
			b = b[k:]
		}
	}
	if l.MaxPayload > 0 && len(payload) > l.MaxPayload {
		return content.Message{}, 0, space, false
	}
	m, err := content.NewMessageOwned(attrs, payload)
	if err != nil {
		return content.Message{}, 0, space, false
	}
	return m, deadline, space[:base+len(attrs)], true
}

// decodeChecked is decodeMessage in two passes: the first checks the
// structure and counts the attributes, the second decodes them.
func decodeChecked(space []content.Attribute, b []byte, l MessageLimits) (content.Message, int64, []content.Attribute, error) {
	var deadline int64
	n := 0
	for rest := b; len(rest) > 0; {
		num, typ, k := ConsumeTag(rest)
		if k < 0 {
			return content.Message{}, 0, space, ErrTruncated
		}
		if num == fieldMessageAttributes && typ == protowire.BytesType {
			n++
		}
		rest = rest[k:]
		if k = protowire.ConsumeFieldValue(num, typ, rest); k < 0 {
			return content.Message{}, 0, space, ErrTruncated
		}
		rest = rest[k:]
	}
	if l.MaxAttributes > 0 && n > l.MaxAttributes {
		return content.Message{}, 0, space, fmt.Errorf("message has %d attributes, over the limit of %d", n, l.MaxAttributes)
	}
	if cap(space)-len(space) < n {
		space = make([]content.Attribute, 0, max(2*cap(space), n, 16))
	}
	attrs := space[len(space) : len(space) : len(space)+n]
	var payload []byte
	for len(b) > 0 {
		num, typ, k := ConsumeTag(b)
		b = b[k:]
		switch {
		case num == fieldMessageAttributes && typ == protowire.BytesType:
			v, k := protowire.ConsumeBytes(b)
			b = b[k:]
			a, err := decodeAttribute(v, len(attrs), l)
			if err != nil {
				return content.Message{}, 0, space, err
			}
			attrs = append(attrs, a)
		case num == fieldMessagePayload && typ == protowire.BytesType:
			v, k := protowire.ConsumeBytes(b)
			b = b[k:]
			payload = v
		case num == fieldMessageCongestion && typ == protowire.BytesType:
			v, k := protowire.ConsumeBytes(b)
			b = b[k:]
			if len(v) > MaxCongestionHeader {
				return content.Message{}, 0, space, fmt.Errorf("message congestion header is %d bytes, over the limit of %d", len(v), MaxCongestionHeader)
			}
		case num == fieldMessageDeadline && typ == protowire.VarintType:
			v, k := protowire.ConsumeVarint(b)
			b = b[k:]
			deadline = int64(v)
		default:
			b = b[protowire.ConsumeFieldValue(num, typ, b):]
		}
	}
	if l.MaxPayload > 0 && len(payload) > l.MaxPayload {
		return content.Message{}, 0, space, fmt.Errorf("message payload is %d bytes, over the limit of %d", len(payload), l.MaxPayload)
	}
	m, err := content.NewMessageOwned(attrs, payload)
	if err != nil {
		return content.Message{}, 0, space, err
	}
	return m, deadline, space[:len(space)+len(attrs)], nil
}

// decodeAttribute decodes attribute i. Its errors match MessageFromProto's,
// which checks the name's length, then the value, then the string's length.
func decodeAttribute(b []byte, i int, l MessageLimits) (content.Attribute, error) {
	var name string
	var value content.Value
	var valueSeen bool
	// The layout encoders write, a name and then a value, each shorter
	// than 128 bytes, is read without the general loop, to the same
	// result and errors.
	if n, rest, ok := ShortField(b, TagAttributeName); ok {
		if v, rest, ok := ShortField(rest, TagAttributeValue); ok && len(rest) == 0 {
			if !utf8.Valid(n) {
				return content.Attribute{}, fmt.Errorf("attribute %d: name is not valid UTF-8", i)
			}
			val, err := decodeValue(v)
			if err != nil {
				return content.Attribute{}, err
			}
			name, value, valueSeen, b = alias(n), val, true, nil
		}
	}
	for len(b) > 0 {
		num, typ, k := ConsumeTag(b)
		if k < 0 {
			return content.Attribute{}, ErrTruncated
		}
		b = b[k:]
		switch {
		case num == fieldAttributeName && typ == protowire.BytesType:
			v, k := protowire.ConsumeBytes(b)
			if k < 0 {
				return content.Attribute{}, ErrTruncated
			}
			b = b[k:]
			if !utf8.Valid(v) {
				return content.Attribute{}, fmt.Errorf("attribute %d: name is not valid UTF-8", i)
			}
			name = alias(v)
		case num == fieldAttributeValue && typ == protowire.BytesType:
			v, k := protowire.ConsumeBytes(b)
			if k < 0 {
				return content.Attribute{}, ErrTruncated
			}
			b = b[k:]
			// A message field given twice is merged: within the oneof, the
			// last member set wins.
			val, err := decodeValue(v)
			if err != nil {
				return content.Attribute{}, err
			}
			if val.IsValid() {
				value = val
			}
			valueSeen = true
		default:
			k := protowire.ConsumeFieldValue(num, typ, b)
			if k < 0 {
				return content.Attribute{}, ErrTruncated
			}
			b = b[k:]
		}
	}
	if l.MaxName > 0 && len(name) > l.MaxName {
		return content.Attribute{}, fmt.Errorf("attribute %d: name is %d bytes, over the limit of %d", i, len(name), l.MaxName)
	}
	if !valueSeen || !value.IsValid() {
		return content.Attribute{}, fmt.Errorf("attribute %q: value is unset", name)
	}
	if l.MaxString > 0 && len(value.Str()) > l.MaxString {
		return content.Attribute{}, fmt.Errorf("attribute %q: string value is %d bytes, over the limit of %d", name, len(value.Str()), l.MaxString)
	}
	return content.Attribute{Name: name, Value: value}, nil
}

// decodeValue decodes a drip.v1.Value; an unset one is the invalid Value.
func decodeValue(b []byte) (content.Value, error) {
	// A value that is one field, as encoders write it, is read directly.
	if len(b) >= 2 {
		switch b[0] {
		case TagValueString:
			if b[1] < 0x80 && int(b[1]) == len(b)-2 {
				if !utf8.Valid(b[2:]) {
					return content.Value{}, errors.New("string value is not valid UTF-8")
				}
				return content.String(alias(b[2:])), nil
			}
		case TagValueInt:
			if x, k := protowire.ConsumeVarint(b[1:]); k == len(b)-1 {
				return content.Int(protowire.DecodeZigZag(x)), nil
			}
		case TagValueFloat:
			if len(b) == 9 {
				return content.Float(math.Float64frombits(binary.LittleEndian.Uint64(b[1:]))), nil
			}
		case TagValueBool:
			if len(b) == 2 && b[1] < 0x80 {
				return content.Bool(b[1] != 0), nil
			}
		}
	}
	var v content.Value
	for len(b) > 0 {
		num, typ, k := ConsumeTag(b)
		if k < 0 {
			return v, ErrTruncated
		}
		b = b[k:]
		switch {
		case num == fieldValueString && typ == protowire.BytesType:
			s, k := protowire.ConsumeBytes(b)
			if k < 0 {
				return v, ErrTruncated
			}
			b = b[k:]
			if !utf8.Valid(s) {
				return v, errors.New("string value is not valid UTF-8")
			}
			v = content.String(alias(s))
		case num == fieldValueInt && typ == protowire.VarintType:
			x, k := protowire.ConsumeVarint(b)
			if k < 0 {
				return v, ErrTruncated
			}
			b = b[k:]
			v = content.Int(protowire.DecodeZigZag(x))
		case num == fieldValueFloat && typ == protowire.Fixed64Type:
			x, k := protowire.ConsumeFixed64(b)
			if k < 0 {
				return v, ErrTruncated
			}
			b = b[k:]
			v = content.Float(math.Float64frombits(x))
		case num == fieldValueBool && typ == protowire.VarintType:
			x, k := protowire.ConsumeVarint(b)
			if k < 0 {
				return v, ErrTruncated
			}
			b = b[k:]
			v = content.Bool(x != 0)
		default:
			k := protowire.ConsumeFieldValue(num, typ, b)
			if k < 0 {
				return v, ErrTruncated
			}
			b = b[k:]
		}
	}
	return v, nil
}

// ConsumeTag is protowire.ConsumeTag that also refuses field numbers
// beyond protobuf's largest, as protobuf decoding does.
func ConsumeTag(b []byte) (protowire.Number, protowire.Type, int) {
	num, typ, n := protowire.ConsumeTag(b)
	if n >= 0 && num > protowire.MaxValidNumber {
		return 0, 0, -1
	}
	return num, typ, n
}

// alias returns b as a string without copying: b must never change.
func alias(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

// PublishRequestMessages calls f with the wire form of each message of a
// drip.v1.PublishRequest in order: its message, then its batch. It says
// whether the request had a batch, and stops at the first error.
func PublishRequestMessages(b []byte, f func(msg []byte) error) (batched bool, err error) {
	var first []byte
	hasFirst := false
	batch := b
	// message (field 1) goes before the batch wherever it appears.
	for rest := b; len(rest) > 0; {
		num, typ, k := ConsumeTag(rest)
		if k < 0 {
			return false, ErrTruncated
		}
		rest = rest[k:]
		if num == fieldRequestMessage && typ == protowire.BytesType {
			v, k := protowire.ConsumeBytes(rest)
			if k < 0 {
				return false, ErrTruncated
			}
			first, hasFirst = v, true // the last one wins, as protobuf merges it
			rest = rest[k:]
			continue
		}
		k = protowire.ConsumeFieldValue(num, typ, rest)
		if k < 0 {
			return false, ErrTruncated
		}
		rest = rest[k:]
	}
	if hasFirst {
		if err := f(first); err != nil {
			return false, err
		}
	}
	for len(batch) > 0 {
		num, typ, k := ConsumeTag(batch)
		batch = batch[k:]
		if num == fieldRequestBatch && typ == protowire.BytesType {
			v, k := protowire.ConsumeBytes(batch)
			batch = batch[k:]
			batched = true
			if err := f(v); err != nil {
				return batched, err
			}
			continue
		}
		batch = batch[protowire.ConsumeFieldValue(num, typ, batch):]
	}
	return batched, nil
}

// PublishedHeader is what a drip.v1.Published says about its message.
type PublishedHeader struct {
	Ingress     uint32
	PublishedAt int64 // Unix nanoseconds on the ingress broker's clock
	Hops        uint32
	Epoch, Seq  uint64
	// Elapsed is the time since acceptance, measured along a deadline
	// message's path (nanoseconds); 0: not measured.
	Elapsed int64
	// Marked says a broker on the way queued it on a link whose queue
	// was filling (congestion experienced).
	Marked bool
}

// Published is a delivery before it is encoded: the message in its wire
// form (the ingress bytes, unchanged, shared by every subscriber it goes
// to) and its header's fields in theirs, held inline so that a delivery
// is one small allocation, whatever the message's size. It is encoded as
// a drip.v1.Published straight into the buffer the delivery leaves in, so
// that a message is copied once on its way out.
type Published struct {
	Msg     []byte
	head    [maxPublishedHead]byte
	headLen uint8
}

// maxPublishedHead bounds the header fields of a Published: a tag and a
// varint of ten bytes at most for each, a fixed64 for the epoch, and the
// mark's three bytes.
const maxPublishedHead = 59

// NewPublished is the delivery of msg with header h.
func NewPublished(msg []byte, h PublishedHeader) Published {
	p := Published{Msg: msg}
	p.headLen = uint8(len(AppendPublishedHeader(p.head[:0], h)))
	return p
}

// Size is the size of p's wire form.
func (p *Published) Size() int {
	return protowire.SizeTag(fieldPublishedMessage) + protowire.SizeBytes(len(p.Msg)) + int(p.headLen)
}

// Append appends p's wire form, a drip.v1.Published.
func (p *Published) Append(dst []byte) []byte {
	dst = protowire.AppendTag(dst, fieldPublishedMessage, protowire.BytesType)
	dst = protowire.AppendBytes(dst, p.Msg)
	return append(dst, p.head[:p.headLen]...)
}

// AppendPublished appends the wire form of a drip.v1.Published carrying
// the message whose wire form is msg.
func AppendPublished(dst, msg []byte, h PublishedHeader) []byte {
	dst = protowire.AppendTag(dst, fieldPublishedMessage, protowire.BytesType)
	dst = protowire.AppendBytes(dst, msg)
	return AppendPublishedHeader(dst, h)
}

// AppendPublishedHeader appends the fields of a drip.v1.Published other
// than its message.
func AppendPublishedHeader(dst []byte, h PublishedHeader) []byte {
	if h.Ingress != 0 {
		dst = protowire.AppendTag(dst, fieldPublishedIngress, protowire.VarintType)
		dst = protowire.AppendVarint(dst, uint64(h.Ingress))
	}
	if h.PublishedAt != 0 {
		dst = protowire.AppendTag(dst, fieldPublishedAt, protowire.VarintType)
		dst = protowire.AppendVarint(dst, uint64(h.PublishedAt))
	}
	if h.Hops != 0 {
		dst = protowire.AppendTag(dst, fieldPublishedHops, protowire.VarintType)
		dst = protowire.AppendVarint(dst, uint64(h.Hops))
	}
	if h.Epoch != 0 {
		dst = protowire.AppendTag(dst, fieldPublishedEpoch, protowire.Fixed64Type)
		dst = protowire.AppendFixed64(dst, h.Epoch)
	}
	if h.Seq != 0 {
		dst = protowire.AppendTag(dst, fieldPublishedSeq, protowire.VarintType)
		dst = protowire.AppendVarint(dst, h.Seq)
	}
	if h.Elapsed != 0 {
		dst = protowire.AppendTag(dst, fieldPublishedElapsed, protowire.VarintType)
		dst = protowire.AppendVarint(dst, uint64(h.Elapsed))
	}
	if h.Marked {
		dst = protowire.AppendTag(dst, fieldPublishedMarked, protowire.VarintType)
		dst = protowire.AppendVarint(dst, 1)
	}
	return dst
}

// AppendDelivery appends the wire form of a drip.v1.Delivery carrying one
// Published.
func AppendDelivery(dst []byte, p *Published) []byte {
	dst = protowire.AppendTag(dst, fieldDeliveryMessage, protowire.BytesType)
	dst = protowire.AppendVarint(dst, uint64(p.Size()))
	return p.Append(dst)
}

// DeliverySize is the size of the drip.v1.Delivery AppendDelivery
// appends for p.
func DeliverySize(p *Published) int {
	return protowire.SizeTag(fieldDeliveryMessage) + protowire.SizeBytes(p.Size())
}

// DeliveryBatchSize is the size of a drip.v1.Delivery carrying a
// DeliveryBatch of ps.
func DeliveryBatchSize(ps []*Published) int {
	return protowire.SizeTag(fieldDeliveryBatch) + protowire.SizeBytes(batchInner(ps))
}

func batchInner(ps []*Published) int {
	inner := 0
	for i := range ps {
		inner += protowire.SizeTag(fieldBatchMessages) + protowire.SizeBytes(ps[i].Size())
	}
	return inner
}

// AppendDeliveryBatch appends the wire form of a drip.v1.Delivery carrying
// a DeliveryBatch of ps, in order.
func AppendDeliveryBatch(dst []byte, ps []*Published) []byte {
	dst = protowire.AppendTag(dst, fieldDeliveryBatch, protowire.BytesType)
	dst = protowire.AppendVarint(dst, uint64(batchInner(ps)))
	for i := range ps {
		dst = protowire.AppendTag(dst, fieldBatchMessages, protowire.BytesType)
		dst = protowire.AppendVarint(dst, uint64(ps[i].Size()))
		dst = ps[i].Append(dst)
	}
	return dst
}
