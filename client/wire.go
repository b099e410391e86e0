package client

import (
	"fmt"
	"math"
	"slices"
	"time"
	"unicode/utf8"
	"unsafe"

	"google.golang.org/protobuf/encoding/protowire"
)

// The client encodes what it publishes and decodes what it receives in the
// protobuf wire form directly (api/proto/drip/v1; field numbers are a
// contract), so that a message costs no protobuf objects on either side.
const (
	fieldMessageAttributes = 1
	fieldMessagePayload    = 2
	fieldMessageCongestion = 20
	fieldMessageDeadline   = 30
	fieldAttributeName     = 1
	fieldAttributeValue    = 2
	fieldValueString       = 1
	fieldValueInt          = 2
	fieldValueFloat        = 3
	fieldValueBool         = 4
	fieldRequestBatch      = 2 // PublishRequest.batch
	fieldPublishedMessage  = 1
	fieldPublishedIngress  = 2
	fieldPublishedAt       = 3
	fieldPublishedHops     = 4
	fieldPublishedEpoch    = 5
	fieldPublishedSeq      = 6
	fieldPublishedElapsed  = 30
	fieldDeliveryMessage   = 2 // Delivery.message
	fieldDeliveryBatch     = 5 // Delivery.batch
	fieldBatchMessages     = 1 // DeliveryBatch.messages
)

// maxDeadline is the longest deadline brokers accept (node.MaxDeadline).
const maxDeadline = time.Hour

// appendBatchEntry appends m as one entry of a PublishRequest's batch, with
// congestion-control header cc if not nil. names is scratch space,
// returned for reuse. On error nothing is appended.
func appendBatchEntry(dst []byte, m Message, cc []byte, names []string) ([]byte, []string, error) {
	names, size, err := messageSize(m, names)
	if err != nil {
		return dst, names, err
	}
	if cc != nil {
		size += protowire.SizeTag(fieldMessageCongestion) + protowire.SizeBytes(len(cc))
	}
	dst = protowire.AppendTag(dst, fieldRequestBatch, protowire.BytesType)
	dst = protowire.AppendVarint(dst, uint64(size))
	for _, n := range names {
		v := m.Attrs[n]
		vs, _ := valueSize(v)
		attr := protowire.SizeTag(fieldAttributeName) + protowire.SizeBytes(len(n)) +
			protowire.SizeTag(fieldAttributeValue) + protowire.SizeBytes(vs)
		dst = protowire.AppendTag(dst, fieldMessageAttributes, protowire.BytesType)
		dst = protowire.AppendVarint(dst, uint64(attr))
		dst = protowire.AppendTag(dst, fieldAttributeName, protowire.BytesType)
		dst = protowire.AppendString(dst, n)
		dst = protowire.AppendTag(dst, fieldAttributeValue, protowire.BytesType)
		dst = protowire.AppendVarint(dst, uint64(vs))
		dst = appendValue(dst, v)
	}
	if len(m.Payload) > 0 {
		dst = protowire.AppendTag(dst, fieldMessagePayload, protowire.BytesType)
		dst = protowire.AppendBytes(dst, m.Payload)
	}
	if m.Deadline != 0 {
		dst = protowire.AppendTag(dst, fieldMessageDeadline, protowire.VarintType)
		dst = protowire.AppendVarint(dst, uint64(m.Deadline))
	}
	if cc != nil {
		dst = protowire.AppendTag(dst, fieldMessageCongestion, protowire.BytesType)
		dst = protowire.AppendBytes(dst, cc)
	}
	return dst, names, nil
}

// messageSize checks m as brokers will and returns the size of its
// drip.v1.Message without a congestion header, and its attribute names
// sorted (names is scratch space, returned for reuse): equal messages then
// have equal encodings, and the broker finds attributes in order.
func messageSize(m Message, names []string) ([]string, int, error) {
	names = names[:0]
	for n := range m.Attrs {
		names = append(names, n)
	}
	slices.Sort(names)
	size := 0
	for _, n := range names {
		if n == "" {
			return names, 0, fmt.Errorf("attribute with an empty name")
		}
		// Brokers refuse names and strings that are not UTF-8; saying so
		// here names the attribute and sends nothing.
		if !utf8.ValidString(n) {
			return names, 0, fmt.Errorf("attribute %q: name is not valid UTF-8", n)
		}
		if s, ok := m.Attrs[n].(string); ok && !utf8.ValidString(s) {
			return names, 0, fmt.Errorf("attribute %q: string value is not valid UTF-8", n)
		}
		vs, err := valueSize(m.Attrs[n])
		if err != nil {
			return names, 0, fmt.Errorf("attribute %q: %w", n, err)
		}
		attr := protowire.SizeTag(fieldAttributeName) + protowire.SizeBytes(len(n)) +
			protowire.SizeTag(fieldAttributeValue) + protowire.SizeBytes(vs)
		size += protowire.SizeTag(fieldMessageAttributes) + protowire.SizeBytes(attr)
	}
	if len(m.Payload) > 0 {
		size += protowire.SizeTag(fieldMessagePayload) + protowire.SizeBytes(len(m.Payload))
	}
	if m.Deadline < 0 || m.Deadline > maxDeadline {
		return names, 0, fmt.Errorf("deadline %v: want 0 (none) or a duration up to %v", m.Deadline, maxDeadline)
	}
	if m.Deadline != 0 {
		size += protowire.SizeTag(fieldMessageDeadline) + protowire.SizeVarint(uint64(m.Deadline))
	}
	return names, size, nil
}

