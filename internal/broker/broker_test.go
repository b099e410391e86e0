package broker_test

import (
	"context"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/bits-and-blooms/bitset"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	dripv1 "github.com/dripmesh/drip/api/proto/drip/v1"
	"github.com/dripmesh/drip/internal/broker"
	"github.com/dripmesh/drip/internal/clientapi"
	"github.com/dripmesh/drip/internal/content"
	"github.com/dripmesh/drip/internal/dedup"
	"github.com/dripmesh/drip/internal/drp"
	"github.com/dripmesh/drip/internal/encoding"
	"github.com/dripmesh/drip/internal/linkstate"
	"github.com/dripmesh/drip/internal/transport"
	"github.com/dripmesh/drip/internal/wire"
	"github.com/dripmesh/drip/internal/workload"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestMeshDeliversExactly is B-DRP end to end (Carzaniga09 §2.2): on random
// topologies, every subscriber receives exactly the messages its predicate
// matches — no false positive, no duplicate, none missing — whichever
// broker they were published at.
func TestMeshDeliversExactly(t *testing.T) {
	seeds := []uint64{1, 2, 3}
	if testing.Short() {
		seeds = seeds[:1]
	}
	for _, seed := range seeds {
		rng := rand.New(rand.NewPCG(seed, 99))
		n := 3 + rng.IntN(10) // 3–12 brokers
		t.Run("", func(t *testing.T) {
			edges := randomTopology(rng, n, rng.IntN(n))
			t.Logf("seed %d: %d brokers, edges %v", seed, n, edges)
			m := startMesh(t, n, edges, nil)
			cfg := workload.SingleConstraint()
			cfg.Seed = int64(seed)
			cfg.FiltersPerPredicate = 5
			gen, err := workload.New(cfg)
			require.NoError(t, err)
			var subs []*testSub
			for k := range 3 * n {
				subs = append(subs, m.subscribe(k%n, gen.Predicate()))
			}
			m.waitConverged(m.allReachable())

			msgs := map[uint64]content.Message{}
			id := uint64(0)
			for i := range n {
				batch := gen.Messages(40)
				m.publish(i, id, batch)
				for _, msg := range batch {
					msgs[id] = msg
					id++
				}
			}
			expectExact(t, subs, msgs)
		})
	}
}

// TestBrokerDeathAndRestart cuts a line in the middle by killing a broker,
// checks that both halves keep working and that the mesh heals when the
// broker returns with a fresh sequence number (docs/design.md §3).
func TestBrokerDeathAndRestart(t *testing.T) {
	m := startMesh(t, 4, [][2]int{{0, 1}, {1, 2}, {2, 3}}, nil)
	everything := content.MustParse(`n exists`)
	s0, s3 := m.subscribe(0, everything), m.subscribe(3, everything)
	m.waitConverged(m.allReachable())
	msg := func(n int64) content.Message {
		return content.MessageFrom(map[string]content.Value{"n": content.Int(n)})
	}

	m.publish(0, 0, []content.Message{msg(0)})
	expectExact(t, []*testSub{s0, s3}, map[uint64]content.Message{0: msg(0)})

	m.kill(1)
	m.waitConverged(map[int][]int{0: {0}, 2: {2, 3}, 3: {2, 3}})
	m.publish(2, 1, []content.Message{msg(1)}) // broker 0 is out of reach
	m.publish(0, 2, []content.Message{msg(2)}) // and reaches nobody
	require.Eventually(t, func() bool { return s3.received() == 2 && s0.received() == 2 }, 5*time.Second, 10*time.Millisecond)

	m.restart(1)
	m.waitConverged(m.allReachable())
	m.publish(0, 3, []content.Message{msg(3)})
	m.publish(3, 4, []content.Message{msg(4)})
	require.Eventually(t, func() bool { return s3.received() == 4 && s0.received() == 4 }, 5*time.Second, 10*time.Millisecond)
	s0.mu.Lock()
	assert.Equal(t, map[uint64]int{0: 1, 2: 1, 3: 1, 4: 1}, s0.got)
	s0.mu.Unlock()
	s3.mu.Lock()
	assert.Equal(t, map[uint64]int{0: 1, 1: 1, 3: 1, 4: 1}, s3.got)
	s3.mu.Unlock()
}

func TestPublishRejectsInvalidMessages(t *testing.T) {
	m := startMesh(t, 1, nil, func(c *broker.Config) { c.Messages.MaxAttributes = 2 })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	stream, err := dripv1.NewBrokerClient(m.clients[0]).Publish(ctx)
	require.NoError(t, err)
	str := &dripv1.Value{Kind: &dripv1.Value_StringValue{StringValue: "x"}}
	require.NoError(t, stream.Send(&dripv1.PublishRequest{Message: &dripv1.Message{Attributes: []*dripv1.Attribute{{Name: "a", Value: str}}}}))
	require.NoError(t, stream.Send(&dripv1.PublishRequest{Message: &dripv1.Message{Attributes: []*dripv1.Attribute{{Name: "a", Value: str}, {Name: "b", Value: str}, {Name: "c", Value: str}}}}))
	_, err = stream.CloseAndRecv()
	require.Equal(t, codes.InvalidArgument, status.Code(err), "%v", err)
	assert.Contains(t, status.Convert(err).Message(), "message 1: message has 3 attributes, over the limit of 2")
}

func TestSubscribeRejectsBadPredicates(t *testing.T) {
	m := startMesh(t, 1, nil, func(c *broker.Config) { c.Predicates.MaxFilters = 2 })
	for _, tt := range []struct{ text, want string }{
		{`a = `, "at byte 4: expected a value"},
		{`a = 1 || b = 2 || c = 3`, "more than 2 filters"},
		{``, "predicate is empty"},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		stream, err := dripv1.NewBrokerClient(m.clients[0]).Subscribe(ctx)
		require.NoError(t, err)
		require.NoError(t, stream.Send(&dripv1.SubscribeRequest{Predicate: &dripv1.Predicate{Text: tt.text}}))
		_, err = stream.Recv()
		cancel()
		require.Equal(t, codes.InvalidArgument, status.Code(err), "%q: %v", tt.text, err)
		assert.Contains(t, status.Convert(err).Message(), tt.want)
	}
}

// TestReplacePredicate swaps a live subscription's predicate: messages
// published after the acknowledgement follow the new predicate only.
func TestReplacePredicate(t *testing.T) {
	m := startMesh(t, 2, [][2]int{{0, 1}}, nil)
	s := m.subscribe(1, content.MustParse(`k = "old"`))
	m.waitConverged(m.allReachable())
	msg := func(k string) content.Message {
		return content.MessageFrom(map[string]content.Value{"k": content.String(k)})
	}
	m.publish(0, 0, []content.Message{msg("old"), msg("new")})
	require.Eventually(t, func() bool { return s.received() == 1 }, 5*time.Second, 10*time.Millisecond)

	require.NoError(t, s.stream.Send(&dripv1.SubscribeRequest{Predicate: &dripv1.Predicate{Text: `k = "new"`}}))
	// The ack arrives through the collector; wait until broker 0 has the
	// new advertisement, which follows the replacement.
	s.mu.Lock()
	s.pred = content.MustParse(`k = "new"`)
	s.mu.Unlock()
	m.waitConverged(m.allReachable())
	require.Eventually(t, func() bool {
		m.publish(0, 100, []content.Message{msg("new")})
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.got[100] > 0
	}, 5*time.Second, 50*time.Millisecond)
	m.publish(0, 200, []content.Message{msg("old")})
	time.Sleep(200 * time.Millisecond)
	s.mu.Lock()
	defer s.mu.Unlock()
	assert.NotContains(t, s.got, uint64(200), "old predicate still matched after replacement")
}

// TestSlowSubscriberLosesOnlyItsOwn: a subscriber that does not read fills
// its bounded queue and loses messages, counted and reported to it, while
// a fast subscriber on the same broker receives everything.
func TestSlowSubscriberLosesOnlyItsOwn(t *testing.T) {
	m := startMesh(t, 1, nil, func(c *broker.Config) { c.SubscriberQueueBytes = 256 << 10 })
	pred := content.MustParse(`n exists`)
	fast := m.subscribe(0, pred)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	slow, err := dripv1.NewBrokerClient(m.clients[0]).Subscribe(ctx)
	require.NoError(t, err)
	require.NoError(t, slow.Send(&dripv1.SubscribeRequest{Predicate: &dripv1.Predicate{Text: pred.String()}}))
	_, err = slow.Recv()
	require.NoError(t, err)

	// Big payloads fill the HTTP/2 window quickly, so the slow stream
	// blocks and its queue overflows.
	const total = 400
	msgs := make([]content.Message, total)
	for k := range msgs {
		msgs[k] = content.MessageFrom(map[string]content.Value{"n": content.Int(int64(k)), "pad": content.String(string(make([]byte, 16<<10)))})
	}
	// Publish in steps the fast subscriber keeps up with.
	for k := 0; k < total; k += 10 {
		m.publish(0, uint64(k), msgs[k:k+10])
		require.Eventually(t, func() bool { return fast.received() == k+10 }, 10*time.Second, time.Millisecond)
	}

	lost := firstLost(t, slow)
	assert.Positive(t, lost)
	assert.Less(t, lost, uint64(total))
}

// TestIncompatiblePeersDoNotLink: brokers with different Bloom parameters
// or schemes refuse each other at the handshake and say why in a metric.
func TestIncompatiblePeersDoNotLink(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*broker.Config)
	}{
		{"hashes", func(c *broker.Config) { c.Encoding.K++ }},
		// Both schemes at the same M and K: a cat-v1 broker (one older
		// than the scheme field, say) would misread cat-v2 filters.
		{"scheme", func(c *broker.Config) { c.Encoding.Scheme = encoding.DefaultParamsV1().Scheme }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := startMesh(t, 2, [][2]int{{0, 1}}, func(c *broker.Config) {
				c.Encoding.M = encoding.DefaultParamsV1().M
				if c.ID == 1 {
					tc.edit(c)
				}
			})
			time.Sleep(300 * time.Millisecond)
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			in, err := m.nodes[0].srv.Broker().Inspect(ctx)
			require.NoError(t, err)
			assert.Empty(t, in.Links)
			assert.Equal(t, []uint32{0}, in.Routers)
			require.Eventually(t, func() bool {
				return testutil.ToFloat64(m.nodes[1].srv.Broker().HandshakeFailures("bloom")) > 0
			}, 5*time.Second, 20*time.Millisecond)
		})
	}
}

