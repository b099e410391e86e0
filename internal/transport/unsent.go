package transport

import (
	"fmt"
	"math"
	"net"
)

// DefaultNotSentLowat is the bound brokers put on the bytes each peer
// connection keeps unsent in the kernel (TCP_NOTSENT_LOWAT). Without it
// the kernel's send buffer, which autotuning grows to megabytes, holds
// seconds of a slow WAN link below the link's queue, where control frames
// wait behind data and where nothing is ever dropped. 16 KiB is a few
// milliseconds of a 100 Mbit/s link and a quarter of a second at 500
// kbit/s; it does not bound what TCP keeps in flight, so a fast link's
// throughput does not depend on it (the writer is woken when half of it
// has left; docs/design.md §4).
const DefaultNotSentLowat = 16 << 10

// CheckNotSentLowat says whether lowat is a bound SetNotSentLowat takes:
// 0 leaves the kernel's default (net.ipv4.tcp_notsent_lowat, unbounded
// unless the host sets it), a positive count of bytes bounds the unsent
// backlog. The kernel itself takes any int and reads a negative one as
// unbounded, so a bad value is refused here instead.
func CheckNotSentLowat(lowat int) error {
	if lowat < 0 || lowat > math.MaxInt32 {
		return fmt.Errorf("TCP_NOTSENT_LOWAT %d: want 0 (the kernel's default) or a byte count up to %d", lowat, math.MaxInt32)
	}
	return nil
}

// SetNotSentLowat bounds the bytes c keeps unsent in the kernel
// (TCP_NOTSENT_LOWAT): a write blocks once that many are queued and not yet
// sent, so the backlog stays in the writer's own queue. lowat 0 leaves c
// alone. A connection that is not TCP (in-process pipes, Unix sockets)
// has no such backlog and is left alone too. On platforms without the
// option (other than Linux and macOS) it does nothing; see
// NotSentLowatSupported.
func SetNotSentLowat(c net.Conn, lowat int) error {
	if err := CheckNotSentLowat(lowat); err != nil {
		return err
	}
	tc, ok := c.(*net.TCPConn)
	if !ok || lowat == 0 || !NotSentLowatSupported {
		return nil
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return fmt.Errorf("TCP_NOTSENT_LOWAT %d on %s: %w", lowat, c.RemoteAddr(), err)
	}
	var serr error
	if err := raw.Control(func(fd uintptr) { serr = setNotSentLowat(fd, lowat) }); err != nil {
		return fmt.Errorf("TCP_NOTSENT_LOWAT %d on %s: %w", lowat, c.RemoteAddr(), err)
	}
	if serr != nil {
		return fmt.Errorf("TCP_NOTSENT_LOWAT %d on %s: %w", lowat, c.RemoteAddr(), serr)
	}
	return nil
}

// NotSentLowat reads c's TCP_NOTSENT_LOWAT back, for tests and
// diagnostics. Linux reads an unset one (the host's default,
// net.ipv4.tcp_notsent_lowat) as 0 or -1.
func NotSentLowat(c net.Conn) (int, error) {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return 0, fmt.Errorf("TCP_NOTSENT_LOWAT: %T is not a TCP connection", c)
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return 0, err
	}
	var v int
	var serr error
	if err := raw.Control(func(fd uintptr) { v, serr = getNotSentLowat(fd) }); err != nil {
		return 0, err
	}
	return v, serr
}

// BoundUnsent wraps l so that every connection it accepts keeps at most
// lowat bytes unsent in the kernel (SetNotSentLowat); lowat 0 returns l
// itself. A connection the option cannot be set on is kept, unbounded,
// and reported to onErr (if set): the bound is a matter of latency, and an
// error from Accept would stop a gRPC server for good.
func BoundUnsent(l net.Listener, lowat int, onErr func(error)) (net.Listener, error) {
	if err := CheckNotSentLowat(lowat); err != nil {
		return nil, err
	}
	if lowat == 0 {
		return l, nil
	}
	return boundListener{l, lowat, onErr}, nil
}

type boundListener struct {
	net.Listener
	lowat int
	onErr func(error)
}

func (l boundListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	if err := SetNotSentLowat(c, l.lowat); err != nil && l.onErr != nil {
		l.onErr(err)
	}
	return c, nil
}
