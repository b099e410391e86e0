package client

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	dripv1 "github.com/dripmesh/drip/api/proto/drip/v1"
)

// FuzzMessageFromWire: whatever bytes a broker sends as a message, the
// delivery decoder never panics, fails wherever protobuf fails, and
// otherwise gives protobuf's attributes and payload, into Attrs and into
// Fields alike.
func FuzzMessageFromWire(f *testing.F) {
	var fs Fields
	fs.Str("s", "x\x00y").Int("i", -5).Float("f", -0.5).Bool("b", true).Str("long", string(make([]byte, 130)))
	for _, m := range []Message{{Fields: fs, Payload: []byte("p")}, {Attrs: Attrs{"a": 1, "b": "x"}}} {
		entry, _, err := appendBatchEntry(nil, m, []byte{0x10, 0x2a}, nil)
		require.NoError(f, err)
		var req dripv1.PublishRequest
		require.NoError(f, proto.Unmarshal(entry, &req))
		raw, err := proto.Marshal(req.Batch[0])
		require.NoError(f, err)
		f.Add(raw)
	}
	// A string of 128 bytes has a length of two bytes, 0x80 0x01: read as
	// one byte, it would look like a string of the 128 bytes after it.
	long := append([]byte{0x0a, 0x80}, bytes.Repeat([]byte{0x01}, 128)...)
	attr := protowire.AppendBytes(protowire.AppendTag(nil, fieldAttributeName, protowire.BytesType), []byte("a"))
	attr = protowire.AppendBytes(protowire.AppendTag(attr, fieldAttributeValue, protowire.BytesType), long)
	f.Add(protowire.AppendBytes(protowire.AppendTag(nil, fieldMessageAttributes, protowire.BytesType), attr))
	f.Add([]byte{0x0a, 0x06, 0x0a, 0x01, 'a', 0x12, 0x01, 0x20})
	f.Add([]byte{0x0a, 0x07, 0x0a, 0x01, 'a', 0x12, 0x02, 0x0a, 0x80})
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) > 4<<10 {
			return // bounds the time per input; long inputs add nothing new
		}
		asMap, _, mapErr := messageFromWire(b, nil)
		var space Fields
		asFields, _, fieldsErr := messageFromWire(b, &space)
		require.Equal(t, mapErr == nil, fieldsErr == nil, "map: %v, fields: %v", mapErr, fieldsErr)
		var pm dripv1.Message
		if err := proto.Unmarshal(b, &pm); err != nil {
			require.Error(t, mapErr, "protobuf failed with %v", err)
			return
		}
		if mapErr != nil {
			return // valid protobuf that no broker sends: an empty name, no value, a name twice
		}
		want := Attrs{}
		for _, a := range pm.Attributes {
			switch v := a.GetValue().GetKind().(type) {
			case *dripv1.Value_StringValue:
				want[a.Name] = v.StringValue
			case *dripv1.Value_IntValue:
				want[a.Name] = v.IntValue
			case *dripv1.Value_FloatValue:
				want[a.Name] = v.FloatValue
			case *dripv1.Value_BoolValue:
				want[a.Name] = v.BoolValue
			}
		}
		require.Equal(t, want, asMap.Attrs)
		require.Equal(t, want, asFields.Fields.Attrs())
		require.Equal(t, string(pm.Payload), string(asMap.Payload))
	})
}

// Messages decoded one after another into one space keep their own
// fields, however the space grows under them.
func TestFieldsSpaceKeepsEarlierMessages(t *testing.T) {
	var raws [][]byte
	for i := range 40 {
		var fs Fields
		for j := range i % 7 {
			fs.Int(string(rune('a'+j)), int64(i*10+j))
		}
		fs.Str("s", string(rune('A'+i%26)))
		entry, _, err := appendBatchEntry(nil, Message{Fields: fs}, nil, nil)
		require.NoError(t, err)
		_, _, n := protowire.ConsumeTag(entry)
		msg, _ := protowire.ConsumeBytes(entry[n:])
		raws = append(raws, msg)
	}
	space := make(Fields, 0, 3)
	var got []Message
	for _, raw := range raws {
		m, _, err := messageFromWire(raw, &space)
		require.NoError(t, err)
		got = append(got, m)
	}
	for i, raw := range raws {
		alone, _, err := messageFromWire(raw, nil)
		require.NoError(t, err)
		require.Equal(t, alone.Attrs, got[i].Fields.Attrs(), "message %d after the rest were decoded", i)
	}
}

// Fields out of order are encoded sorted up to maxSortedFields, and as
// given beyond, which brokers sort; a name given twice is refused either
// way.
func TestFieldsSortedOnTheWire(t *testing.T) {
	for _, n := range []int{3, maxSortedFields, maxSortedFields + 1} {
		var fs Fields
		for i := n - 1; i >= 0; i-- {
			fs.Int(fmt.Sprintf("a%03d", i), int64(i))
		}
		entry, _, err := appendBatchEntry(nil, Message{Fields: fs}, nil, nil)
		require.NoError(t, err)
		_, _, k := protowire.ConsumeTag(entry)
		raw, _ := protowire.ConsumeBytes(entry[k:])
		var space Fields
		m, _, err := messageFromWire(raw, &space)
		require.NoError(t, err)
		require.Equal(t, fs.Attrs(), m.Fields.Attrs())
		sorted := slices.IsSortedFunc(m.Fields, func(a, b Field) int { return strings.Compare(a.Name, b.Name) })
		require.Equal(t, n <= maxSortedFields, sorted, "%d fields", n)

		_, _, err = appendBatchEntry(nil, Message{Fields: *fs.Int("a000", 1)}, nil, nil)
		require.ErrorContains(t, err, `attribute "a000" given twice`)
	}
}