// TestPeerBeyondMaxRouterIDRefused: a peer cannot choose a router ID that
// would size every message's destination set (issue: 2^26 made publishing
// 1000× slower); the broker refuses its link and counts why.
func TestPeerBeyondMaxRouterIDRefused(t *testing.T) {
	m := startMesh(t, 1, nil, nil)
	b := m.nodes[0].srv.Broker()
	c, err := dialAs(t, b, m.nodes[0].peer, 1<<26, nil)
	if err == nil {
		_, err = c.Recv() // the broker closes what it refused
		c.Close(nil)
	}
	require.Error(t, err)
	require.Eventually(t, func() bool { return testutil.ToFloat64(b.HandshakeFailures("router_id")) == 1 },
		5*time.Second, 10*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	in, err := b.Inspect(ctx)
	require.NoError(t, err)
	assert.Empty(t, in.Links)
	assert.Equal(t, []uint32{0}, in.Routers)
}

// hostilePeer is a 2-broker mesh whose b1 subscribes to everything, and a
// peer linked to b0 as router 5 that sends whatever control messages it
// likes.
type hostilePeer struct {
	m    *testMesh
	s1   *testSub
	b0   *broker.Broker
	conn transport.Conn
}

func newHostilePeer(t *testing.T) *hostilePeer {
	t.Helper()
	m := startMesh(t, 2, [][2]int{{0, 1}}, nil)
	h := &hostilePeer{m: m, s1: m.subscribe(1, content.MustParse(`k exists`)), b0: m.nodes[0].srv.Broker()}
	m.waitConverged(m.allReachable())
	c, err := dialAs(t, h.b0, m.nodes[0].peer, 5, nil)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close(nil) })
	h.conn = c
	return h
}