// valueSize is the size of a drip.v1.Value holding v. A oneof member is
// encoded even when it is zero.
func valueSize(v any) (int, error) {
	switch x := v.(type) {
	case string:
		return protowire.SizeTag(fieldValueString) + protowire.SizeBytes(len(x)), nil
	case int:
		return protowire.SizeTag(fieldValueInt) + protowire.SizeVarint(protowire.EncodeZigZag(int64(x))), nil
	case int64:
		return protowire.SizeTag(fieldValueInt) + protowire.SizeVarint(protowire.EncodeZigZag(x)), nil
	case float64:
		return protowire.SizeTag(fieldValueFloat) + protowire.SizeFixed64(), nil
	case bool:
		return protowire.SizeTag(fieldValueBool) + protowire.SizeVarint(0), nil
	case nil:
		return 0, fmt.Errorf("value is nil; want string, int, int64, float64 or bool")
	default:
		return 0, fmt.Errorf("value of type %T is not supported; want string, int, int64, float64 or bool", v)
	}
}

func appendValue(dst []byte, v any) []byte {
	switch x := v.(type) {
	case string:
		dst = protowire.AppendTag(dst, fieldValueString, protowire.BytesType)
		return protowire.AppendString(dst, x)
	case int:
		dst = protowire.AppendTag(dst, fieldValueInt, protowire.VarintType)
		return protowire.AppendVarint(dst, protowire.EncodeZigZag(int64(x)))
	case int64:
		dst = protowire.AppendTag(dst, fieldValueInt, protowire.VarintType)
		return protowire.AppendVarint(dst, protowire.EncodeZigZag(x))
	case float64:
		dst = protowire.AppendTag(dst, fieldValueFloat, protowire.Fixed64Type)
		return protowire.AppendFixed64(dst, math.Float64bits(x))
	case bool:
		dst = protowire.AppendTag(dst, fieldValueBool, protowire.VarintType)
		return protowire.AppendVarint(dst, protowire.EncodeBool(x))
	}
	return dst
}

// deliveriesFromWire decodes the deliveries of a Delivery event in its wire
// form: none when it is another event (acknowledgement, loss, draining),
// which the caller then decodes with protobuf. Strings and payloads alias
// b, which the caller hands over for good.
func deliveriesFromWire(b []byte, into []Delivery) ([]Delivery, bool, error) {
	num, typ, n := protowire.ConsumeTag(b)
	if n < 0 || typ != protowire.BytesType {
		return into, false, nil
	}
	body, m := protowire.ConsumeBytes(b[n:])
	if m < 0 || n+m != len(b) {
		// Not one length-delimited field: leave it to protobuf.
		return into, false, nil
	}
	switch num {
	case fieldDeliveryMessage:
		d, err := deliveryFromWire(body)
		if err != nil {
			return into, true, err
		}
		return append(into, d), true, nil
	case fieldDeliveryBatch:
		for len(body) > 0 {
			num, typ, n := protowire.ConsumeTag(body)
			if n < 0 {
				return into, true, errMalformed
			}
			body = body[n:]
			if num != fieldBatchMessages || typ != protowire.BytesType {
				if n = protowire.ConsumeFieldValue(num, typ, body); n < 0 {
					return into, true, errMalformed
				}
				body = body[n:]
				continue
			}
			p, n := protowire.ConsumeBytes(body)
			if n < 0 {
				return into, true, errMalformed
			}
			body = body[n:]
			d, err := deliveryFromWire(p)
			if err != nil {
				return into, true, err
			}
			into = append(into, d)
		}
		return into, true, nil
	}
	return into, false, nil
}

var errMalformed = fmt.Errorf("malformed protobuf")

