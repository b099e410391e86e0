package brokertest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/test/bufconn"

	dripv1 "github.com/dripmesh/drip/api/proto/drip/v1"
	"github.com/dripmesh/drip/internal/broker"
	"github.com/dripmesh/drip/internal/transport"
)

// FastConfig is a broker configuration for tests on real goroutines:
// production behaviour with timers short enough that a mesh converges in
// tens of milliseconds and a graceful stop takes about a second.
func FastConfig(id uint32) broker.Config {
	cfg := broker.DefaultConfig(id, fmt.Sprintf("b%d", id))
	cfg.Mesh = "test"
	cfg.TickInterval = 10 * time.Millisecond
	cfg.PredicateRebuildInterval = 10 * time.Millisecond
	cfg.AdvertiseInterval = 10 * time.Millisecond
	cfg.LinkState.HelloInterval = 50 * time.Millisecond
	cfg.LinkState.DeadInterval = 400 * time.Millisecond
	cfg.DialBackoffMin = 20 * time.Millisecond
	cfg.DialBackoffMax = 200 * time.Millisecond
	cfg.DrainTimeout = 2 * time.Second
	cfg.DrainOverlap = 200 * time.Millisecond
	cfg.RerouteGrace = time.Second // an upper bound: neighbours finish in milliseconds
	return cfg
}

// Cluster runs real brokers — broker.Broker with its goroutines, as
// production runs it — linked over a transport.MemNetwork, each serving
// the client API on a loopback port that stays the same across restarts,
// so client, CLI and bench tests talk to the real thing. Broker i is
// router i; its client address is Addr(i).
type Cluster struct {
	t         testing.TB
	mem       *transport.MemNetwork
	edges     [][2]int
	configure func(*broker.Config)
	srvOpts   []grpc.ServerOption
	addrs     []string
	// inMemory holds the in-memory listener of each client address (nil:
	// loopback ports), under mu; hung are the connections made to
	// HangingAddr, closed when the cluster stops.
	inMemory map[string]*bufconn.Listener
	hung     []net.Conn

	mu      sync.Mutex
	members []*member
}

// ClusterOption adjusts a Cluster.
type ClusterOption func(*Cluster)

// InMemory serves the brokers' client API on in-memory listeners instead
// of loopback ports: clients reach them only through DialOption, and
// nothing of the cluster touches the network, so it runs inside a
// testing/synctest bubble, in virtual time. Addresses are in TEST-NET-1
// (RFC 5737), which no network routes.
func InMemory() ClusterOption {
	return func(c *Cluster) { c.inMemory = map[string]*bufconn.Listener{} }
}

// WithServerOptions adds gRPC server options (interceptors that inject
// faults, say) to every broker's client server.
func WithServerOptions(opts ...grpc.ServerOption) ClusterOption {
	return func(c *Cluster) { c.srvOpts = append(c.srvOpts, opts...) }
}

type member struct {
	cfg    broker.Config
	b      *broker.Broker
	reg    *prometheus.Registry
	srv    *grpc.Server
	lis    net.Listener
	dialer *trackingDialer
	cancel context.CancelFunc
	done   chan struct{}
}

// NewCluster starts n brokers with links along edges (the lower ID dials);
// configure, if not nil, adjusts each configuration after FastConfig. The
// brokers stop when the test ends.
func NewCluster(t testing.TB, n int, edges [][2]int, configure func(*broker.Config), opts ...ClusterOption) *Cluster {
	t.Helper()
	c := &Cluster{t: t, mem: transport.NewMemNetwork(), edges: edges, configure: configure, members: make([]*member, n), addrs: make([]string, n)}
	for _, o := range opts {
		o(c)
	}
	for i := range n {
		c.start(i)
	}
	t.Cleanup(c.stopAll)
	return c
}

func peerAddr(i int) string { return fmt.Sprintf("peer-b%d", i) }

// Addr is broker i's client address.
func (c *Cluster) Addr(i int) string { return c.addrs[i] }

