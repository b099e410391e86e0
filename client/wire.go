package client

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"time"
	"unicode/utf8"
	"unsafe"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/dripmesh/drip/internal/wire"
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
	fieldPublishedMarked   = 31
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
	if len(m.Fields) > 0 {
		return appendFieldsEntry(dst, m, cc, names)
	}
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
	return appendMessageTail(dst, m, cc), names, nil
}

// appendMessageTail appends what follows a message's attributes: its
// payload, deadline and congestion header.
func appendMessageTail(dst []byte, m Message, cc []byte) []byte {
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
	return dst
}

// tailSize is the size of what appendMessageTail appends, and checks the
// deadline.
func tailSize(m Message, cc []byte) (int, error) {
	size := 0
	if len(m.Payload) > 0 {
		size += protowire.SizeTag(fieldMessagePayload) + protowire.SizeBytes(len(m.Payload))
	}
	if m.Deadline < 0 || m.Deadline > maxDeadline {
		return 0, fmt.Errorf("deadline %v: want 0 (none) or a duration up to %v", m.Deadline, maxDeadline)
	}
	if m.Deadline != 0 {
		size += protowire.SizeTag(fieldMessageDeadline) + protowire.SizeVarint(uint64(m.Deadline))
	}
	if cc != nil {
		size += protowire.SizeTag(fieldMessageCongestion) + protowire.SizeBytes(len(cc))
	}
	return size, nil
}

// appendFieldsEntry is appendBatchEntry for a message of Fields, sorted by
// name as the Attrs path encodes them: a broker sorts a message it
// receives unsorted, at the ingress and again where it delivers it, since
// deliveries carry the bytes as published (docs/results/perf-gaps.md).
// Fields already sorted are encoded as they are; more than
// maxSortedFields unsorted ones are left to the brokers. names is scratch
// space for the check that no name is given twice, returned for reuse.
func appendFieldsEntry(dst []byte, m Message, cc []byte, names []string) ([]byte, []string, error) {
	if len(m.Attrs) > 0 {
		return dst, names, fmt.Errorf("message has both Attrs and Fields; give one")
	}
	size, err := tailSize(m, cc)
	if err != nil {
		return dst, names, err
	}
	sorted := true
	for i, f := range m.Fields {
		if f.Name == "" {
			return dst, names, fmt.Errorf("attribute with an empty name")
		}
		// Brokers refuse names and strings that are not UTF-8; saying so
		// here names the attribute and sends nothing.
		if !utf8.ValidString(f.Name) {
			return dst, names, fmt.Errorf("attribute %q: name is not valid UTF-8", f.Name)
		}
		if f.kind == KindString && !utf8.ValidString(f.s) {
			return dst, names, fmt.Errorf("attribute %q: string value is not valid UTF-8", f.Name)
		}
		if f.kind < KindString || f.kind > KindBool {
			return dst, names, fmt.Errorf("attribute %q: value is unset; give it with Str, Int, Float or Bool", f.Name)
		}
		size += protowire.SizeTag(fieldMessageAttributes) + protowire.SizeBytes(fieldSize(f))
		sorted = sorted && (i == 0 || m.Fields[i-1].Name < f.Name)
	}
	names = names[:0]
	if !sorted {
		// Not strictly increasing: out of order, or a name given twice.
		for _, f := range m.Fields {
			names = append(names, f.Name)
		}
		slices.Sort(names)
		for i := 1; i < len(names); i++ {
			if names[i] == names[i-1] {
				return dst, names, fmt.Errorf("attribute %q given twice", names[i])
			}
		}
	}
	dst = protowire.AppendTag(dst, fieldRequestBatch, protowire.BytesType)
	dst = protowire.AppendVarint(dst, uint64(size))
	if sorted || len(m.Fields) > maxSortedFields {
		for _, f := range m.Fields {
			dst = appendField(dst, f)
		}
	} else {
		for _, name := range names {
			for _, f := range m.Fields {
				if f.Name == name {
					dst = appendField(dst, f)
					break
				}
			}
		}
	}
	return appendMessageTail(dst, m, cc), names, nil
}

