package broker_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	dripv1 "github.com/dripmesh/drip/api/proto/drip/v1"
	"github.com/dripmesh/drip/internal/broker"
	"github.com/dripmesh/drip/internal/broker/brokertest"
	"github.com/dripmesh/drip/internal/clientapi"
	"github.com/dripmesh/drip/internal/content"
	"github.com/dripmesh/drip/internal/qos"
	"github.com/dripmesh/drip/internal/transport"
	"github.com/dripmesh/drip/internal/wire"
)

// TestImpostorCannotReplaceAnEstablishedLink: on a plaintext mesh, a peer
// claiming router 1's ID while router 1's link to router 0 is up and
// talking replaced that link again and again — 25 reconnects in 15 s, a
// quarter of the messages lost, logged at info — and its drip_link_up
// series stayed 1 after it left. Now each claimant is refused
// (drip_link_handshake_failures_total{reason="established"}), the real
// link never moves, every message arrives, and no series of the
// claimant's is left. A peer that dialled in and left leaves no series
// either; a configured neighbour's link that went down shows 0. In
// virtual time.
func TestImpostorCannotReplaceAnEstablishedLink(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := transport.NewMemNetwork()
		var brokers []*broker.Broker
		var regs []*prometheus.Registry
		for i := range 2 {
			cfg := brokertest.FastConfig(uint32(i))
			if i == 1 {
				// Router 1 dials 0, as the claimant will.
				cfg.Peers = []broker.Peer{{ID: 0, Addr: "b0", Weight: 1}}
			}
			reg := prometheus.NewRegistry()
			b, err := broker.New(cfg, broker.WithDialer(mem.Dialer()), broker.WithLogger(zap.NewNop()), broker.WithRegisterer(reg))
			require.NoError(t, err)
			mem.Listen(cfg.Name, b.Open(), b.HandleLink)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() {
				defer close(done)
				assert.NoError(t, b.Run(ctx))
			}()
			t.Cleanup(func() { cancel(); <-done })
			brokers, regs = append(brokers, b), append(regs, reg)
		}
		b0, b1 := brokers[0], brokers[1]
		<-b0.Joined()
		<-b1.Joined()
		sub, err := b0.Node().Subscribe(content.MustParse(`n >= 0`), qos.Flow{}, "c")
		require.NoError(t, err)
		time.Sleep(time.Second) // the link is established, the subscription advertised

		claimant := func(id uint32, name string) transport.Conn {
			open := proto.Clone(b1.Open()).(*dripv1.Open)
			open.RouterId, open.RouterName = id, name
			c, err := mem.Dialer().Dial(context.Background(), "b0", open)
			require.NoError(t, err)
			return c
		}
		// drain reads what b0 sends a claimant until its link ends.
		drain := func(c transport.Conn) {
			for {
				if _, err := c.Recv(); err != nil {
					return
				}
			}
		}
		fwd := b1.Node().NewForwarder()
		const n = 300
		var c transport.Conn
		for i := range n {
			if i%10 == 0 {
				// A claimant every half second, which stays a while.
				c = claimant(1, "evil2")
				go drain(c)
			}
			raw, err := proto.Marshal(clientapi.MessageToProto(content.MessageFrom(map[string]content.Value{"n": content.Int(int64(i))})))
			require.NoError(t, err)
			m, err := wire.DecodeMessage(raw, wire.DefaultMessageLimits())
			require.NoError(t, err)
			fwd.Publish(m, raw, 0, time.Now())
			time.Sleep(50 * time.Millisecond)
			in, err := b0.Inspect(context.Background())
			require.NoError(t, err)
			assert.Equal(t, "b1", in.Links[1], "the link to router 1 after message %d", i)
			if i%10 == 5 {
				c.Close(nil)
			}
		}
		time.Sleep(time.Second)
		got := 0
		for q, ok := sub.Take(); ok; q, ok = sub.Take() {
			sub.Dequeued(q)
			got++
		}
		assert.Equal(t, n, got, "every message arrived")
		assert.Equal(t, float64(n/10), testutil.ToFloat64(b0.HandshakeFailures("established")))

		// A peer of its own name that dials in and leaves.
		c = claimant(7, "visitor")
		go drain(c)
		time.Sleep(200 * time.Millisecond)
		require.Equal(t, 1.0, linkUp(t, regs[0], "visitor"))
		c.Close(nil)
		time.Sleep(200 * time.Millisecond)
		assert.Equal(t, -1.0, linkUp(t, regs[0], "visitor"), "the visitor's series is gone")
		assert.Equal(t, -1.0, linkUp(t, regs[0], "evil2"), "no claimant's series is left")
		assert.Equal(t, 1.0, linkUp(t, regs[0], "b1"))

		// A configured neighbour's link that goes down shows 0 (router 0
		// is router 1's), a neighbour's that dialled in none.
		mem.Unlisten("b0")
		mem.Cut("b0")
		time.Sleep(100 * time.Millisecond)
		assert.Equal(t, 0.0, linkUp(t, regs[1], "b0"))
		assert.Equal(t, -1.0, linkUp(t, regs[0], "b1"))
	})
}

// linkUp reads drip_link_up{peer} from reg, −1 when there is no series.
func linkUp(t *testing.T, reg *prometheus.Registry, peer string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != "drip_link_up" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "peer" && l.GetValue() == peer {
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	return -1
}