// Addrs lists every broker's client address.
func (c *Cluster) Addrs() []string { return append([]string(nil), c.addrs...) }

// Target lists every broker's client address, comma-separated, starting
// with broker first: a client dialled with it fails over in that order.
func (c *Cluster) Target(first int) string {
	var addrs []string
	for k := range c.members {
		addrs = append(addrs, c.Addr((first+k)%len(c.members)))
	}
	return strings.Join(addrs, ",")
}

// DialOption is what a client needs to reach the cluster beyond its
// addresses: nothing on loopback ports, and with InMemory the dialer of the
// in-memory listeners (DialContext).
func (c *Cluster) DialOption() grpc.DialOption {
	if c.inMemory == nil {
		return grpc.EmptyDialOption{}
	}
	return grpc.WithContextDialer(c.DialContext)
}

// HangingAddr is an address of an InMemory cluster that takes
// connections and never answers on them: a pod replaced just before, which
// cluster DNS still maps to the old address, say.
const HangingAddr = "192.0.2.254:7000"

// DialContext connects to a broker's client address, on loopback or in
// memory.
func (c *Cluster) DialContext(ctx context.Context, addr string) (net.Conn, error) {
	if c.inMemory == nil {
		return (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	}
	c.mu.Lock()
	if addr == HangingAddr {
		defer c.mu.Unlock()
		conn, silent := net.Pipe()
		c.hung = append(c.hung, silent)
		return conn, nil
	}
	lis := c.inMemory[addr]
	c.mu.Unlock()
	if lis == nil {
		return nil, fmt.Errorf("dial %s: connection refused", addr)
	}
	return lis.DialContext(ctx)
}

func (c *Cluster) config(i int) broker.Config {
	cfg := FastConfig(uint32(i))
	for _, e := range c.edges {
		if e[0] == i && e[1] > i || e[1] == i && e[0] > i {
			other := e[0] + e[1] - i
			cfg.Peers = append(cfg.Peers, broker.Peer{ID: uint32(other), Addr: peerAddr(other), Weight: 1})
		}
	}
	if c.configure != nil {
		c.configure(&cfg)
	}
	return cfg
}

func (c *Cluster) start(i int) {
	c.t.Helper()
	reg := prometheus.NewRegistry()
	d := &trackingDialer{inner: c.mem.Dialer()}
	b, err := broker.New(c.config(i), broker.WithDialer(d), broker.WithRegisterer(reg))
	if err != nil {
		c.t.Fatalf("broker %d: %v", i, err)
	}
	lis, err := c.listen(i)
	if err != nil {
		c.t.Fatalf("broker %d: %v", i, err)
	}
	m := &member{cfg: b.Config(), b: b, reg: reg, dialer: d, srv: grpc.NewServer(append(broker.ClientServerOptions(), append(c.srvOpts, grpc.MaxRecvMsgSize(broker.ReceiveLimit(b.Config())))...)...), lis: lis, done: make(chan struct{})}
	dripv1.RegisterBrokerServer(m.srv, b.ClientService())
	c.mem.Listen(peerAddr(i), b.Open(), func(conn transport.Conn) {
		d.track(conn)
		b.HandleLink(conn)
	})
	ctx, cancel := context.WithCancel(context.Background())
	m.cancel = cancel
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = m.srv.Serve(m.lis)
	}()
	go func() {
		defer close(m.done)
		_ = b.Run(ctx)
		<-served
	}()
	c.mu.Lock()
	c.members[i] = m
	c.mu.Unlock()
}