// maxSortedFields bounds the Fields appendFieldsEntry sorts, by a search
// per name: quadratic, so kept to messages of a few dozen attributes, and
// larger ones are left to the brokers.
const maxSortedFields = 32

// appendField appends f as a Message.attributes field.
func appendField(dst []byte, f Field) []byte {
	dst = protowire.AppendTag(dst, fieldMessageAttributes, protowire.BytesType)
	dst = protowire.AppendVarint(dst, uint64(fieldSize(f)))
	dst = protowire.AppendTag(dst, fieldAttributeName, protowire.BytesType)
	dst = protowire.AppendString(dst, f.Name)
	dst = protowire.AppendTag(dst, fieldAttributeValue, protowire.BytesType)
	dst = protowire.AppendVarint(dst, uint64(fieldValueSize(f)))
	switch f.kind {
	case KindString:
		dst = protowire.AppendTag(dst, fieldValueString, protowire.BytesType)
		dst = protowire.AppendString(dst, f.s)
	case KindInt:
		dst = protowire.AppendTag(dst, fieldValueInt, protowire.VarintType)
		dst = protowire.AppendVarint(dst, protowire.EncodeZigZag(int64(f.bits)))
	case KindFloat:
		dst = protowire.AppendTag(dst, fieldValueFloat, protowire.Fixed64Type)
		dst = protowire.AppendFixed64(dst, f.bits)
	case KindBool:
		dst = protowire.AppendTag(dst, fieldValueBool, protowire.VarintType)
		dst = protowire.AppendVarint(dst, f.bits)
	}
	return dst
}

// fieldSize is the size of a drip.v1.Attribute holding f.
func fieldSize(f Field) int {
	return protowire.SizeTag(fieldAttributeName) + protowire.SizeBytes(len(f.Name)) +
		protowire.SizeTag(fieldAttributeValue) + protowire.SizeBytes(fieldValueSize(f))
}

// fieldValueSize is the size of a drip.v1.Value holding f's value.
func fieldValueSize(f Field) int {
	switch f.kind {
	case KindString:
		return protowire.SizeTag(fieldValueString) + protowire.SizeBytes(len(f.s))
	case KindInt:
		return protowire.SizeTag(fieldValueInt) + protowire.SizeVarint(protowire.EncodeZigZag(int64(f.bits)))
	case KindFloat:
		return protowire.SizeTag(fieldValueFloat) + protowire.SizeFixed64()
	default:
		return protowire.SizeTag(fieldValueBool) + protowire.SizeVarint(f.bits)
	}
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
	tail, err := tailSize(m, nil)
	if err != nil {
		return names, 0, err
	}
	return names, size + tail, nil
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
// b, which the caller hands over for good. With fields, each message's
// attributes are Fields, all of one event's in one space, not a map.
func deliveriesFromWire(b []byte, into []Delivery, fields bool) ([]Delivery, bool, error) {
	var space *Fields
	if fields {
		space = &Fields{}
	}
	num, typ, n := wire.ConsumeTag(b)
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
		d, err := deliveryFromWire(body, space)
		if err != nil {
			return into, true, err
		}
		return append(into, d), true, nil
	case fieldDeliveryBatch:
		first := true
		for len(body) > 0 {
			num, typ, n := wire.ConsumeTag(body)
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
			d, err := deliveryFromWire(p, space)
			if err != nil {
				return into, true, err
			}
			into = append(into, d)
			if first && space != nil {
				// Room for the rest if they are like the first: grown
				// from 16 by doubling, the space allocated about twice
				// what it came to hold.
				first = false
				if est := len(d.Fields) * (len(body)/n + 1); est > cap(*space)-len(*space) {
					*space = make(Fields, 0, est)
				}
			}
		}
		return into, true, nil
	}
	return into, false, nil
}

var errMalformed = fmt.Errorf("malformed protobuf")

// deliveryFromWire decodes a drip.v1.Published: its attributes into an
// Attrs map, or appended to space if not nil.
func deliveryFromWire(b []byte, space *Fields) (Delivery, error) {
	d := Delivery{size: len(b)}
	var msg []byte
	hasMsg := false
	for len(b) > 0 {
		num, typ, n := wire.ConsumeTag(b)
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
		case num == fieldPublishedMarked && typ == protowire.VarintType:
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return d, errMalformed
			}
			b, d.marked = b[n:], v != 0
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
	m, cc, err := messageFromWire(msg, space)
	d.Message, d.congestion = m, cc
	return d, err
}

