package wire

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	dripv1 "github.com/dripmesh/drip/api/proto/drip/v1"
	"github.com/dripmesh/drip/internal/encoding"
	"github.com/dripmesh/drip/internal/linkstate"
)

func sampleControl() []linkstate.Message {
	p := encoding.DefaultParams()
	var f encoding.Bloom
	f.Set(3)
	f.Set(p.M - 1)
	return []linkstate.Message{
		&linkstate.Hello{Router: 1, Name: "b1", Version: linkstate.Version, SentAt: time.Second, Echoed: true, Echo: 2 * time.Second, Hold: time.Millisecond, Heard: true, Digest: 42},
		&linkstate.LSA{Origin: 1, Seq: 7, Age: time.Minute, Links: []linkstate.Link{{Neighbor: 2, Cost: 10}, {Neighbor: 5, Cost: 1}}},
		&linkstate.LSA{Origin: 3, Seq: 9, Withdrawn: true, Links: []linkstate.Link{}},
		&linkstate.PredAd{Origin: 1, Seq: 3, Params: p, Filters: []encoding.Bloom{f, {}}},
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
	p := encoding.DefaultParams()
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
