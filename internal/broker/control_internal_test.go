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