// messageFromWire decodes a delivered drip.v1.Message, rejecting what no
// broker should send, and returns its congestion header undecoded. Its
// attributes go into an Attrs map, or are appended to space if not nil,
// the message's Fields then a part of space that later appends leave be.
func messageFromWire(b []byte, space *Fields) (Message, []byte, error) {
	if space != nil {
		if m, cc, ok := fieldsFromWireOnce(b, space); ok {
			return m, cc, nil
		}
	}
	return messageFromWireChecked(b, space)
}

// fieldsFromWireOnce is messageFromWire into space in one pass, for
// messages without errors: ok is false at the first thing wrong, and
// space is as it was but for its array, which may have grown.
func fieldsFromWireOnce(b []byte, space *Fields) (Message, []byte, bool) {
	var m Message
	var cc []byte
	start := len(*space)
	fail := func() (Message, []byte, bool) {
		*space = (*space)[:start]
		return Message{}, nil, false
	}
	for len(b) > 0 {
		num, typ, n := wire.ConsumeTag(b)
		if n < 0 {
			return fail()
		}
		b = b[n:]
		if typ == protowire.BytesType && (num == fieldMessageAttributes || num == fieldMessagePayload || num == fieldMessageCongestion) {
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return fail()
			}
			b = b[n:]
			switch num {
			case fieldMessagePayload:
				m.Payload = v
				continue
			case fieldMessageCongestion:
				cc = v
				continue
			}
			name, value, err := attributeFromWire(v)
			if err != nil || name == "" || value.kind == 0 {
				return fail()
			}
			if _, dup := (*space)[start:].Get(name); dup {
				return fail()
			}
			if len(*space) == cap(*space) {
				// This message's fields move to a new array; the
				// messages before it keep theirs.
				grown := make(Fields, 0, max(2*cap(*space), 2*(len(*space)-start), 16))
				*space = append(grown, (*space)[start:]...)
				start = 0
			}
			value.Name = name
			*space = append(*space, value)
			continue
		}
		if num == fieldMessageDeadline && typ == protowire.VarintType {
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return fail()
			}
			b, m.Deadline = b[n:], time.Duration(v)
			continue
		}
		if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
			return fail()
		}
		b = b[n:]
	}
	m.Fields = (*space)[start:len(*space):len(*space)]
	return m, cc, true
}

