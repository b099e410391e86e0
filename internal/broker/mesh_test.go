package broker_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	dripv1 "github.com/dripmesh/drip/api/proto/drip/v1"
	"github.com/dripmesh/drip/internal/broker"
	"github.com/dripmesh/drip/internal/broker/brokertest"
	"github.com/dripmesh/drip/internal/clientapi"
	"github.com/dripmesh/drip/internal/content"
	"github.com/dripmesh/drip/internal/encoding"
	"github.com/dripmesh/drip/internal/node"
	"github.com/dripmesh/drip/internal/transport"
)

// testMesh runs brokers on loopback with real listeners, as production
// does, with timers shortened so tests converge in well under a second.
type testMesh struct {
	t      *testing.T
	n      int
	edges  [][2]int
	mutate func(*broker.Config)
	opts   []broker.Option
	// server, if set, edits broker i's ServerConfig (TLS, peer identity)
	// each time it starts.
	server  func(i int, sc *broker.ServerConfig)
	nodes   []*meshNode
	clients []*grpc.ClientConn
	subs    []*testSub
	// extra are predicates subscribed at a broker by other means than
	// subscribe (e.g. the client package), for advertised.
	extra map[int][]content.Predicate
}

type meshNode struct {
	srv    *broker.Server
	cancel context.CancelFunc
	done   chan error
	client string // address
	peer   string
}

func fastConfig(id int) broker.Config { return brokertest.FastConfig(uint32(id)) }

// dialAs opens a peer link to b at addr claiming router id, as a peer
// with creds (nil: plaintext) would; compatible with b in all else.
func dialAs(t *testing.T, b *broker.Broker, addr string, id uint32, creds credentials.TransportCredentials) (transport.Conn, error) {
	t.Helper()
	open := proto.Clone(b.Open()).(*dripv1.Open)
	open.RouterId, open.RouterName = id, fmt.Sprintf("claims-%d", id)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return transport.GRPCDialer{Creds: creds}.Dial(ctx, addr, open)
}

// startMesh starts n brokers; for every edge, the lower ID dials.
func startMesh(t *testing.T, n int, edges [][2]int, mutate func(*broker.Config), opts ...broker.Option) *testMesh {
	t.Helper()
	return startMeshWith(t, n, edges, mutate, nil, opts...)
}

// startMeshWith is startMesh whose brokers' ServerConfigs server edits.
func startMeshWith(t *testing.T, n int, edges [][2]int, mutate func(*broker.Config), server func(int, *broker.ServerConfig), opts ...broker.Option) *testMesh {
	t.Helper()
	m := &testMesh{t: t, n: n, edges: edges, mutate: mutate, server: server, opts: opts, nodes: make([]*meshNode, n), clients: make([]*grpc.ClientConn, n)}
	listeners := loopbackListeners(t, n)
	for i := range n {
		m.nodes[i] = &meshNode{client: listeners[i][0].Addr().String(), peer: listeners[i][1].Addr().String()}
	}
	for i := range n {
		m.startNode(i, listeners[i][0], listeners[i][1])
		cc, err := grpc.NewClient(m.nodes[i].client, grpc.WithTransportCredentials(insecure.NewCredentials()))
		require.NoError(t, err)
		m.clients[i] = cc
	}
	t.Cleanup(m.stop)
	return m
}

func (m *testMesh) config(i int) broker.Config {
	cfg := fastConfig(i)
	for _, e := range m.edges {
		if e[0] == i && e[1] > i || e[1] == i && e[0] > i {
			other := e[0] + e[1] - i
			cfg.Peers = append(cfg.Peers, broker.Peer{ID: uint32(other), Addr: m.nodes[other].peer, Weight: 1})
		}
	}
	if m.mutate != nil {
		m.mutate(&cfg)
	}
	return cfg
}

func (m *testMesh) startNode(i int, cl, pl net.Listener) {
	sc := broker.ServerConfig{ClientListener: cl, PeerListener: pl, StopTimeout: time.Second}
	if m.server != nil {
		m.server(i, &sc)
	}
	srv, err := broker.NewServer(m.config(i), sc, m.opts...)
	require.NoError(m.t, err)
	ctx, cancel := context.WithCancel(context.Background())
	nd := m.nodes[i]
	nd.srv, nd.cancel, nd.done = srv, cancel, make(chan error, 1)
	go func() { nd.done <- srv.Serve(ctx) }()
}

