package broker

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	dripv1 "github.com/dripmesh/drip/api/proto/drip/v1"
	"github.com/dripmesh/drip/internal/linkstate"
	"github.com/dripmesh/drip/internal/transport"
)

func helloProto(router uint32) *dripv1.Control {
	return &dripv1.Control{Msg: &dripv1.Control_Hello{Hello: &dripv1.Hello{Router: router, Version: linkstate.Version}}}
}

// TestDecodeControlRefusesTheWholeFrame: one malformed message makes the
// frame's every message unusable, those before it included, and the error
// names the link.
func TestDecodeControlRefusesTheWholeFrame(t *testing.T) {
	for _, tc := range []struct {
		name string
		bad  *dripv1.Control
		want string
	}{
		{"empty", &dripv1.Control{}, "empty or of an unknown kind"},
		{"negative hello time", &dripv1.Control{Msg: &dripv1.Control_Hello{Hello: &dripv1.Hello{Router: 2, SentAtNs: -1}}}, "negative timestamp"},
		{"negative LSA age", &dripv1.Control{Msg: &dripv1.Control_Lsa{Lsa: &dripv1.Lsa{Origin: 2, AgeNs: -1}}}, "negative age"},
		{"unknown Bloom scheme", &dripv1.Control{Msg: &dripv1.Control_PredicateAd{PredicateAd: &dripv1.PredicateAd{Origin: 2, BloomScheme: "nope"}}}, "predicate advertisement of router 2"},
		{"truncated filters", &dripv1.Control{Msg: &dripv1.Control_PredicateAd{PredicateAd: &dripv1.PredicateAd{Origin: 2, BloomScheme: "cat-v1", BloomBits: 512, BloomHashes: 4, Filters: []byte{1, 2, 3}}}}, "predicate advertisement of router 2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			msgs, err := DecodeControl(stubLink{id: 2}, transport.NewAdDecoder(true), []*dripv1.Control{helloProto(2), tc.bad})
			require.Error(t, err)
			assert.Contains(t, err.Error(), "malformed control message from stub")
			assert.Contains(t, err.Error(), tc.want)
			assert.Nil(t, msgs)
		})
	}
	msgs, err := DecodeControl(stubLink{id: 2}, transport.NewAdDecoder(true), []*dripv1.Control{helloProto(2), helloProto(2)})
	require.NoError(t, err)
	require.Len(t, msgs, 2)
	assert.Equal(t, uint32(2), msgs[1].(*linkstate.Hello).Router)
}

// TestMalformedControlEndsTheLinkOffTheCore: a neighbour's frame with a
// malformed control message ends its link on the link's reader, and the
// core is handed none of the frame's messages.
func TestMalformedControlEndsTheLinkOffTheCore(t *testing.T) {
	b, net, peerOpen := brokerAndPeer(t)
	peerOpen.Compression = nil // the peer sends plain frames
	accepted := make(chan transport.Conn, 1)
	net.Listen("b2", peerOpen, func(c transport.Conn) { accepted <- c; <-c.Done() })
	defer net.Unlisten("b2")
	c, err := net.Dialer().Dial(context.Background(), "b2", b.Open())
	require.NoError(t, err)
	peer := <-accepted
	defer peer.Close(nil)
	l, err := b.attach(c, true)
	require.NoError(t, err)
	require.Equal(t, evLinkUp, (<-b.events).kind)

	frame, err := transport.AppendFrame(nil, []*dripv1.Control{helloProto(2), {}}, nil)
	require.NoError(t, err)
	require.NoError(t, peer.Send(frame))
	select {
	case <-l.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the link outlived a malformed control message")
	}
	assert.ErrorContains(t, l.Err(), "malformed control message from b2")
	b.linkGroup.Wait()
	var kinds []eventKind
	for len(b.events) > 0 {
		kinds = append(kinds, (<-b.events).kind)
	}
	assert.Equal(t, []eventKind{evLinkDown}, kinds, "the core hears the link went down, and nothing of the frame")
}