// send forges msgs, in one frame.
func (h *hostilePeer) send(t *testing.T, msgs ...linkstate.Message) {
	t.Helper()
	var ctls []*dripv1.Control
	for _, msg := range msgs {
		ctl, err := transport.ControlToProto(msg)
		require.NoError(t, err)
		ctls = append(ctls, ctl)
	}
	frame, err := transport.AppendFrame(nil, ctls, nil)
	require.NoError(t, err)
	require.NoError(t, h.conn.Send(frame))
}

// requireDeliversAcross checks that the mesh converges again and a message
// published at b0 reaches b1's subscriber.
func (h *hostilePeer) requireDeliversAcross(t *testing.T) {
	t.Helper()
	h.m.waitConverged(h.m.allReachable())
	h.m.publish(0, 0, []content.Message{content.MessageFrom(map[string]content.Value{"k": content.Int(1)})})
	require.Eventually(t, func() bool { return h.s1.received() == 1 }, 5*time.Second, 10*time.Millisecond,
		"b0's message reaches b1's subscriber")
}

// TestForgedMaxSeqAdvertisementDoesNotSplitTheMesh: a hostile peer sends,
// in router 1's name, an LSA and a predicate advertisement with the largest
// sequence number (once this split a 2-broker mesh in a storm of sequence
// jumps that outlived the peer). Router 1 flushes them and the mesh goes
// on: converged, quiet, delivering across.
func TestForgedMaxSeqAdvertisementDoesNotSplitTheMesh(t *testing.T) {
	h := newHostilePeer(t)
	for range 3 {
		h.send(t, &linkstate.LSA{Origin: 1, Seq: math.MaxUint64},
			&linkstate.PredAd{Origin: 1, Seq: math.MaxUint64, Params: h.b0.Config().Encoding})
		time.Sleep(50 * time.Millisecond)
	}
	h.m.waitConverged(h.m.allReachable())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	in, err := h.b0.Inspect(ctx)
	require.NoError(t, err)
	time.Sleep(500 * time.Millisecond)
	later, err := h.b0.Inspect(ctx)
	require.NoError(t, err)
	assert.Equal(t, in.Digest, later.Digest, "no advertisement storm once the peer stops")
	h.requireDeliversAcross(t)
}