// listen binds broker i's client port: a fresh one the first time, the
// same one after a restart (retrying while the kernel still holds it).
func (c *Cluster) listen(i int) (net.Listener, error) {
	if c.inMemory != nil {
		c.addrs[i] = fmt.Sprintf("192.0.2.%d:7000", i+1)
		lis := bufconn.Listen(1 << 20)
		c.mu.Lock()
		c.inMemory[c.addrs[i]] = lis
		c.mu.Unlock()
		return lis, nil
	}
	if c.addrs[i] == "" {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err == nil {
			c.addrs[i] = lis.Addr().String()
		}
		return lis, err
	}
	var err error
	for range 100 {
		var lis net.Listener
		if lis, err = net.Listen("tcp", c.addrs[i]); err == nil {
			return lis, nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil, err
}

// Broker returns broker i, nil while it is down.
func (c *Cluster) Broker(i int) *broker.Broker {
	c.mu.Lock()
	defer c.mu.Unlock()
	if m := c.members[i]; m != nil {
		return m.b
	}
	return nil
}

// Registry returns broker i's metrics.
func (c *Cluster) Registry(i int) *prometheus.Registry {
	c.mu.Lock()
	defer c.mu.Unlock()
	if m := c.members[i]; m != nil {
		return m.reg
	}
	return nil
}

// Kill stops broker i abruptly, as kill -9 would: its peer links and client
// streams break at once, and nothing is drained.
func (c *Cluster) Kill(i int) {
	c.mu.Lock()
	m := c.members[i]
	c.members[i] = nil
	c.mu.Unlock()
	if m == nil {
		return
	}
	c.mem.Unlisten(peerAddr(i))
	m.dialer.cutAll()
	m.srv.Stop()
	m.cancel()
	<-m.done
}

// Stop shuts broker i down gracefully, as SIGTERM does, and waits until it
// has: clients are told to move, the broker withdraws and drains.
func (c *Cluster) Stop(i int) {
	c.mu.Lock()
	m := c.members[i]
	c.mu.Unlock()
	if m == nil {
		return
	}
	m.cancel()
	<-m.b.Stopped() // the drain is over; streams still open end now
	c.mu.Lock()
	c.members[i] = nil
	c.mu.Unlock()
	c.mem.Unlisten(peerAddr(i))
	m.srv.Stop()
	<-m.done
}

// Restart starts broker i again, afresh.
func (c *Cluster) Restart(i int) {
	c.mu.Lock()
	up := c.members[i] != nil
	c.mu.Unlock()
	if !up {
		c.start(i)
	}
}

func (c *Cluster) stopAll() {
	for i := range c.members {
		c.Kill(i)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, conn := range c.hung {
		conn.Close()
	}
}

// WaitConverged waits until every running broker knows every other running
// broker, they agree on one link-state database, and none has a change to
// advertise.
func (c *Cluster) WaitConverged(ctx context.Context) error {
	for {
		if ok, why := c.converged(ctx); ok {
			return nil
		} else if err := ctx.Err(); err != nil {
			return fmt.Errorf("not converged: %s: %w", why, err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func (c *Cluster) converged(ctx context.Context) (bool, string) {
	c.mu.Lock()
	var running []*member
	for _, m := range c.members {
		if m != nil {
			running = append(running, m)
		}
	}
	c.mu.Unlock()
	var digest uint64
	for k, m := range running {
		in, err := m.b.Inspect(ctx)
		if err != nil {
			return false, err.Error()
		}
		switch {
		case len(in.Routers) != len(running):
			return false, fmt.Sprintf("%s knows %d of %d routers", m.cfg.Name, len(in.Routers), len(running))
		case in.Pending:
			return false, m.cfg.Name + " has a change to advertise"
		case k > 0 && in.Digest != digest:
			return false, m.cfg.Name + "'s database differs"
		}
		digest = in.Digest
	}
	return true, ""
}

// trackingDialer remembers the links a broker dialled or accepted, so that
// Kill can break them all at once.
type trackingDialer struct {
	inner transport.Dialer
	mu    sync.Mutex
	conns []transport.Conn
}

func (d *trackingDialer) Dial(ctx context.Context, addr string, local *dripv1.Open) (transport.Conn, error) {
	conn, err := d.inner.Dial(ctx, addr, local)
	if err == nil {
		d.track(conn)
	}
	return conn, err
}

func (d *trackingDialer) track(conn transport.Conn) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.conns = append(d.conns, conn)
}

func (d *trackingDialer) cutAll() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, conn := range d.conns {
		conn.Close(errors.New("broker killed"))
	}
	d.conns = nil
}
