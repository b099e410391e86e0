package broker

import (
	"context"
	"net"
	"sync"

	"github.com/dripmesh/drip/internal/node"
	"google.golang.org/grpc/peer"
)

// grpcWriteQuota is how far grpc-go lets one server stream run ahead of
// its connection's socket (defaultWriteQuota, fixed in grpc-go): a Send
// returns once its message is queued in the transport, and only blocks
// when the stream already has this much queued there.
const grpcWriteQuota = 64 << 10

// connMeter charges to the memory budget the delivery bytes that client
// connections have been handed by their Subscribe streams but have not
// written to their sockets yet: what gRPC holds. Each stream may hold up
// to its write quota plus the message that crossed it, so thousands of
// subscribers that lag hold more than all the queues may. Those bytes cannot be shed; counting
// them makes the queues shed instead, and keeps the total within the
// budget (docs/design.md §14).
//
// The meter sits under TLS and HTTP/2: it sees every byte a connection
// writes, deliveries or not, and cannot tell its streams apart. So a
// connection's count is what its streams handed over less what it wrote,
// never below zero. Framing, acknowledgements and other streams' bytes
// make the count err low, never high: a count that erred high would grow
// without bound on a busy connection; one that errs low is at most what
// gRPC really holds. What a stream leaves behind when it ends (gRPC
// discards it) is trimmed when it ends (streamDone).
type connMeter struct {
	budget *node.Budget
	mu     sync.Mutex
	// conns are the open metered connections by remote address, as
	// gRPC's peer information names them; nil marks an address two
	// connections shared (not TCP), whose streams go unmetered.
	conns map[string]*connHeld
}

func newConnMeter(b *node.Budget) *connMeter {
	return &connMeter{budget: b, conns: map[string]*connHeld{}}
}

// listener meters the connections lis accepts.
func (m *connMeter) listener(lis net.Listener) net.Listener {
	return meteredListener{Listener: lis, m: m}
}

// of is the count of the connection a stream arrived on, nil when that
// connection is not metered (a listener the meter does not wrap).
func (m *connMeter) of(ctx context.Context) *connHeld {
	p, ok := peer.FromContext(ctx)
	if !ok || p.Addr == nil {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.conns[p.Addr.String()]
}

func (m *connMeter) accepted(c net.Conn) net.Conn {
	key := c.RemoteAddr().String()
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, dup := m.conns[key]; dup {
		m.conns[key] = nil
		return c
	}
	h := &connHeld{budget: m.budget}
	m.conns[key] = h
	return &meteredConn{Conn: c, h: h, forget: func() {
		m.mu.Lock()
		if m.conns[key] == h {
			delete(m.conns, key)
		}
		m.mu.Unlock()
		h.close()
	}}
}

// connHeld is one connection's count of delivery bytes gRPC holds.
type connHeld struct {
	budget *node.Budget
	mu     sync.Mutex
	n      int64
	// streams is how many Subscribe streams send on the connection, and
	// largest the largest event one has handed over: together they bound
	// what gRPC can hold for it.
	streams int
	largest int64
	closed  bool
}

// streamStarted and streamDone bracket a Subscribe stream's sending.
func (h *connHeld) streamStarted() {
	h.mu.Lock()
	h.streams++
	h.mu.Unlock()
}

// streamDone trims the count to what the streams left can hold: gRPC
// discards what an ended stream had not written.
func (h *connHeld) streamDone() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.streams--
	if most := int64(h.streams) * (grpcWriteQuota + h.largest); h.n > most {
		h.budget.Sending(most - h.n)
		h.n = most
	}
}

// handed counts an event a stream is about to give gRPC. It is counted
// before, so that no write of it can come first and be lost to the floor
// at zero.
func (h *connHeld) handed(n int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return
	}
	h.n += n
	h.largest = max(h.largest, n)
	h.budget.Sending(n)
}

// wrote takes what the connection wrote off the count.
func (h *connHeld) wrote(n int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if d := min(h.n, int64(n)); d > 0 {
		h.n -= d
		h.budget.Sending(-d)
	}
}

// close gives the whole count back: the connection holds nothing more.
func (h *connHeld) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.budget.Sending(-h.n)
	h.n, h.closed = 0, true
}

type meteredListener struct {
	net.Listener
	m *connMeter
}

func (l meteredListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return l.m.accepted(c), nil
}

type meteredConn struct {
	net.Conn
	h      *connHeld
	once   sync.Once
	forget func()
}

func (c *meteredConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.h.wrote(n)
	return n, err
}

func (c *meteredConn) Close() error {
	c.once.Do(c.forget)
	return c.Conn.Close()
}
