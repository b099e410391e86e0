package broker

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"testing"

	"github.com/dripmesh/drip/internal/node"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/peer"
)

// TestConnHeldAgainstReference drives random streams over a few
// connections: events handed over, the connection writing some of what
// one stream holds, sometimes with bytes of its own (framing,
// acknowledgements), streams ending with bytes unwritten, connections
// closing. Against what gRPC truly holds: the count is exact while the
// connection writes nothing of its own and no stream ended holding
// bytes; with bytes of its own it errs low, never high; what ended
// streams left is trimmed to what the open streams can hold; and the
// budget holds the counts' sum.
func TestConnHeldAgainstReference(t *testing.T) {
	for seed := range uint64(200) {
		rng := rand.New(rand.NewPCG(seed, 7))
		b := &node.Budget{}
		const nconns = 3
		var (
			conns   [nconns]*connHeld
			held    [nconns][]int64 // the truth: per open stream, what gRPC holds
			largest [nconns]int64
			// Since the count was last zero: the connection wrote bytes
			// of its own; a stream ended holding bytes.
			own, residue [nconns]bool
		)
		for i := range conns {
			conns[i] = &connHeld{budget: b}
		}
		truth := func(i int) (n int64) {
			for _, h := range held[i] {
				n += h
			}
			return n
		}
		for step := range 300 {
			i := rng.IntN(nconns)
			h := conns[i]
			if h.closed {
				continue
			}
			where := fmt.Sprintf("seed %d step %d conn %d", seed, step, i)
			switch op := rng.IntN(10); {
			case op < 2 || len(held[i]) == 0:
				h.streamStarted()
				held[i] = append(held[i], 0)
			case op < 5:
				s, n := rng.IntN(len(held[i])), int64(1+rng.IntN(20<<10))
				h.handed(n)
				held[i][s] += n
				largest[i] = max(largest[i], n)
			case op < 8:
				s := rng.IntN(len(held[i]))
				n, extra := rng.Int64N(held[i][s]+1), int64(0)
				if rng.IntN(3) == 0 {
					extra, own[i] = int64(1+rng.IntN(100)), true
				}
				held[i][s] -= n
				h.wrote(int(n + extra))
			case op < 9:
				s := rng.IntN(len(held[i]))
				residue[i] = residue[i] || held[i][s] > 0
				held[i] = append(held[i][:s], held[i][s+1:]...)
				h.streamDone()
				require.LessOrEqual(t, h.n, int64(len(held[i]))*(grpcWriteQuota+largest[i]), where+": trimmed to what the open streams can hold")
			default:
				h.close()
				held[i] = nil
				require.Zero(t, h.n, where)
			}
			if h.n == 0 {
				residue[i] = false
			}
			if truth(i) == 0 {
				own[i] = false
			}
			require.GreaterOrEqual(t, h.n, int64(0), where)
			switch {
			case h.closed || residue[i]:
			case own[i]:
				require.LessOrEqual(t, h.n, truth(i), where+": low, never high")
			default:
				require.Equal(t, truth(i), h.n, where+": exact")
			}
			var sum int64
			for _, c := range conns {
				sum += c.n
			}
			require.Equal(t, sum, b.InClients(), where)
			require.Equal(t, sum, b.Used(), where)
		}
	}
}

func TestConnHeldAfterClose(t *testing.T) {
	b := &node.Budget{}
	h := &connHeld{budget: b}
	h.streamStarted()
	h.handed(100)
	h.close()
	assert.Zero(t, b.Used(), "closing gives back the whole count")
	h.handed(50)
	assert.Zero(t, b.Used(), "a stream that sends after its connection closed counts nothing")
	h.wrote(10)
	h.streamDone()
	assert.Zero(t, b.Used())
	assert.Zero(t, b.InClients())
}

// pipeListener hands out the given connections, then reports closed.
type pipeListener struct {
	conns chan net.Conn
}

func (l pipeListener) Accept() (net.Conn, error) {
	c, ok := <-l.conns
	if !ok {
		return nil, net.ErrClosed
	}
	return c, nil
}
func (pipeListener) Close() error   { return nil }
func (pipeListener) Addr() net.Addr { return &net.TCPAddr{} }

// addrConn is one end of a pipe that claims a remote address.
type addrConn struct {
	net.Conn
	remote net.Addr
}

func (c addrConn) RemoteAddr() net.Addr { return c.remote }

func TestConnMeterFindsTheStreamsConnection(t *testing.T) {
	b := &node.Budget{}
	m := newConnMeter(b)
	conns := make(chan net.Conn, 4)
	lis := m.listener(pipeListener{conns: conns})
	remote := func(port int) net.Addr { return &net.TCPAddr{IP: net.IPv4(10, 0, 0, 1), Port: port} }
	ctxOf := func(a net.Addr) context.Context { return peer.NewContext(context.Background(), &peer.Peer{Addr: a}) }

	ours, theirs := net.Pipe()
	defer theirs.Close()
	go func() { _, _ = theirs.Read(make([]byte, 64)) }()
	conns <- addrConn{Conn: ours, remote: remote(1)}
	c, err := lis.Accept()
	require.NoError(t, err)
	h := m.of(ctxOf(remote(1)))
	require.NotNil(t, h)
	assert.Nil(t, m.of(ctxOf(remote(2))), "another address")
	assert.Nil(t, m.of(context.Background()), "a context without a peer")

	h.streamStarted()
	h.handed(100)
	assert.Equal(t, int64(100), b.Used())
	n, err := c.Write(make([]byte, 40))
	require.NoError(t, err)
	assert.Equal(t, 40, n)
	assert.Equal(t, int64(60), b.Used(), "what the connection wrote is off the count")
	require.NoError(t, c.Close())
	assert.Zero(t, b.Used(), "closing gives the rest back")
	assert.Nil(t, m.of(ctxOf(remote(1))), "and forgets the connection")

	// Two connections that claim one address (not TCP): neither's
	// streams are metered, rather than one charged for the other.
	a1, _ := net.Pipe()
	a2, _ := net.Pipe()
	conns <- addrConn{Conn: a1, remote: remote(3)}
	conns <- addrConn{Conn: a2, remote: remote(3)}
	c1, err := lis.Accept()
	require.NoError(t, err)
	_, err = lis.Accept()
	require.NoError(t, err)
	assert.Nil(t, m.of(ctxOf(remote(3))))
	require.NoError(t, c1.Close())
	assert.Nil(t, m.of(ctxOf(remote(3))))
}

// TestSendBuffersFitWhatTheyHold: a pooled buffer is less than twice the
// event encoded into it, so what gRPC holds stays near what the meter
// counts.
func TestSendBuffersFitWhatTheyHold(t *testing.T) {
	pool := newSendBuffers()
	for _, size := range []int{1 << 10, 1<<10 + 1, 3000, 4 << 10, 40 << 10, maxBatchBytes, maxBatchBytes + 4<<10, 4 * maxBatchBytes, 1 << 20} {
		b := pool.Get(size)
		assert.Len(t, *b, size)
		assert.Less(t, cap(*b), 2*size, "size %d", size)
		pool.Put(b)
	}
}