// kill stops broker i gracefully; restart brings it back on its addresses.
func (m *testMesh) kill(i int) {
	nd := m.nodes[i]
	if nd.cancel == nil {
		return
	}
	nd.cancel()
	select {
	case err := <-nd.done:
		require.NoError(m.t, err)
	case <-time.After(10 * time.Second):
		m.t.Fatalf("broker %d did not stop", i)
	}
	nd.cancel = nil
}

func (m *testMesh) restart(i int) {
	nd := m.nodes[i]
	var cl, pl net.Listener
	var err error
	// The port was just released; retry briefly in case the kernel holds it.
	require.Eventually(m.t, func() bool {
		if cl, err = net.Listen("tcp", nd.client); err != nil {
			return false
		}
		if pl, err = net.Listen("tcp", nd.peer); err != nil {
			cl.Close()
			return false
		}
		return true
	}, 5*time.Second, 50*time.Millisecond, "rebind: %v", err)
	m.startNode(i, cl, pl)
}

func (m *testMesh) stop() {
	for _, cc := range m.clients {
		if cc != nil {
			cc.Close()
		}
	}
	for i := range m.nodes {
		if m.nodes[i] != nil {
			m.kill(i)
		}
	}
}

// alive lists the running brokers.
func (m *testMesh) alive() []int {
	var ids []int
	for i, nd := range m.nodes {
		if nd.cancel != nil {
			ids = append(ids, i)
		}
	}
	return ids
}

