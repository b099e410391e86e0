package broker_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	"github.com/dripmesh/drip/internal/broker"
	"github.com/dripmesh/drip/internal/broker/brokertest"
	"github.com/dripmesh/drip/internal/clientapi"
	"github.com/dripmesh/drip/internal/content"
	"github.com/dripmesh/drip/internal/node"
	"github.com/dripmesh/drip/internal/qos"
	"github.com/dripmesh/drip/internal/transport"
	"github.com/dripmesh/drip/internal/wire"
	"github.com/dripmesh/drip/internal/workload"
)

// virtualMesh is whole Brokers — their goroutines, dial loops, links and
// drains, as production runs them — linked over a transport.MemNetwork
// inside a synctest bubble, where every clock they read is virtual: time
// moves only when every goroutine of the mesh waits, so the run takes what
// the brokers compute, not what their timers wait, and no verdict depends
// on the machine's load.
type virtualMesh struct {
	t       *testing.T
	mem     *transport.MemNetwork
	brokers []*broker.Broker
	cancel  []context.CancelFunc
	done    []chan struct{}
}

// startVirtualMesh starts n brokers on a ring with the chords of edges.
// Call it inside synctest.Test.
func startVirtualMesh(t *testing.T, n int, edges [][2]int, configure ...func(*broker.Config)) *virtualMesh {
	mem := transport.NewMemNetwork()
	m := &virtualMesh{t: t, mem: mem}
	for i := range n {
		cfg := brokertest.FastConfig(uint32(i))
		for _, f := range configure {
			f(&cfg)
		}
		for _, e := range edges {
			if e[0] == i {
				cfg.Peers = append(cfg.Peers, broker.Peer{ID: uint32(e[1]), Addr: fmt.Sprintf("b%d", e[1]), Weight: 1})
			}
		}
		b, err := broker.New(cfg, broker.WithDialer(mem.Dialer()), broker.WithLogger(zap.NewNop()))
		require.NoError(t, err)
		mem.Listen(cfg.Name, b.Open(), b.HandleLink)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			assert.NoError(t, b.Run(ctx))
		}()
		m.brokers, m.cancel, m.done = append(m.brokers, b), append(m.cancel, cancel), append(m.done, done)
	}
	t.Cleanup(func() {
		for i := range m.brokers {
			m.stop(i)
		}
	})
	return m
}

// stop stops broker i gracefully and waits for its Run to return.
func (m *virtualMesh) stop(i int) {
	m.cancel[i]()
	<-m.done[i]
}

// settled waits until every running broker has joined and has nothing
// left to advertise or build.
func (m *virtualMesh) settled(running ...int) {
	for _, i := range running {
		<-m.brokers[i].Joined()
	}
	for range 1000 {
		time.Sleep(50 * time.Millisecond)
		pending := false
		for _, i := range running {
			in, err := m.brokers[i].Inspect(context.Background())
			require.NoError(m.t, err)
			pending = pending || in.Pending || len(in.Routers) != len(running)
		}
		if !pending {
			return
		}
	}
	m.t.Fatal("the mesh did not settle in 50 virtual seconds")
}

// TestBrokersInVirtualTime runs four whole brokers on a fake clock: they
// link up and join, deliver exactly what each subscription matches, once,
// and one of them leaves gracefully under traffic — its subscriber
// resubscribed elsewhere first — without a message lost or duplicated.
// The workload comes from the seed.
func TestBrokersInVirtualTime(t *testing.T) {
	for _, seed := range []uint64{1, 2} {
		t.Run(fmt.Sprintf("seed %d", seed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { virtualRun(t, seed) })
		})
	}
}

func virtualRun(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 9))
	wl := workload.SingleConstraint()
	wl.Seed, wl.FiltersPerPredicate, wl.Names = int64(seed), 10, 10
	gen, err := workload.New(wl)
	require.NoError(t, err)

	m := startVirtualMesh(t, 4, [][2]int{{0, 1}, {1, 2}, {2, 3}, {0, 3}})
	m.settled(0, 1, 2, 3)
	type sub struct {
		at   int
		pred content.Predicate
		s    *node.Subscription
		got  map[uint64]int // by stamp sequence and ingress
	}
	var subs []*sub
	for i := range 8 {
		p := gen.Predicates(1)[0]
		s, err := m.brokers[i%4].Node().Subscribe(p, qos.Flow{}, "c")
		require.NoError(t, err)
		subs = append(subs, &sub{at: i % 4, pred: p, s: s, got: map[uint64]int{}})
	}
	// Broker 3's subscribers resubscribe at broker 0 before it leaves:
	// make before break, as the client does.
	for _, s := range subs {
		if s.at == 3 {
			moved, err := m.brokers[0].Node().Subscribe(s.pred, qos.Flow{}, "c")
			require.NoError(t, err)
			subs = append(subs, &sub{at: 0, pred: s.pred, s: moved, got: map[uint64]int{}})
		}
	}
	m.settled(0, 1, 2, 3)

	publish := func(at int, msgs []content.Message) []content.Message {
		fwd := m.brokers[at].Node().NewForwarder()
		for _, msg := range msgs {
			raw, err := proto.Marshal(clientapi.MessageToProto(msg))
			require.NoError(t, err)
			decoded, err := wire.DecodeMessage(raw, wire.DefaultMessageLimits())
			require.NoError(t, err)
			fwd.Publish(decoded, raw, 0, time.Now())
		}
		return msgs
	}
	var sent []content.Message
	for range 200 {
		sent = append(sent, publish(rng.IntN(3), gen.Messages(1))...)
	}
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		m.stop(3)
	}()
	for range 100 {
		time.Sleep(5 * time.Millisecond)
		sent = append(sent, publish(rng.IntN(3), gen.Messages(1))...)
	}
	<-stopped
	time.Sleep(time.Second)

	delivered := 0
	for _, s := range subs {
		if s.at == 3 {
			continue // left with its broker; its twin at broker 0 counts
		}
		want := 0
		for _, msg := range sent {
			if s.pred.Matches(msg) {
				want++
			}
		}
		got := 0
		for q, ok := s.s.Take(); ok; q, ok = s.s.Take() {
			s.s.Dequeued(q)
			got++
		}
		assert.Equal(t, want, got, "subscriber at b%d of %v: exactly the matching messages, once", s.at, s.pred)
		assert.Zero(t, s.s.Lost())
		delivered += got
	}
	require.Greater(t, delivered, len(sent)/4, "the workload delivers: %d deliveries of %d messages", delivered, len(sent))
}
