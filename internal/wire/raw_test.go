package wire_test

import (
	"bytes"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	dripv1 "github.com/dripmesh/drip/api/proto/drip/v1"
	"github.com/dripmesh/drip/internal/clientapi"
	"github.com/dripmesh/drip/internal/content"
	"github.com/dripmesh/drip/internal/wire"
	"github.com/dripmesh/drip/internal/workload"
)

// decodeReference is the protobuf path wire.DecodeMessage replaces.
func decodeReference(b []byte, l wire.MessageLimits) (content.Message, error) {
	var pm dripv1.Message
	if err := proto.Unmarshal(b, &pm); err != nil {
		return content.Message{}, err
	}
	return clientapi.MessageFromProto(&pm, l)
}

func marshal(t testing.TB, m proto.Message) []byte {
	b, err := proto.Marshal(m)
	require.NoError(t, err)
	return b
}

func val(kind any) *dripv1.Value {
	switch k := kind.(type) {
	case string:
		return &dripv1.Value{Kind: &dripv1.Value_StringValue{StringValue: k}}
	case int64:
		return &dripv1.Value{Kind: &dripv1.Value_IntValue{IntValue: k}}
	case float64:
		return &dripv1.Value{Kind: &dripv1.Value_FloatValue{FloatValue: k}}
	case bool:
		return &dripv1.Value{Kind: &dripv1.Value_BoolValue{BoolValue: k}}
	}
	return &dripv1.Value{}
}