// waitConverged waits until every running broker reaches exactly the
// running brokers that connect to it and holds each one's advertisement.
func (m *testMesh) waitConverged(reachable map[int][]int) {
	m.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		ok, why := m.converged(reachable)
		if ok {
			return
		}
		if time.Now().After(deadline) {
			m.t.Fatalf("mesh did not converge: %s", why)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (m *testMesh) converged(reachable map[int][]int) (bool, string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	own := map[int]int{}
	views := map[int]node.Inspection{}
	for _, i := range m.alive() {
		in, err := m.nodes[i].srv.Broker().Inspect(ctx)
		if err != nil {
			return false, err.Error()
		}
		views[i] = in
		own[i] = in.Predicates[uint32(i)]
		if want := m.advertised(i); own[i] != want {
			return false, fmt.Sprintf("broker %d advertises %d filters, its subscriptions encode to %d", i, own[i], want)
		}
	}
	for i, in := range views {
		want := reachable[i]
		got := make([]int, len(in.Routers))
		for k, r := range in.Routers {
			got[k] = int(r)
		}
		sort.Ints(got)
		if fmt.Sprint(got) != fmt.Sprint(want) {
			return false, fmt.Sprintf("broker %d reaches %v, want %v", i, got, want)
		}
		for _, r := range want {
			if in.Predicates[uint32(r)] != own[r] {
				return false, fmt.Sprintf("broker %d holds %d filters of broker %d, which advertises %d", i, in.Predicates[uint32(r)], r, own[r])
			}
		}
	}
	return true, ""
}

// advertised is how many Bloom filters broker i should advertise for the
// subscriptions the test holds there (docs/design.md §2: deduplicated, covering
// removed).
func (m *testMesh) advertised(i int) int {
	params := m.config(i).Encoding
	var filters []encoding.Bloom
	for _, s := range m.subs {
		if s.broker == i {
			s.mu.Lock()
			filters = append(filters, params.EncodePredicate(s.pred)...)
			s.mu.Unlock()
		}
	}
	for _, p := range m.extra[i] {
		filters = append(filters, params.EncodePredicate(p)...)
	}
	return len(encoding.Advertise(filters))
}

// allReachable says every running broker reaches every other.
func (m *testMesh) allReachable() map[int][]int {
	r := map[int][]int{}
	for _, i := range m.alive() {
		r[i] = m.alive()
	}
	return r
}

// testSub is a subscription that records what it receives.
type testSub struct {
	broker int
	pred   content.Predicate
	cancel context.CancelFunc
	stream dripv1.Broker_SubscribeClient

	mu     sync.Mutex
	got    map[uint64]int // message ID → deliveries
	total  int
	lost   uint64
	closed chan struct{}
}

func (m *testMesh) subscribe(i int, pred content.Predicate) *testSub {
	m.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	stream, err := dripv1.NewBrokerClient(m.clients[i]).Subscribe(ctx)
	require.NoError(m.t, err)
	require.NoError(m.t, stream.Send(&dripv1.SubscribeRequest{Predicate: &dripv1.Predicate{Text: pred.String()}}))
	first, err := stream.Recv()
	require.NoError(m.t, err)
	require.NotNil(m.t, first.GetSubscribed(), "first event must acknowledge the subscription")
	s := &testSub{broker: i, pred: pred, cancel: cancel, stream: stream, got: map[uint64]int{}, closed: make(chan struct{})}
	go s.collect()
	m.subs = append(m.subs, s)
	m.t.Cleanup(func() { cancel(); <-s.closed })
	return s
}

func (s *testSub) collect() {
	defer close(s.closed)
	for {
		d, err := s.stream.Recv()
		if err != nil {
			return
		}
		s.mu.Lock()
		switch ev := d.Event.(type) {
		case *dripv1.Delivery_Message:
			id := binary.BigEndian.Uint64(ev.Message.Message.Payload)
			s.got[id]++
			s.total++
		case *dripv1.Delivery_Lost:
			s.lost = ev.Lost.Total
		case *dripv1.Delivery_Subscribed:
		}
		s.mu.Unlock()
	}
}

func (s *testSub) received() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.total
}

// publish sends msgs from broker i, each carrying its ID in the payload.
func (m *testMesh) publish(i int, firstID uint64, msgs []content.Message) {
	m.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stream, err := dripv1.NewBrokerClient(m.clients[i]).Publish(ctx)
	require.NoError(m.t, err)
	for k, msg := range msgs {
		pm := clientapi.MessageToProto(msg)
		pm.Payload = binary.BigEndian.AppendUint64(nil, firstID+uint64(k))
		require.NoError(m.t, stream.Send(&dripv1.PublishRequest{Message: pm}))
	}
	sum, err := stream.CloseAndRecv()
	require.NoError(m.t, err)
	require.Equal(m.t, uint64(len(msgs)), sum.Accepted)
}

// expectExact waits until every subscriber received exactly the messages
// its predicate matches (by the oracle), then checks for stragglers.
func expectExact(t *testing.T, subs []*testSub, msgs map[uint64]content.Message) {
	t.Helper()
	want := make([]map[uint64]bool, len(subs))
	total := 0
	for k, s := range subs {
		want[k] = map[uint64]bool{}
		for id, msg := range msgs {
			if s.pred.Matches(msg) {
				want[k][id] = true
				total++
			}
		}
	}
	got := func() int {
		n := 0
		for _, s := range subs {
			n += s.received()
		}
		return n
	}
	require.Eventually(t, func() bool { return got() >= total }, 15*time.Second, 10*time.Millisecond,
		"deliveries: got %d, want %d", got(), total)
	time.Sleep(100 * time.Millisecond) // let duplicates or false positives show up
	for k, s := range subs {
		s.mu.Lock()
		for id, n := range s.got {
			require.Truef(t, want[k][id], "subscriber %d at broker %d (%s) got message %d it does not match: %s",
				k, s.broker, s.pred, id, msgs[id])
			require.Equalf(t, 1, n, "subscriber %d got message %d %d times", k, id, n)
		}
		for id := range want[k] {
			require.Containsf(t, s.got, id, "subscriber %d at broker %d (%s) missed message %d: %s", k, s.broker, s.pred, id, msgs[id])
		}
		require.Zero(t, s.lost)
		s.mu.Unlock()
	}
}

// randomTopology returns a random connected graph: a random spanning tree
// plus extra edges.
func randomTopology(rng *rand.Rand, n, extra int) [][2]int {
	var edges [][2]int
	have := map[[2]int]bool{}
	add := func(a, b int) {
		if a > b {
			a, b = b, a
		}
		if a != b && !have[[2]int{a, b}] {
			have[[2]int{a, b}] = true
			edges = append(edges, [2]int{a, b})
		}
	}
	perm := rng.Perm(n)
	for k := 1; k < n; k++ {
		add(perm[k], perm[rng.IntN(k)])
	}
	for range extra {
		add(rng.IntN(n), rng.IntN(n))
	}
	return edges
}

// serveUntilCleanup serves srv until the test ends, and then requires that
// it stopped cleanly.
func serveUntilCleanup(t *testing.T, srv *broker.Server) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
}

// loopbackListeners opens n brokers' listeners on loopback ports: [i][0]
// for clients, [i][1] for peers.
func loopbackListeners(t *testing.T, n int) [][2]net.Listener {
	t.Helper()
	lis := make([][2]net.Listener, n)
	for i := range lis {
		for j := range lis[i] {
			l, err := net.Listen("tcp", "127.0.0.1:0")
			require.NoError(t, err)
			lis[i][j] = l
		}
	}
	return lis
}
