package transport

import (
	"context"
	"math"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"

	dripv1 "github.com/dripmesh/drip/api/proto/drip/v1"
)

// recordingListener hands every accepted connection to conns as well.
type recordingListener struct {
	net.Listener
	conns chan net.Conn
}

func (l recordingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.conns <- c
	}
	return c, err
}

// A peer link's TCP connection keeps at most the bound unsent at both
// ends: the dialled one (GRPCDialer) and the accepted one (BoundUnsent),
// read back from the sockets once the link is up.
func TestNotSentLowatOnBothEnds(t *testing.T) {
	if !NotSentLowatSupported {
		t.Skip("TCP_NOTSENT_LOWAT is not available on this platform")
	}
	for _, lowat := range []int{DefaultNotSentLowat, 4096, 1 << 20} {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		accepted := recordingListener{lis, make(chan net.Conn, 4)}
		bounded, err := BoundUnsent(accepted, lowat, func(err error) { t.Error(err) })
		require.NoError(t, err)
		srv := grpc.NewServer(PeerServerOptions()...)
		dripv1.RegisterPeerServer(srv, NewPeerServer(open(2), func(c Conn) { <-c.Done() }))
		go func() { _ = srv.Serve(bounded) }()

		dialled := make(chan net.Conn, 4)
		d := GRPCDialer{NotSentLowat: lowat, DialContext: func(ctx context.Context, addr string) (net.Conn, error) {
			c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
			if err == nil {
				dialled <- c
			}
			return c, err
		}}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		conn, err := d.Dial(ctx, "passthrough:///"+lis.Addr().String(), open(1))
		cancel()
		require.NoError(t, err, "lowat %d", lowat)
		for side, ch := range map[string]chan net.Conn{"dialled": dialled, "accepted": accepted.conns} {
			c := <-ch
			got, err := NotSentLowat(c)
			require.NoError(t, err, "%s, lowat %d", side, lowat)
			assert.Equal(t, lowat, got, "%s connection's TCP_NOTSENT_LOWAT", side)
		}
		conn.Close(nil)
		srv.Stop()
	}
}

// Without a bound both ends keep the kernel's default (the host's
// net.ipv4.tcp_notsent_lowat), which Linux reads back as 0 on a dialled
// socket and -1 on an accepted one; so the test above sees what the code
// set, not what a socket starts with.
func TestNotSentLowatZeroLeavesTheKernelDefault(t *testing.T) {
	if !NotSentLowatSupported {
		t.Skip("TCP_NOTSENT_LOWAT is not available on this platform")
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	l, err := BoundUnsent(lis, 0, nil)
	require.NoError(t, err)
	assert.Equal(t, lis, l, "a zero bound wraps nothing")
	defer l.Close()
	c, err := net.Dial("tcp", lis.Addr().String())
	require.NoError(t, err)
	defer c.Close()
	s, err := l.Accept()
	require.NoError(t, err)
	defer s.Close()
	require.NoError(t, SetNotSentLowat(c, 0))
	for _, x := range []net.Conn{c, s} {
		got, err := NotSentLowat(x)
		require.NoError(t, err)
		assert.Contains(t, []int{0, -1}, got, "an unbounded socket")
	}
}

// A bound the kernel would misread (it takes a negative int as unbounded)
// or that does not fit the option is refused, by name, wherever it is
// given; the socket keeps what it had.
func TestNotSentLowatRefusesBadValues(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer lis.Close()
	c, err := net.Dial("tcp", lis.Addr().String())
	require.NoError(t, err)
	defer c.Close()
	for _, bad := range []int{-1, math.MinInt32, math.MaxInt32 + 1} {
		err := CheckNotSentLowat(bad)
		require.Error(t, err, "%d", bad)
		assert.Contains(t, err.Error(), "TCP_NOTSENT_LOWAT")
		assert.Contains(t, err.Error(), "want 0 (the kernel's default) or a byte count")

		_, err = BoundUnsent(lis, bad, nil)
		assert.Error(t, err, "listener, %d", bad)
		assert.Error(t, SetNotSentLowat(c, bad), "connection, %d", bad)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err = GRPCDialer{NotSentLowat: bad}.Dial(ctx, lis.Addr().String(), open(1))
		cancel()
		require.Error(t, err, "dialer, %d", bad)
		assert.Contains(t, err.Error(), "dial peer "+lis.Addr().String())
		assert.Contains(t, err.Error(), "TCP_NOTSENT_LOWAT")
	}
	if NotSentLowatSupported {
		got, err := NotSentLowat(c)
		require.NoError(t, err)
		assert.Contains(t, []int{0, -1}, got, "a refused bound must not reach the socket")
	}
	for _, good := range []int{0, 1, DefaultNotSentLowat, math.MaxInt32} {
		assert.NoError(t, CheckNotSentLowat(good), "%d", good)
	}
}

// Connections that are not TCP have no kernel backlog to bound and are
// left alone.
func TestNotSentLowatLeavesOtherConnsAlone(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	assert.NoError(t, SetNotSentLowat(a, DefaultNotSentLowat))
	_, err := NotSentLowat(a)
	assert.Error(t, err)
}