// messageFromWireChecked is messageFromWire in two passes: the first
// checks the structure and counts the attributes (for the map's size),
// the second decodes them.
func messageFromWireChecked(b []byte, space *Fields) (Message, []byte, error) {
	count := 0
	for rest := b; len(rest) > 0; {
		num, typ, n := wire.ConsumeTag(rest)
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
	var m Message
	start := 0
	if space == nil {
		m.Attrs = make(Attrs, count)
	} else {
		if cap(*space)-len(*space) < count {
			*space = make(Fields, 0, max(2*cap(*space), count, 16))
		}
		start = len(*space)
	}
	var cc []byte
	i := 0
	for len(b) > 0 {
		num, typ, n := wire.ConsumeTag(b)
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
			if value.kind == 0 {
				return Message{}, nil, fmt.Errorf("attribute %q has no value", name)
			}
			if space == nil {
				if _, dup := m.Attrs[name]; dup {
					return Message{}, nil, fmt.Errorf("attribute %q given twice", name)
				}
				m.Attrs[name] = value.Value()
			} else {
				if _, dup := (*space)[start:].Get(name); dup {
					return Message{}, nil, fmt.Errorf("attribute %q given twice", name)
				}
				value.Name = name
				*space = append(*space, value)
			}
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
	if space != nil {
		m.Fields = (*space)[start:len(*space):len(*space)]
	}
	return m, cc, nil
}

// attributeFromWire decodes a drip.v1.Attribute: its name, and its value
// as a Field without a name (kind 0: unset).
func attributeFromWire(b []byte) (string, Field, error) {
	var name string
	var value Field
	// The layout brokers pass on from encoders, a name and then a value,
	// each shorter than 128 bytes, is read without the general loop, to
	// the same result and errors.
	if n, rest, ok := wire.ShortField(b, wire.TagAttributeName); ok {
		if v, rest, ok := wire.ShortField(rest, wire.TagAttributeValue); ok && len(rest) == 0 {
			if !utf8.Valid(n) {
				return "", Field{}, fmt.Errorf("attribute name is not valid UTF-8")
			}
			name = alias(n)
			x, err := valueFromWire(v)
			if err != nil {
				return "", Field{}, fmt.Errorf("attribute %q: %w", name, err)
			}
			return name, x, nil
		}
	}
	for len(b) > 0 {
		num, typ, n := wire.ConsumeTag(b)
		if n < 0 {
			return "", Field{}, errMalformed
		}
		b = b[n:]
		switch {
		case num == fieldAttributeName && typ == protowire.BytesType:
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return "", Field{}, errMalformed
			}
			if !utf8.Valid(v) {
				return "", Field{}, fmt.Errorf("attribute name is not valid UTF-8")
			}
			b, name = b[n:], alias(v)
		case num == fieldAttributeValue && typ == protowire.BytesType:
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return "", Field{}, errMalformed
			}
			b = b[n:]
			x, err := valueFromWire(v)
			if err != nil {
				return "", Field{}, fmt.Errorf("attribute %q: %w", name, err)
			}
			if x.kind != 0 {
				value = x
			}
		default:
			n := protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return "", Field{}, errMalformed
			}
			b = b[n:]
		}
	}
	return name, value, nil
}

// valueFromWire decodes a drip.v1.Value as a Field without a name (kind
// 0: unset).
func valueFromWire(b []byte) (Field, error) {
	// A value that is one field, as encoders write it, is read directly.
	if len(b) >= 2 {
		switch b[0] {
		case wire.TagValueString:
			if b[1] < 0x80 && int(b[1]) == len(b)-2 {
				if !utf8.Valid(b[2:]) {
					return Field{}, fmt.Errorf("string value is not valid UTF-8")
				}
				return Field{kind: KindString, s: alias(b[2:])}, nil
			}
		case wire.TagValueInt:
			if x, n := protowire.ConsumeVarint(b[1:]); n == len(b)-1 {
				return Field{kind: KindInt, bits: uint64(protowire.DecodeZigZag(x))}, nil
			}
		case wire.TagValueFloat:
			if len(b) == 9 {
				return Field{kind: KindFloat, bits: binary.LittleEndian.Uint64(b[1:])}, nil
			}
		case wire.TagValueBool:
			if len(b) == 2 && b[1] < 0x80 {
				return Field{kind: KindBool, bits: uint64(min(b[1], 1))}, nil
			}
		}
	}
	var v Field
	for len(b) > 0 {
		num, typ, n := wire.ConsumeTag(b)
		if n < 0 {
			return Field{}, errMalformed
		}
		b = b[n:]
		switch {
		case num == fieldValueString && typ == protowire.BytesType:
			s, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return Field{}, errMalformed
			}
			if !utf8.Valid(s) {
				return Field{}, fmt.Errorf("string value is not valid UTF-8")
			}
			b, v = b[n:], Field{kind: KindString, s: alias(s)}
		case num == fieldValueInt && typ == protowire.VarintType:
			x, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return Field{}, errMalformed
			}
			b, v = b[n:], Field{kind: KindInt, bits: uint64(protowire.DecodeZigZag(x))}
		case num == fieldValueFloat && typ == protowire.Fixed64Type:
			x, n := protowire.ConsumeFixed64(b)
			if n < 0 {
				return Field{}, errMalformed
			}
			b, v = b[n:], Field{kind: KindFloat, bits: x}
		case num == fieldValueBool && typ == protowire.VarintType:
			x, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return Field{}, errMalformed
			}
			b, v = b[n:], Field{kind: KindBool}
			if protowire.DecodeBool(x) {
				v.bits = 1
			}
		default:
			n := protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return Field{}, errMalformed
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
