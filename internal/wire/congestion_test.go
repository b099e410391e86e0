package wire

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	dripv1 "github.com/dripmesh/drip/api/proto/drip/v1"
	"github.com/dripmesh/drip/internal/congestion"
	"github.com/dripmesh/drip/internal/content"
	"github.com/dripmesh/drip/internal/encoding"
)

// decodeHeader decodes a header into a fresh one.
func decodeHeader(b []byte) (congestion.Header, error) {
	var h congestion.Header
	err := DecodeCongestionHeader(b, &h)
	return h, err
}

func ccBloom(t testing.TB, attrs ...content.Attribute) encoding.Bloom {
	m, err := content.NewMessage(attrs, nil)
	require.NoError(t, err)
	return CongestionParams.EncodeMessage(m)
}

func sampleHeader(t testing.TB) congestion.Header {
	at := time.Unix(0, 1_700_000_000_123_456_789)
	return congestion.Header{
		Publisher: 0xfeedface_cafebabe, Seq: 42, SentAt: at, Rate: 1234.5,
		Record: []encoding.Bloom{
			ccBloom(t, content.Attribute{Name: "a", Value: content.Int(1)}),
			ccBloom(t, content.Attribute{Name: "b", Value: content.String("x")}),
		},
		Tags:   []congestion.Tag{{Subscriber: 7, Filter: 3, Feedback: -5 * time.Second}, {Subscriber: math.MaxUint64, Filter: 0, Feedback: 12 * time.Millisecond}},
		Echoes: []congestion.EchoReply{{Subscriber: 9, SentAt: at.Add(-time.Second), Held: 3 * time.Millisecond}},
		Stamps: []congestion.Stamp{{Subscriber: 7, Seq: 1}, {Subscriber: math.MaxUint64, Seq: 1 << 40}},
	}
}

// TestCongestionHeaderRoundTrip: the hand-written encoding is the
// generated one's, both ways.
func TestCongestionHeaderRoundTrip(t *testing.T) {
	h := sampleHeader(t)
	b := AppendCongestionHeader(nil, &h)
	got, err := decodeHeader(b)
	require.NoError(t, err)
	assert.Equal(t, h.Publisher, got.Publisher)
	assert.Equal(t, h.Seq, got.Seq)
	assert.True(t, h.SentAt.Equal(got.SentAt))
	assert.Equal(t, h.Rate, got.Rate)
	assert.Equal(t, h.Record, got.Record)
	assert.Equal(t, h.Tags, got.Tags)
	require.Len(t, got.Echoes, 1)
	assert.True(t, h.Echoes[0].SentAt.Equal(got.Echoes[0].SentAt))
	assert.Equal(t, h.Echoes[0].Held, got.Echoes[0].Held)
	assert.Equal(t, h.Stamps, got.Stamps)

	var pb dripv1.CongestionHeader
	require.NoError(t, proto.Unmarshal(b, &pb))
	assert.Equal(t, h.Publisher, pb.Publisher)
	assert.Equal(t, h.SentAt.UnixNano(), pb.SentAtUnixNano)
	assert.Equal(t, int64(-5*time.Second), pb.Tags[0].FeedbackNs)
	assert.Len(t, pb.Record[0], 64)
	require.Len(t, pb.Stamps, 2)
	assert.Equal(t, uint64(1<<40), pb.Stamps[1].Seq)
	again, err := proto.Marshal(&pb)
	require.NoError(t, err)
	assert.Equal(t, b, again, "the generated code encodes the same bytes")
	assert.Less(t, len(b), 300)
}

func TestCongestionHeaderErrors(t *testing.T) {
	for name, c := range map[string]struct {
		pb   *dripv1.CongestionHeader
		want string
	}{
		"NaN rate":      {&dripv1.CongestionHeader{Rate: math.NaN()}, "publish rate NaN is not a rate"},
		"negative rate": {&dripv1.CongestionHeader{Rate: -1}, "publish rate -1 is not a rate"},
		"short record":  {&dripv1.CongestionHeader{Record: [][]byte{make([]byte, 63)}}, "record entry 0: encoding: Bloom wire form is 63 bytes, want 64"},
		"long record":   {&dripv1.CongestionHeader{Record: make([][]byte, congestion.MaxRecordSize+1)}, "record entry 0"},
		"many tags":     {&dripv1.CongestionHeader{Tags: make([]*dripv1.CongestionTag, maxHeaderTags+1)}, "more than 64 tags"},
		"many echoes":   {&dripv1.CongestionHeader{Echoes: make([]*dripv1.CongestionEcho, maxHeaderEchoes+1)}, "more than 16 echoes"},
		"many stamps":   {&dripv1.CongestionHeader{Stamps: make([]*dripv1.CongestionStamp, maxHeaderStamps+1)}, "more than 64 stamps"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := decodeHeader(marshal(t, c.pb))
			require.ErrorContains(t, err, c.want)
		})
	}
	recs := make([][]byte, congestion.MaxRecordSize+1)
	for i := range recs {
		recs[i] = make([]byte, 64)
	}
	_, err := decodeHeader(marshal(t, &dripv1.CongestionHeader{Record: recs}))
	require.ErrorContains(t, err, "more than 256 record entries")
	_, err = decodeHeader([]byte{0x0a, 0x05, 0x01})
	require.ErrorContains(t, err, "truncated")
}

// FuzzCongestionHeader: decoding never panics, and what it accepts is what
// protobuf reads.
func FuzzCongestionHeader(f *testing.F) {
	h := sampleHeader(f)
	f.Add(AppendCongestionHeader(nil, &h))
	f.Add([]byte{0x32, 0x02, 0x08, 0x01})
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := decodeHeader(b)
		var pb dripv1.CongestionHeader
		perr := proto.Unmarshal(b, &pb)
		if err != nil {
			return
		}
		require.NoError(t, perr, "accepted what protobuf refuses")
		assert.Equal(t, pb.Publisher, got.Publisher)
		assert.Equal(t, pb.Seq, got.Seq)
		assert.Len(t, got.Record, len(pb.Record))
		assert.Len(t, got.Tags, len(pb.Tags))
		for i, tg := range pb.Tags {
			assert.Equal(t, tg.FeedbackNs, int64(got.Tags[i].Feedback))
		}
		require.Len(t, got.Stamps, len(pb.Stamps))
		for i, st := range pb.Stamps {
			assert.Equal(t, congestion.Stamp{Subscriber: st.Subscriber, Seq: st.Seq}, got.Stamps[i])
		}
	})
}

func BenchmarkCongestionHeader(b *testing.B) {
	h := sampleHeader(b)
	h.Record = append(h.Record, h.Record[0], h.Record[1], h.Record[0])
	buf := AppendCongestionHeader(nil, &h)
	b.Run("append", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			buf = AppendCongestionHeader(buf[:0], &h)
		}
	})
	b.Run("decode", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			if _, err := decodeHeader(buf); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func marshal(t testing.TB, m proto.Message) []byte {
	b, err := proto.Marshal(m)
	require.NoError(t, err)
	return b
}