// TestForgedWithdrawalDoesNotStrandALink: a withdrawal forged in a live
// neighbour's name makes a broker finish its link to it, as for one that
// leaves; when the neighbour advertises itself again, the finished link is
// closed and dialled afresh, so traffic flows again.
func TestForgedWithdrawalDoesNotStrandALink(t *testing.T) {
	h := newHostilePeer(t)
	h.send(t, &linkstate.LSA{Origin: 1, Seq: 1 << 40, Withdrawn: true})
	time.Sleep(200 * time.Millisecond)
	h.requireDeliversAcross(t)
}

// TestMemoryBudgetShedsTheSlowSubscriber: on a real broker whose budget
// is far below what one subscriber's queue may hold, a subscriber that
// does not read is shed to the budget and told so, while a fast one
// receives everything, and the broker's queues stay within the budget.
func TestMemoryBudgetShedsTheSlowSubscriber(t *testing.T) {
	// The queues get 1 MiB, less the three streams' charge (160 KiB): room
	// for the fast subscriber's batches beside what gRPC holds for the
	// slow one, which cannot be shed.
	const budget = 2 << 20
	m := startMesh(t, 1, nil, func(c *broker.Config) {
		c.MemoryBudget = budget
		c.SubscriberQueue, c.SubscriberQueueBytes = 1<<20, 64<<20
	})
	pred := content.MustParse(`n exists`)
	fast := m.subscribe(0, pred)

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second) // a Lost that never comes fails
	defer cancel()
	slow, err := dripv1.NewBrokerClient(m.clients[0]).Subscribe(ctx)
	require.NoError(t, err)
	require.NoError(t, slow.Send(&dripv1.SubscribeRequest{Predicate: &dripv1.Predicate{Text: pred.String()}}))
	_, err = slow.Recv()
	require.NoError(t, err)

	const total = 400 // 16 KiB each: 6 MiB, six times what the queues may hold
	msgs := make([]content.Message, total)
	for k := range msgs {
		msgs[k] = content.MessageFrom(map[string]content.Value{"n": content.Int(int64(k)), "pad": content.String(string(make([]byte, 16<<10)))})
	}
	node := m.nodes[0].srv.Broker().Node()
	for k := 0; k < total; k += 10 {
		m.publish(0, uint64(k), msgs[k:k+10])
		require.Eventually(t, func() bool { return fast.received() == k+10 }, 10*time.Second, time.Millisecond)
		// The queues get half the budget; one message over at most,
		// while a publisher's delivery is being placed.
		require.LessOrEqual(t, node.Budget().Used(), int64(budget/2+20<<10))
	}
	fast.mu.Lock()
	assert.Zero(t, fast.lost, "the fast subscriber lost nothing")
	fast.mu.Unlock()

	lost := firstLost(t, slow)
	assert.Positive(t, lost)
	shed := metric(t, m.nodes[0].srv.Registry(), "drip_subscriber_shed_total", "")
	assert.GreaterOrEqual(t, shed, float64(lost), "counted as shed to the budget")
}