// TestDecodeMessageMatchesProtobuf: on valid and invalid messages alike,
// wire.DecodeMessage gives what protobuf decoding and MessageFromProto give,
// errors included.
func TestDecodeMessageMatchesProtobuf(t *testing.T) {
	limits := wire.MessageLimits{MaxAttributes: 4, MaxName: 8, MaxString: 10, MaxPayload: 16}
	for _, tc := range []struct {
		name string
		msg  *dripv1.Message
	}{
		{"empty", &dripv1.Message{}},
		{"every kind", &dripv1.Message{Attributes: []*dripv1.Attribute{
			{Name: "s", Value: val("x\x00y")}, {Name: "i", Value: val(int64(-5))}, {Name: "f", Value: val(-0.5)}, {Name: "b", Value: val(true)},
		}, Payload: []byte("pay")}},
		{"unsorted", &dripv1.Message{Attributes: []*dripv1.Attribute{{Name: "z", Value: val(int64(1))}, {Name: "a", Value: val(int64(2))}}}},
		{"too many", &dripv1.Message{Attributes: []*dripv1.Attribute{{Name: "a", Value: val(true)}, {Name: "b", Value: val(true)}, {Name: "c", Value: val(true)}, {Name: "d", Value: val(true)}, {Name: "e", Value: val(true)}}}},
		{"long name", &dripv1.Message{Attributes: []*dripv1.Attribute{{Name: "longername", Value: val(true)}}}},
		{"unset value", &dripv1.Message{Attributes: []*dripv1.Attribute{{Name: "a"}}}},
		{"empty value", &dripv1.Message{Attributes: []*dripv1.Attribute{{Name: "a", Value: &dripv1.Value{}}}}},
		{"long string", &dripv1.Message{Attributes: []*dripv1.Attribute{{Name: "a", Value: val("0123456789x")}}}},
		{"empty name", &dripv1.Message{Attributes: []*dripv1.Attribute{{Name: "", Value: val(true)}}}},
		{"twice", &dripv1.Message{Attributes: []*dripv1.Attribute{{Name: "b", Value: val(true)}, {Name: "a", Value: val(true)}, {Name: "b", Value: val(false)}}}},
		{"long payload", &dripv1.Message{Payload: make([]byte, 17)}},
		{"NaN", &dripv1.Message{Attributes: []*dripv1.Attribute{{Name: "f", Value: val(math.NaN())}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := marshal(t, tc.msg)
			want, wantErr := decodeReference(b, limits)
			got, err := wire.DecodeMessage(b, limits)
			if wantErr != nil {
				require.Error(t, err)
				assert.Equal(t, wantErr.Error(), err.Error())
				return
			}
			require.NoError(t, err)
			assert.Equal(t, want.String(), got.String())
			assert.Equal(t, want.Payload, got.Payload)
		})
	}
}

// TestDecodeMessageWorkload: the seed workload's messages decode alike.
func TestDecodeMessageWorkload(t *testing.T) {
	gen, err := workload.New(workload.Default())
	require.NoError(t, err)
	for _, m := range gen.Messages(500) {
		b := marshal(t, clientapi.MessageToProto(m))
		got, err := wire.DecodeMessage(b, wire.DefaultMessageLimits())
		require.NoError(t, err)
		require.Equal(t, m.String(), got.String())
	}
}

// FuzzDecodeMessage: whatever bytes arrive, wire.DecodeMessage never panics,
// fails exactly when the protobuf path fails, and otherwise decodes the
// same message.
func FuzzDecodeMessage(f *testing.F) {
	gen, err := workload.New(workload.Default())
	require.NoError(f, err)
	for _, m := range gen.Messages(5) {
		f.Add(marshal(f, clientapi.MessageToProto(m)))
	}
	f.Add([]byte{0x0a, 0x02, 0x12, 0x00})
	f.Add(marshal(f, &dripv1.Message{DeadlineNs: 50e6, Payload: []byte("p")}))
	limits := wire.MessageLimits{MaxAttributes: 8, MaxName: 16, MaxString: 32, MaxPayload: 64}
	f.Fuzz(func(t *testing.T, b []byte) {
		want, wantErr := decodeReference(b, limits)
		got, err := wire.DecodeMessage(append([]byte(nil), b...), limits)
		if wantErr != nil {
			require.Error(t, err, "protobuf failed with %v", wantErr)
			return
		}
		require.NoError(t, err)
		require.Equal(t, want.String(), got.String())
		require.Equal(t, string(want.Payload), string(got.Payload))
		// The deadline is what protobuf reads, or refused when negative.
		var pb dripv1.Message
		require.NoError(t, proto.Unmarshal(b, &pb))
		_, d, err := wire.DecodeMessageDeadline(append([]byte(nil), b...), limits)
		if pb.GetDeadlineNs() < 0 {
			require.ErrorContains(t, err, "message deadline")
			return
		}
		require.NoError(t, err)
		require.Equal(t, pb.GetDeadlineNs(), int64(d))
	})
}

// A Decoder decodes a request's messages into space it reuses: every
// message equals its own decoding until Reset, however the space grew
// under it and whatever refused messages came between, and a request no
// larger than one before allocates nothing.
func TestDecoderKeepsEarlierMessages(t *testing.T) {
	gen, err := workload.New(workload.Default())
	require.NoError(t, err)
	limits := wire.DefaultMessageLimits()
	var raws, good [][]byte
	for i, m := range gen.Messages(300) {
		raws = append(raws, marshal(t, clientapi.MessageToProto(m)))
		good = append(good, raws[len(raws)-1])
		if i%7 == 0 { // refused halfway through its attributes
			bad := clientapi.MessageToProto(m)
			bad.Attributes = append(bad.Attributes, &dripv1.Attribute{Name: ""})
			raws = append(raws, marshal(t, bad))
		}
	}
	var d wire.Decoder
	for _, request := range [][2]int{{0, 10}, {10, 200}, {200, len(raws)}, {0, 10}} {
		d.Reset()
		var got []content.Message
		var want []string
		for _, b := range raws[request[0]:request[1]] {
			ref, refErr := decodeReference(b, limits)
			m, _, err := d.Decode(b, limits)
			if refErr != nil {
				require.EqualError(t, err, refErr.Error())
				continue
			}
			require.NoError(t, err)
			got, want = append(got, m), append(want, ref.String())
		}
		for i, m := range got {
			require.Equal(t, want[i], m.String(), "message %d of the request, after the rest were decoded", i)
		}
	}
	allocs := testing.AllocsPerRun(10, func() {
		d.Reset()
		for _, b := range good[:10] {
			_, _, _ = d.Decode(b, limits)
		}
	})
	assert.Zero(t, allocs)
}

func TestPublishRequestMessages(t *testing.T) {
	m := func(n int64) *dripv1.Message {
		return &dripv1.Message{Attributes: []*dripv1.Attribute{{Name: "n", Value: val(n)}}}
	}
	for _, req := range []*dripv1.PublishRequest{
		{Message: m(1)},
		{Batch: []*dripv1.Message{m(1), m(2), m(3)}},
		{Message: m(0), Batch: []*dripv1.Message{m(1), m(2)}},
		{},
	} {
		var got []int64
		batched, err := wire.PublishRequestMessages(marshal(t, req), func(b []byte) error {
			msg, err := wire.DecodeMessage(b, wire.DefaultMessageLimits())
			require.NoError(t, err)
			v, _ := msg.Get("n")
			got = append(got, v.Int())
			return nil
		})
		require.NoError(t, err)
		assert.Equal(t, len(req.Batch) > 0, batched)
		var want []int64
		if req.Message != nil {
			want = append(want, req.Message.Attributes[0].Value.GetIntValue())
		}
		for _, b := range req.Batch {
			want = append(want, b.Attributes[0].Value.GetIntValue())
		}
		assert.Equal(t, want, got)
	}
	_, err := wire.PublishRequestMessages([]byte{0x12, 0x05, 1}, func([]byte) error { return nil })
	assert.Error(t, err)
}

// TestAppendPublishedAndDeliveries: the appended wire forms decode, with
// protobuf, to what they stand for.
func TestAppendPublishedAndDeliveries(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	msg := &dripv1.Message{Attributes: []*dripv1.Attribute{{Name: "a", Value: val("x")}}, Payload: []byte{1, 2}}
	raw := marshal(t, msg)
	var pubs []*wire.Published
	var want []*dripv1.Published
	for range 5 {
		p := &dripv1.Published{Message: msg, IngressRouter: rng.Uint32N(4), PublishedUnixNano: rng.Int64(), Hops: rng.Uint32N(3),
			IngressEpoch: rng.Uint64(), Seq: rng.Uint64N(3), ElapsedNs: rng.Int64N(3) - 1, CongestionExperienced: rng.IntN(2) == 0}
		pub := wire.NewPublished(raw, wire.PublishedHeader{Ingress: p.IngressRouter, PublishedAt: p.PublishedUnixNano, Hops: p.Hops,
			Epoch: p.IngressEpoch, Seq: p.Seq, Elapsed: p.ElapsedNs, Marked: p.CongestionExperienced})
		b := pub.Append(nil)
		require.Len(t, b, pub.Size())
		var back dripv1.Published
		require.NoError(t, proto.Unmarshal(b, &back))
		require.True(t, proto.Equal(p, &back), "%v != %v", p, &back)
		pubs, want = append(pubs, &pub), append(want, p)
	}
	var one dripv1.Delivery
	d := wire.AppendDelivery(nil, pubs[0])
	require.Len(t, d, wire.DeliverySize(pubs[0]))
	require.NoError(t, proto.Unmarshal(d, &one))
	assert.True(t, proto.Equal(want[0], one.GetMessage()))
	batch := wire.AppendDeliveryBatch(nil, pubs)
	assert.Len(t, batch, wire.DeliveryBatchSize(pubs))
	var many dripv1.Delivery
	require.NoError(t, proto.Unmarshal(batch, &many))
	require.Len(t, many.GetBatch().GetMessages(), 5)
	for i, p := range many.GetBatch().GetMessages() {
		assert.True(t, proto.Equal(want[i], p))
	}
}

// TestPublishedHeaderFitsInline: the largest header (every field at its
// widest varint) fits the space a Published holds inline, and decodes.
func TestPublishedHeaderFitsInline(t *testing.T) {
	h := wire.PublishedHeader{Ingress: math.MaxUint32, PublishedAt: math.MinInt64, Hops: math.MaxUint32,
		Epoch: math.MaxUint64, Seq: math.MaxUint64, Elapsed: math.MinInt64, Marked: true}
	msg := marshal(t, &dripv1.Message{Payload: []byte{1}})
	pub := wire.NewPublished(msg, h)
	b := pub.Append(nil)
	require.Len(t, b, pub.Size())
	assert.Equal(t, wire.AppendPublished(nil, msg, h), b)
	var back dripv1.Published
	require.NoError(t, proto.Unmarshal(b, &back))
	assert.Equal(t, uint64(math.MaxUint64), back.GetSeq())
	assert.Equal(t, int64(math.MinInt64), back.GetElapsedNs())
	assert.True(t, back.GetCongestionExperienced())
}

func BenchmarkDecodeMessage(b *testing.B) {
	gen, err := workload.New(workload.Default())
	require.NoError(b, err)
	raw := marshal(b, clientapi.MessageToProto(gen.Message()))
	b.Run("wire", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := wire.DecodeMessage(raw, wire.DefaultMessageLimits()); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("protobuf", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := decodeReference(raw, wire.DefaultMessageLimits()); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkDecoder is a publish stream's decoding: the broker benchmarks'
// message (a string, a float, an int and 16 bytes of payload) into reused
// space.
func BenchmarkDecoder(b *testing.B) {
	raw := marshal(b, &dripv1.Message{Attributes: []*dripv1.Attribute{
		{Name: "price", Value: val(12.5)}, {Name: "symbol", Value: val("DRIP")}, {Name: "volume", Value: val(int64(5000))},
	}, Payload: make([]byte, 16)})
	limits := wire.DefaultMessageLimits()
	var d wire.Decoder
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if i++; i%1024 == 0 {
			d.Reset()
		}
		if _, _, err := d.Decode(raw, limits); err != nil {
			b.Fatal(err)
		}
	}
}

// The decoders' fast paths read the layouts encoders write; these are the
// edges where a byte looks like that layout and is not, against protobuf.
func TestDecodeMessageFastPathEdges(t *testing.T) {
	limits := wire.DefaultMessageLimits()
	str := func(n int) []byte { return append([]byte{0x0a, byte(n)}, bytes.Repeat([]byte("s"), n)...) }
	attr := func(name string, value []byte) []byte {
		b := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), []byte(name))
		return protowire.AppendBytes(protowire.AppendTag(b, 2, protowire.BytesType), value)
	}
	msg := func(attrs ...[]byte) []byte {
		var b []byte
		for _, a := range attrs {
			b = protowire.AppendBytes(protowire.AppendTag(b, 1, protowire.BytesType), a)
		}
		return b
	}
	// A string of 128 bytes has a length of two bytes, 0x80 0x01: read as
	// one byte, it would look like a string of the 128 bytes after it.
	long := append([]byte{0x0a, 0x80}, bytes.Repeat([]byte{0x01}, 128)...)
	for _, tc := range []struct {
		name string
		b    []byte
	}{
		{"string", msg(attr("a", str(3)))},
		{"int", msg(attr("a", []byte{0x10, 0x96, 0x01}))},
		{"float", msg(attr("a", append([]byte{0x19}, 0, 0, 0, 0, 0, 0, 0xf0, 0x3f)))},
		{"bool", msg(attr("a", []byte{0x20, 0x01}))},
		{"bool as a long varint", msg(attr("a", []byte{0x20, 0x81, 0x00}))},
		{"string length of two bytes", msg(attr("a", long))},
		{"string of 128 bytes", msg(attr("a", append([]byte{0x0a, 0x80, 0x01}, bytes.Repeat([]byte("s"), 128)...)))},
		{"name of 128 bytes", msg(attr(strings.Repeat("n", 128), str(1)))},
		{"value then name", msg(append([]byte{0x12, 0x02, 0x20, 0x01}, 0x0a, 0x01, 'a'))},
		{"name given twice", msg(append(attr("a", []byte{0x20, 0x01}), 0x0a, 0x01, 'b'))},
		{"value given twice", msg(append(attr("a", []byte{0x20, 0x01}), 0x12, 0x02, 0x10, 0x02))},
		{"value with a trailing field", msg(attr("a", []byte{0x20, 0x01, 0x10, 0x02}))},
		{"invalid UTF-8 name", msg(attr("\xff", []byte{0x20, 0x01}))},
		{"invalid UTF-8 string", msg(attr("a", []byte{0x0a, 0x01, 0xff}))},
		{"truncated value", msg(attr("a", []byte{0x19, 0x00}))},
		{"attribute length past the end", []byte{0x0a, 0x05, 0x0a, 0x01, 'a'}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want, wantErr := decodeReference(tc.b, limits)
			got, err := wire.DecodeMessage(tc.b, limits)
			if wantErr != nil {
				require.Error(t, err, "protobuf: %v", wantErr)
				if proto.Unmarshal(tc.b, &dripv1.Message{}) == nil {
					// Well-formed, refused by MessageFromProto: the same words.
					assert.Equal(t, wantErr.Error(), err.Error())
				}
				return
			}
			require.NoError(t, err)
			assert.Equal(t, want.String(), got.String())
		})
	}
}
