package broker

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	dripv1 "github.com/dripmesh/drip/api/proto/drip/v1"
	"github.com/dripmesh/drip/internal/linkstate"
	"github.com/dripmesh/drip/internal/transport"
)

// TestReplacedLinkUpArrivingLateStaysReplaced: both ends dialled at once,
// and this broker attached link 1, then link 2, which replaced it — but
// their events reached the core in the other order. Link 2 stays the
// node's link to the neighbour; made current after it, link 1 left the
// node with none once it closed (in the 42-site lab a leaf's adjacency
// did not form for 3.5 minutes).
func TestReplacedLinkUpArrivingLateStaysReplaced(t *testing.T) {
	b, net, peerOpen := brokerAndPeer(t)
	wire := func() *transport.Link {
		accepted := make(chan transport.Conn, 1)
		net.Listen("b2", peerOpen, func(c transport.Conn) { accepted <- c; <-c.Done() })
		defer net.Unlisten("b2")
		c, err := net.Dialer().Dial(context.Background(), "b2", b.Open())
		require.NoError(t, err)
		t.Cleanup(func() { c.Close(nil); (<-accepted).Close(nil) })
		l, err := transport.NewLink(c, transport.LinkConfig{Dialed: true, QueueBytes: 1 << 16, MaxFrameBytes: 1 << 16}, func(*transport.Link, []linkstate.Message, [][]byte) error { return nil })
		require.NoError(t, err)
		l.Start()
		return l
	}
	l1, l2 := wire(), wire()
	b.links[2] = l2 // what attach left: l2 replaced l1

	b.handle(coreEvent{kind: evLinkUp, link: l2, replaces: l1})
	b.handle(coreEvent{kind: evLinkUp, link: l1})
	assert.Same(t, l2, b.node.Link(2), "the link attached last is the node's link to the neighbour")

	b.handle(coreEvent{kind: evLinkDown, link: l1})
	assert.Same(t, l2, b.node.Link(2), "the replaced link's end leaves its successor in place")
	l1.Close(nil) // the neighbour's end of the drain
	b.linkGroup.Wait()
}

// brokerAndPeer returns broker b1, not running, a memory network, and the
// Open of its neighbour-to-be b2 (router 2), which listens on that network
// as the test says.
func brokerAndPeer(t *testing.T) (*Broker, *transport.MemNetwork, *dripv1.Open) {
	t.Helper()
	b, err := New(DefaultConfig(1, "b1"), WithLogger(zap.NewNop()))
	require.NoError(t, err)
	peerOpen := proto.Clone(b.Open()).(*dripv1.Open)
	peerOpen.RouterId, peerOpen.RouterName = 2, "b2"
	return b, transport.NewMemNetwork(), peerOpen
}
