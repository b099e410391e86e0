package transport

import (
	"testing"
	"time"

	"github.com/bits-and-blooms/bitset"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	dripv1 "github.com/dripmesh/drip/api/proto/drip/v1"
	"github.com/dripmesh/drip/internal/dedup"
	"github.com/dripmesh/drip/internal/drp"
	"github.com/dripmesh/drip/internal/encoding"
	"github.com/dripmesh/drip/internal/linkstate"
	"github.com/dripmesh/drip/internal/wire"
)

func sampleControl() []linkstate.Message {
	p, v1 := encoding.DefaultParams(), encoding.DefaultParamsV1()
	var f, g encoding.Bloom
	f.Set(3)
	f.Set(p.M - 1)
	g.Set(0)
	g.Set(v1.M - 1)
	var filters []encoding.Bloom
	for i := range 40 {
		var b encoding.Bloom
		for j := range 18 {
			b.Set((i*131 + j*97) % p.M)
		}
		filters = append(filters, b)
	}
	return []linkstate.Message{
		&linkstate.Hello{Router: 1, Name: "b1", Version: linkstate.Version, SentAt: time.Second, Echoed: true, Echo: 2 * time.Second, Hold: time.Millisecond, Heard: true, Digest: 42},
		&linkstate.LSA{Origin: 1, Seq: 7, Age: time.Minute, Links: []linkstate.Link{{Neighbor: 2, Cost: 10}, {Neighbor: 5, Cost: 1}}},
		&linkstate.LSA{Origin: 3, Seq: 9, Withdrawn: true, Links: []linkstate.Link{}},
		&linkstate.PredAd{Origin: 1, Seq: 3, Params: p, Filters: []encoding.Bloom{f, {}}},
		&linkstate.PredAd{Origin: 2, Seq: 4, Params: p, Filters: filters},
		&linkstate.PredAd{Origin: 2, Seq: 5, Params: p, Withdrawn: true},
		&linkstate.PredAd{Origin: 4, Seq: 1, Params: v1, Filters: []encoding.Bloom{g, {}, g}},
		&linkstate.PredAd{Origin: 6, Seq: 2, Params: p, Filters: filters, Classes: []linkstate.QoSClass{
			{Deadline: 50 * time.Millisecond, Filters: filters[:3]},
			{Deadline: 50 * time.Millisecond, TwoPaths: true, Filters: []encoding.Bloom{f}},
			{TwoPaths: true, Filters: filters[5:6]},
		}},
		// Sealed (peer identity on): a P-256 ECDSA signature and a
		// certificate's worth of bytes.
		&linkstate.LSA{Origin: 1, Seq: 8, Links: []linkstate.Link{{Neighbor: 2, Cost: 10}},
			Seal: linkstate.Seal{Sig: make([]byte, 71), Cert: make([]byte, 480)}},
		&linkstate.PredAd{Origin: 6, Seq: 3, Params: p, Filters: filters[:2],
			Seal: linkstate.Seal{Sig: []byte{1, 2, 3}, Cert: []byte{4}}},
		&linkstate.DBSummary{Entries: []linkstate.Summary{{Kind: linkstate.KindRouter, Origin: 1, Seq: 2, Sum: 3}, {Kind: linkstate.KindPredicate, Origin: 4, Seq: 5, Sum: 6}}},
		&linkstate.DBRequest{Keys: []linkstate.Key{{Kind: linkstate.KindPredicate, Origin: 9}}},
	}
}

func TestControlRoundTrip(t *testing.T) {
	for _, msg := range sampleControl() {
		c, err := ControlToProto(msg)
		require.NoError(t, err)
		raw, err := proto.Marshal(c)
		require.NoError(t, err)
		var back dripv1.Control
		require.NoError(t, proto.Unmarshal(raw, &back))
		got, err := ControlFromProto(&back)
		require.NoError(t, err)
		assert.Equal(t, msg, got)
		// What an origin signed is what every receiver verifies.
		type signed interface{ AppendSigned([]byte) []byte }
		if m, ok := msg.(signed); ok {
			assert.Equal(t, m.AppendSigned(nil), got.(signed).AppendSigned(nil), "%T", msg)
		}
		// linkstate's estimate of the encoded size is what the control
		// traffic budget was measured with: keep it honest.
		assert.InDelta(t, len(raw), msg.WireSize(), float64(len(raw))*0.25+4, "%T", msg)
	}
}

