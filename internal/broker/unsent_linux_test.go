package broker_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/dripmesh/drip/internal/broker"
	"github.com/dripmesh/drip/internal/transport"
)

// acceptLog hands every accepted connection to conns as well.
type acceptLog struct {
	net.Listener
	conns chan net.Conn
}

func (l acceptLog) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		select {
		case l.conns <- c:
		default:
		}
	}
	return c, err
}

// socketAt finds the file descriptor of this process's TCP socket bound to
// local: the dialling broker's end of a peer link, which its gRPC client
// holds out of reach.
func socketAt(t *testing.T, local *net.TCPAddr) int {
	t.Helper()
	for fd := range 4096 {
		sa, err := unix.Getsockname(fd)
		if err != nil {
			continue
		}
		if in, ok := sa.(*unix.SockaddrInet4); ok && in.Port == local.Port && net.IP(in.Addr[:]).Equal(local.IP) {
			return fd
		}
	}
	t.Fatalf("no socket of this process is bound to %s", local)
	return -1
}

// TestPeerConnectionsBoundUnsent: a broker bounds the unsent bytes of the
// peer connections it dials and of those it accepts
// (Config.PeerNotSentLowat, --peer-notsent-lowat), read back from both
// sockets of a live link; 0 leaves the kernel's default.
func TestPeerConnectionsBoundUnsent(t *testing.T) {
	for _, lowat := range []int{transport.DefaultNotSentLowat, 4096, 0} {
		lis := loopbackListeners(t, 2)
		accepted := acceptLog{lis[1][1], make(chan net.Conn, 8)}
		lis[1][1] = accepted
		servers := make([]*broker.Server, 2)
		for i := range servers {
			cfg := fastConfig(i)
			cfg.PeerNotSentLowat = lowat
			if i == 0 {
				cfg.Peers = []broker.Peer{{ID: 1, Addr: lis[1][1].Addr().String(), Weight: 1}}
			}
			srv, err := broker.NewServer(cfg, broker.ServerConfig{ClientListener: lis[i][0], PeerListener: lis[i][1], StopTimeout: time.Second})
			require.NoError(t, err)
			servers[i] = srv
			serveUntilCleanup(t, srv)
		}
		require.Eventually(t, func() bool {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			in, err := servers[0].Broker().Inspect(ctx)
			return err == nil && len(in.Links) == 1
		}, 10*time.Second, 20*time.Millisecond, "b0 never linked to b1")

		var c net.Conn
		select {
		case c = <-accepted.conns:
		case <-time.After(5 * time.Second):
			t.Fatal("b1 accepted no peer connection")
		}
		got, err := transport.NotSentLowat(c)
		require.NoError(t, err)
		dialled, err := unix.GetsockoptInt(socketAt(t, c.RemoteAddr().(*net.TCPAddr)), unix.IPPROTO_TCP, unix.TCP_NOTSENT_LOWAT)
		require.NoError(t, err)
		if lowat == 0 {
			assert.Contains(t, []int{0, -1}, got, "accepted end, unbounded")
			assert.Contains(t, []int{0, -1}, dialled, "dialled end, unbounded")
			continue
		}
		assert.Equal(t, lowat, got, "accepted end (b1)")
		assert.Equal(t, lowat, dialled, "dialled end (b0)")
	}
}

// A bound the kernel would misread is refused before a broker starts.
func TestPeerNotSentLowatRefused(t *testing.T) {
	cfg := fastConfig(0)
	cfg.PeerNotSentLowat = -1
	err := cfg.Validate()
	require.Error(t, err)
	assert.Equal(t, "peer connections: TCP_NOTSENT_LOWAT -1: want 0 (the kernel's default) or a byte count up to 2147483647", err.Error())
	_, err = broker.NewServer(cfg, broker.ServerConfig{ClientAddr: "127.0.0.1:0", PeerAddr: "127.0.0.1:0"})
	assert.ErrorContains(t, err, "TCP_NOTSENT_LOWAT -1")
}