// deliveryFromWire decodes a drip.v1.Published.
func deliveryFromWire(b []byte) (Delivery, error) {
	d := Delivery{size: len(b)}
	var msg []byte
	hasMsg := false
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return d, errMalformed
		}
		b = b[n:]
		switch {
		case num == fieldPublishedMessage && typ == protowire.BytesType:
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return d, errMalformed
			}
			b, msg, hasMsg = b[n:], v, true
		case num == fieldPublishedIngress && typ == protowire.VarintType,
			num == fieldPublishedAt && typ == protowire.VarintType,
			num == fieldPublishedHops && typ == protowire.VarintType,
			num == fieldPublishedSeq && typ == protowire.VarintType:
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return d, errMalformed
			}
			b = b[n:]
			switch num {
			case fieldPublishedIngress:
				d.Ingress = uint32(v)
			case fieldPublishedAt:
				if v != 0 {
					d.PublishedAt = time.Unix(0, int64(v))
				}
			case fieldPublishedHops:
				d.Hops = int(uint32(v))
			case fieldPublishedSeq:
				d.Seq = v
			}
		case num == fieldPublishedElapsed && typ == protowire.VarintType:
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return d, errMalformed
			}
			b, d.Elapsed = b[n:], max(time.Duration(v), 0)
		case num == fieldPublishedEpoch && typ == protowire.Fixed64Type:
			v, n := protowire.ConsumeFixed64(b)
			if n < 0 {
				return d, errMalformed
			}
			b, d.IngressEpoch = b[n:], v
		default:
			n := protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return d, errMalformed
			}
			b = b[n:]
		}
	}
	if !hasMsg {
		return d, fmt.Errorf("message is missing")
	}
	m, cc, err := messageFromWire(msg)
	d.Message, d.congestion = m, cc
	return d, err
}

// messageFromWire decodes a delivered drip.v1.Message, rejecting what no
// broker should send, and returns its congestion header undecoded.
func messageFromWire(b []byte) (Message, []byte, error) {
	count := 0
	for rest := b; len(rest) > 0; {
		num, typ, n := protowire.ConsumeTag(rest)
		if n < 0 {
			return Message{}, nil, errMalformed
		}
		rest = rest[n:]
		if num == fieldMessageAttributes && typ == protowire.BytesType {
			count++
		}
		if n = protowire.ConsumeFieldValue(num, typ, rest); n < 0 {
			return Message{}, nil, errMalformed
		}
		rest = rest[n:]
	}
	m := Message{Attrs: make(Attrs, count)}
	var cc []byte
	i := 0
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		b = b[n:]
		switch {
		case num == fieldMessageAttributes && typ == protowire.BytesType:
			v, n := protowire.ConsumeBytes(b)
			b = b[n:]
			name, value, err := attributeFromWire(v)
			switch {
			case err != nil:
				return Message{}, nil, err
			case name == "":
				return Message{}, nil, fmt.Errorf("attribute %d has an empty name", i)
			}
			if _, dup := m.Attrs[name]; dup {
				return Message{}, nil, fmt.Errorf("attribute %q given twice", name)
			}
			if value == nil {
				return Message{}, nil, fmt.Errorf("attribute %q has no value", name)
			}
			m.Attrs[name] = value
			i++
		case num == fieldMessagePayload && typ == protowire.BytesType:
			v, n := protowire.ConsumeBytes(b)
			b, m.Payload = b[n:], v
		case num == fieldMessageCongestion && typ == protowire.BytesType:
			v, n := protowire.ConsumeBytes(b)
			b, cc = b[n:], v
		case num == fieldMessageDeadline && typ == protowire.VarintType:
			v, n := protowire.ConsumeVarint(b)
			b, m.Deadline = b[n:], time.Duration(v)
		default:
			b = b[protowire.ConsumeFieldValue(num, typ, b):]
		}
	}
	return m, cc, nil
}

func attributeFromWire(b []byte) (string, any, error) {
	var name string
	var value any
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return "", nil, errMalformed
		}
		b = b[n:]
		switch {
		case num == fieldAttributeName && typ == protowire.BytesType:
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return "", nil, errMalformed
			}
			if !utf8.Valid(v) {
				return "", nil, fmt.Errorf("attribute name is not valid UTF-8")
			}
			b, name = b[n:], alias(v)
		case num == fieldAttributeValue && typ == protowire.BytesType:
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return "", nil, errMalformed
			}
			b = b[n:]
			x, err := valueFromWire(v)
			if err != nil {
				return "", nil, fmt.Errorf("attribute %q: %w", name, err)
			}
			if x != nil {
				value = x
			}
		default:
			n := protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return "", nil, errMalformed
			}
			b = b[n:]
		}
	}
	return name, value, nil
}

func valueFromWire(b []byte) (any, error) {
	var v any
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil, errMalformed
		}
		b = b[n:]
		switch {
		case num == fieldValueString && typ == protowire.BytesType:
			s, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return nil, errMalformed
			}
			if !utf8.Valid(s) {
				return nil, fmt.Errorf("string value is not valid UTF-8")
			}
			b, v = b[n:], alias(s)
		case num == fieldValueInt && typ == protowire.VarintType:
			x, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return nil, errMalformed
			}
			b, v = b[n:], protowire.DecodeZigZag(x)
		case num == fieldValueFloat && typ == protowire.Fixed64Type:
			x, n := protowire.ConsumeFixed64(b)
			if n < 0 {
				return nil, errMalformed
			}
			b, v = b[n:], math.Float64frombits(x)
		case num == fieldValueBool && typ == protowire.VarintType:
			x, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return nil, errMalformed
			}
			b, v = b[n:], protowire.DecodeBool(x)
		default:
			n := protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return nil, errMalformed
			}
			b = b[n:]
		}
	}
	return v, nil
}

// alias returns b as a string without copying: b must never change.
func alias(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}