func TestControlFromProtoRejects(t *testing.T) {
	p, v2 := encoding.DefaultParamsV1(), encoding.DefaultParams()
	ad := func(scheme string, filters ...byte) *dripv1.Control {
		return &dripv1.Control{Msg: &dripv1.Control_PredicateAd{PredicateAd: &dripv1.PredicateAd{
			Origin: 7, BloomBits: uint32(v2.M), BloomHashes: uint32(v2.K), BloomScheme: scheme, Filters: filters}}}
	}
	tests := []struct {
		name string
		c    *dripv1.Control
		want string
	}{
		{"empty", &dripv1.Control{}, "empty"},
		{"negative hello time", &dripv1.Control{Msg: &dripv1.Control_Hello{Hello: &dripv1.Hello{SentAtNs: -1}}}, "negative"},
		{"unsorted links", &dripv1.Control{Msg: &dripv1.Control_Lsa{Lsa: &dripv1.Lsa{Origin: 1, Links: []*dripv1.LinkCost{{Neighbor: 3}, {Neighbor: 2}}}}}, "ascending"},
		{"bad params", &dripv1.Control{Msg: &dripv1.Control_PredicateAd{PredicateAd: &dripv1.PredicateAd{BloomBits: 7, BloomHashes: 1}}}, "router 0"},
		{"ragged filters", &dripv1.Control{Msg: &dripv1.Control_PredicateAd{PredicateAd: &dripv1.PredicateAd{BloomBits: uint32(p.M), BloomHashes: uint32(p.K), Filters: make([]byte, p.Bytes()+1)}}}, "not a multiple"},
		{"cat-v2 width without a scheme", ad("", make([]byte, v2.Bytes())...), "router 7: encoding: M=2048 bits, want a multiple of 8 in 8..512"},
		{"unknown scheme", ad("cat-v9"), `router 7: unknown Bloom scheme "cat-v9"`},
		{"truncated positions", ad("cat-v2", 3, 1, 2), "router 7: filter 0: position 2 truncated"},
		{"position beyond M", ad("cat-v2", 1, 0x80, 0x10), "router 7: filter 0: position 0 is beyond M=2048"},
		{"ragged class filters", &dripv1.Control{Msg: &dripv1.Control_PredicateAd{PredicateAd: &dripv1.PredicateAd{Origin: 7,
			BloomBits: uint32(p.M), BloomHashes: uint32(p.K), QosClasses: []*dripv1.QosClass{{DeadlineNs: 1, Filters: make([]byte, 3)}}}}}, "router 7: QoS class 0"},
		{"bad kind", &dripv1.Control{Msg: &dripv1.Control_DbRequest{DbRequest: &dripv1.DbRequest{Keys: []*dripv1.EntryKey{{Kind: 257}}}}}, "unknown entry kind 257"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ControlFromProto(tt.c)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

// FuzzPeerFrame parses arbitrary bytes as a peer frame the way a link's
// reader does and feeds every control message that converts into a
// link-state node: nothing may panic, whatever a broken or hostile peer
// sends. Where protobuf's decoder accepts the bytes, ParseFrame finds the
// same frame.
func FuzzPeerFrame(f *testing.F) {
	frame := &dripv1.Frame{Open: &dripv1.Open{ProtocolVersion: 1, RouterId: 2}}
	for _, msg := range sampleControl() {
		c, _ := ControlToProto(msg)
		frame.Control = append(frame.Control, c)
	}
	frame.Bundles = []*dripv1.Bundle{{Source: 1, Destinations: []uint64{6}, HopsLeft: 3, Message: []byte{1, 2}}}
	seed, _ := proto.Marshal(frame)
	f.Add(seed)
	f.Add([]byte{0x12, 0x00})
	f.Add(AppendCompressedFrame(nil, []byte{1, 2, 3}, 40))
	f.Add(AppendFinishedFrame(nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		var fr ParsedFrame
		parseErr := ParseFrame(b, &fr)
		var ref dripv1.Frame
		if proto.Unmarshal(b, &ref) == nil {
			require.NoError(t, parseErr)
			requireSameFrame(t, &ref, &fr)
		}
		if parseErr != nil {
			return
		}
		var peeked ParsedFrame
		require.NoError(t, PeekFrame(b, &peeked))
		require.Empty(t, peeked.Control)
		require.Equal(t, fr.Bundles, peeked.Bundles)
		require.Equal(t, fr.Finished, peeked.Finished)
		require.Equal(t, fr.Open || len(fr.Control) > 0 || len(fr.Bundles) > 0 || fr.Finished, peeked.Plain())
		cfg := linkstate.DefaultConfig(2, "b2")
		node, err := linkstate.New(cfg)
		require.NoError(t, err)
		require.NoError(t, node.LinkUp(1, 1, 0))
		for _, c := range fr.Control {
			msg, err := ControlFromProto(c)
			if err != nil {
				continue
			}
			_ = node.Step(1, msg, time.Second)
			for node.HasReady() {
				node.Ready()
				node.Advance()
			}
		}
	})
}

func TestControlToProtoRejectsBadParams(t *testing.T) {
	_, err := ControlToProto(&linkstate.PredAd{Origin: 5, Seq: 1, Params: encoding.Params{M: 7, K: 1}})
	assert.ErrorContains(t, err, "predicate advertisement of router 5: encoding: M=7 bits")
}

func requireSameFrame(t *testing.T, want *dripv1.Frame, got *ParsedFrame) {
	t.Helper()
	require.Equal(t, want.Open != nil, got.Open)
	require.Len(t, got.Control, len(want.Control))
	for i := range want.Control {
		require.True(t, proto.Equal(want.Control[i], got.Control[i]), "control %d", i)
	}
	require.Len(t, got.Bundles, len(want.Bundles))
	for i, raw := range got.Bundles {
		var b dripv1.Bundle
		require.NoError(t, proto.Unmarshal(raw, &b))
		require.True(t, proto.Equal(want.Bundles[i], &b), "bundle %d", i)
	}
	require.Equal(t, string(want.Deflated), string(got.Deflated))
	require.Equal(t, uint64(want.InflatedSize), got.InflatedSize)
	require.Equal(t, want.Finished, got.Finished)
	require.Equal(t, len(want.Deflated) > 0 || want.InflatedSize > 0, got.Compressed())
}

func TestParseFrameMatchesProtobuf(t *testing.T) {
	var control []*dripv1.Control
	for _, msg := range sampleControl() {
		c, err := ControlToProto(msg)
		require.NoError(t, err)
		control = append(control, c)
	}
	bundles := [][]byte{
		wire.AppendBundle(nil, drp.Bundle{Source: 1, Dest: bitset.New(64).Set(6), HopsLeft: 3}, dedup.Stamp{Origin: 1, Epoch: 9, Seq: 4}, 7, 1, []byte{1, 2}),
		wire.AppendBundle(nil, drp.Bundle{Source: 2, Dest: bitset.New(64)}, dedup.Stamp{}, 0, 0, []byte("x")),
	}
	raw, err := AppendFrame(nil, control, bundles)
	require.NoError(t, err)
	size := 0
	for _, c := range control {
		size += protowire.SizeTag(fieldFrameControl) + protowire.SizeBytes(proto.Size(c))
	}
	assert.Equal(t, len(raw), FrameSize(size, bundles))

	var ref dripv1.Frame
	require.NoError(t, proto.Unmarshal(raw, &ref))
	var got ParsedFrame
	require.NoError(t, ParseFrame(raw, &got))
	requireSameFrame(t, &ref, &got)
	assert.False(t, got.Compressed())
	assert.True(t, got.Plain())

	var peeked ParsedFrame
	require.NoError(t, PeekFrame(raw, &peeked))
	assert.Empty(t, peeked.Control, "a peek leaves control messages encoded")
	assert.Equal(t, got.Bundles, peeked.Bundles)
	assert.True(t, peeked.Plain(), "control messages alone make a frame plain")
	require.NoError(t, PeekFrame(raw[:FrameSize(size, nil)], &peeked))
	assert.True(t, peeked.Plain())

	// Parsing again into the same frame reuses it and forgets the old one.
	require.NoError(t, ParseFrame(AppendCompressedFrame(nil, []byte{9}, 3), &got))
	assert.Empty(t, got.Control)
	assert.Empty(t, got.Bundles)
	assert.True(t, got.Compressed())
	assert.False(t, got.Plain())
	assert.Equal(t, uint64(3), got.InflatedSize)

	assert.ErrorContains(t, ParseFrame(raw[:len(raw)-1], &got), "truncated")

	// The end-of-data marker is a plain frame of its own.
	fin := AppendFinishedFrame(nil)
	require.NoError(t, proto.Unmarshal(fin, &ref))
	assert.True(t, ref.GetFinished())
	require.NoError(t, ParseFrame(fin, &got))
	requireSameFrame(t, &ref, &got)
	assert.True(t, got.Finished)
	assert.True(t, got.Plain(), "a compressed frame cannot say finished")
	require.NoError(t, ParseFrame(raw, &got))
	assert.False(t, got.Finished, "parsing again forgets it")
	assert.ErrorContains(t, ParseFrame(fin[:len(fin)-1], &got), "truncated")
}