// TestMemoryBudgetCountsWhatGRPCHolds: a subscriber that never reads,
// over a connection with a fixed 64 KiB window, leaves deliveries in
// gRPC beyond its broker queue (the stream's write quota). The budget
// counts them while they are held and gives them back when the stream
// ends, so that the queues shed in their place.
func TestMemoryBudgetCountsWhatGRPCHolds(t *testing.T) {
	const budget = 4 << 20
	m := startMesh(t, 1, nil, func(c *broker.Config) { c.MemoryBudget = budget })
	cc, err := grpc.NewClient(m.nodes[0].srv.ClientAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithInitialWindowSize(64<<10), grpc.WithInitialConnWindowSize(64<<10))
	require.NoError(t, err)
	defer cc.Close()
	pred := content.MustParse(`n exists`)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	slow, err := dripv1.NewBrokerClient(cc).Subscribe(ctx)
	require.NoError(t, err)
	require.NoError(t, slow.Send(&dripv1.SubscribeRequest{Predicate: &dripv1.Predicate{Text: pred.String()}, AcceptBatches: true}))
	_, err = slow.Recv()
	require.NoError(t, err)

	msgs := make([]content.Message, 100) // 16 KiB each: 1.6 MiB, more than the window and the quota
	for k := range msgs {
		msgs[k] = content.MessageFrom(map[string]content.Value{"n": content.Int(int64(k)), "pad": content.String(string(make([]byte, 16<<10)))})
	}
	m.publish(0, 0, msgs)
	reg := m.nodes[0].srv.Registry()
	sending := func() float64 { return metricValue(t, reg, "drip_memory_budget_sending_bytes") }
	// The window (64 KiB) is in the client; gRPC's write quota (64 KiB)
	// and the batch that crossed it stay in the broker.
	require.Eventually(t, func() bool { return sending() >= 64<<10 }, 10*time.Second, 10*time.Millisecond,
		"gRPC's bytes for the stalled stream are counted")
	node := m.nodes[0].srv.Broker().Node()
	assert.LessOrEqual(t, sending(), float64(node.Budget().Used()), "and are part of what the budget holds")
	assert.LessOrEqual(t, sending(), float64(4*64<<10), "at most the quota and a batch or two")

	cancel()
	require.Eventually(t, func() bool { return sending() == 0 }, 10*time.Second, 10*time.Millisecond,
		"given back when the stream ends, though the connection stays")
}

// firstLost reads a subscription stream until its first Lost event and
// returns the total it reports.
func firstLost(t *testing.T, stream dripv1.Broker_SubscribeClient) uint64 {
	t.Helper()
	for {
		d, err := stream.Recv()
		require.NoError(t, err)
		if l := d.GetLost(); l != nil {
			return l.Total
		}
	}
}

