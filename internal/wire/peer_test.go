package wire

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	dripv1 "github.com/dripmesh/drip/api/proto/drip/v1"
	"github.com/dripmesh/drip/internal/encoding"
	"github.com/dripmesh/drip/internal/linkstate"
	"github.com/dripmesh/drip/internal/transport"
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

// FuzzPeerFrame decodes arbitrary bytes as a peer frame and feeds every
// control message that converts into a link-state node: nothing may panic,
// whatever a broken or hostile peer sends.
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
	f.Fuzz(func(t *testing.T, b []byte) {
		var fr dripv1.Frame
		if proto.Unmarshal(b, &fr) != nil {
			return
		}
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

// The handshake contract of docs/design.md §2: a mesh runs one Bloom
// scheme. Opens filled from Params are compatible exactly when the Params
// are equal, and a broker older than the scheme field (no scheme) is a
// cat-v1 broker: compatible with cat-v1, refused by cat-v2 with reason
// "bloom" and a detail naming both schemes.
func TestOpenBloomAndCompatibility(t *testing.T) {
	open := func(id uint32, p encoding.Params) *dripv1.Open {
		o := &dripv1.Open{ProtocolVersion: transport.ProtocolVersion, RouterId: id, RouterName: fmt.Sprint("b", id), Mesh: "m"}
		SetOpenBloom(o, p)
		return o
	}
	v1, v2 := encoding.DefaultParamsV1(), encoding.DefaultParams()
	for _, p := range []encoding.Params{v1, v2, {Scheme: encoding.SchemeCatV2, M: 1024, K: 4}} {
		got, err := OpenBloom(open(1, p))
		require.NoError(t, err)
		assert.Equal(t, p, got)
	}
	old := open(2, v1)
	old.BloomScheme = "" // a broker from before the field
	got, err := OpenBloom(old)
	require.NoError(t, err)
	assert.Equal(t, v1, got)

	for _, tc := range []struct {
		name          string
		local, remote *dripv1.Open
		detail        string
	}{
		{"cat-v1 with cat-v1", open(1, v1), open(2, v1), ""},
		{"cat-v2 with cat-v2", open(1, v2), open(2, v2), ""},
		{"cat-v1 with an older broker", open(1, v1), old, ""},
		{"cat-v2 with an older broker", open(1, v2), old, `peer "b2" encodes with cat-v1 M=512 K=6, we with cat-v2 M=2048 K=6`},
		{"an older broker with cat-v2", old, open(1, v2), `peer "b1" encodes with cat-v2 M=2048 K=6, we with cat-v1 M=512 K=6`},
		{"same M and K, other scheme", open(1, encoding.Params{Scheme: encoding.SchemeCatV2, M: 512, K: 6}), open(2, v1),
			`peer "b2" encodes with cat-v1 M=512 K=6, we with cat-v2 M=512 K=6`},
		{"a scheme from the future", open(1, v2), func() *dripv1.Open { o := open(2, v2); o.BloomScheme = "cat-v3"; return o }(),
			`peer "b2" encodes with cat-v3 M=2048 K=6, we with cat-v2 M=2048 K=6`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := transport.Compatible(tc.local, tc.remote)
			if tc.detail == "" {
				require.NoError(t, err)
				return
			}
			reason, ok := transport.IsIncompatible(err)
			require.True(t, ok, "%v", err)
			assert.Equal(t, "bloom", reason)
			assert.ErrorContains(t, err, tc.detail)
		})
	}

	future := open(3, v2)
	future.BloomScheme = "cat-v3"
	_, err = OpenBloom(future)
	assert.EqualError(t, err, `open of router 3: unknown Bloom scheme "cat-v3", want cat-v1 or cat-v2`)
	bad := open(3, v2)
	bad.BloomScheme = "cat-v1"
	_, err = OpenBloom(bad)
	assert.ErrorContains(t, err, "open of router 3: encoding: M=2048 bits")
}