// TestStreamsBeyondTheBudgetAreRefused: open client streams are charged
// to the memory budget, and those that would leave the queues less than a
// quarter of it are refused with ResourceExhausted naming the flag; a
// stream that ends makes room again.
func TestStreamsBeyondTheBudgetAreRefused(t *testing.T) {
	// Queues get 1 MiB; streams may hold 768 KiB: 24 subscribers at 32
	// KiB, or 2 publishers at 288 KiB.
	m := startMesh(t, 1, nil, func(c *broker.Config) { c.MemoryBudget = 2 << 20 })
	api := dripv1.NewBrokerClient(m.clients[0])
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	subscribe := func(ctx context.Context) error {
		st, err := api.Subscribe(ctx)
		if err != nil {
			return err
		}
		// A refused stream may end before the request is sent (Send
		// returns io.EOF); its status comes with Recv either way.
		_ = st.Send(&dripv1.SubscribeRequest{Predicate: &dripv1.Predicate{Text: "n exists"}})
		_, err = st.Recv()
		return err
	}
	cancels := make([]context.CancelFunc, 0, 24)
	for range 24 {
		sctx, scancel := context.WithCancel(ctx)
		cancels = append(cancels, scancel)
		require.NoError(t, subscribe(sctx))
	}
	reg := m.nodes[0].srv.Registry()
	assert.Equal(t, float64(24*32<<10), metricValue(t, reg, "drip_memory_budget_streams_bytes"))

	err := subscribe(ctx)
	require.Equal(t, codes.ResourceExhausted, status.Code(err), "%v", err)
	assert.Contains(t, err.Error(), "--memory-budget")
	pub, err := api.PublishStream(ctx)
	require.NoError(t, err)
	_, err = pub.Recv()
	require.Equal(t, codes.ResourceExhausted, status.Code(err), "a publisher too: %v", err)

	cancels[0]()
	require.Eventually(t, func() bool { return subscribe(ctx) == nil }, 10*time.Second, 20*time.Millisecond,
		"an ended stream gives its share back")
	for _, c := range cancels {
		c()
	}
}

// TestRefusedLinkIsReadToTheEnd: when both ends of a link dial at once,
// each sees the two connections arrive in its own order, and the end that
// refuses one may find that its neighbour already took that one as its
// only link and sent bundles on it. The refusing broker reads them — and
// forwards or delivers them — until the neighbour, having learnt of the
// link both keep, drains the refused one and half-closes it. Refused by
// closing it at once, the bundle below was lost without a count on either
// side.
func TestRefusedLinkIsReadToTheEnd(t *testing.T) {
	// A race takes place while the links are young: younger than a dead
	// interval, which a long one makes the whole test.
	m := startMesh(t, 2, [][2]int{{0, 1}}, func(c *broker.Config) { c.LinkState.DeadInterval = time.Minute })
	s0 := m.subscribe(0, content.MustParse(`k exists`))
	m.waitConverged(m.allReachable())
	b0 := m.nodes[0].srv.Broker()
	refused := testutil.ToFloat64(b0.HandshakeFailures("duplicate"))

	// Router 0 dialled its link to 1 (the lower ID dials), so 0 refuses
	// a link that 1 dials: the link the lower ID dialled wins a race.
	c, err := dialAs(t, b0, m.nodes[0].peer, 1, nil)
	require.NoError(t, err)
	defer c.Close(nil)
	pm := clientapi.MessageToProto(content.MessageFrom(map[string]content.Value{"k": content.Int(7)}))
	pm.Payload = binary.BigEndian.AppendUint64(nil, 7) // the test subscriber's message ID
	msg, err := proto.Marshal(pm)
	require.NoError(t, err)
	bundle := wire.AppendBundle(nil, drp.Bundle{Source: 1, Dest: bitset.New(2).Set(0), HopsLeft: 8},
		dedup.Stamp{Origin: 1, Epoch: 99, Seq: 1}, time.Now().UnixNano(), 0, msg)
	frame, err := transport.AppendFrame(nil, nil, [][]byte{bundle})
	require.NoError(t, err)
	require.NoError(t, c.Send(frame))
	require.NoError(t, c.CloseSend(), "router 1 drains the link it replaced")

	require.Eventually(t, func() bool { return s0.received() == 1 }, 5*time.Second, 10*time.Millisecond,
		"the bundle sent on the refused link reaches router 0's subscriber")
	assert.Equal(t, refused+1, testutil.ToFloat64(b0.HandshakeFailures("duplicate")), "router 0 refused the link")
	ended := make(chan error, 1)
	go func() {
		for {
			if _, err := c.Recv(); err != nil {
				ended <- err
				return
			}
		}
	}()
	select {
	case <-ended:
	case <-time.After(4 * time.Second): // under replacedDrainTimeout
		t.Fatal("router 0 did not end the refused link once it was drained")
	}
	// The link both ends keep carries on.
	m.publish(1, 8, []content.Message{content.MessageFrom(map[string]content.Value{"k": content.Int(8)})})
	require.Eventually(t, func() bool { return s0.received() == 2 }, 5*time.Second, 10*time.Millisecond)
}
