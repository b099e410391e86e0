package congestion

import (
	"context"
	"net"

	"github.com/dripmesh/drip/internal/testbed/systems"
	"github.com/dripmesh/drip/internal/transport"
)

// shallow wraps a placement so that every TCP connection it makes or
// accepts keeps at most lowat bytes unsent in the kernel (TCP_NOTSENT_LOWAT):
// the rest waits in the sender's own queue, where drip's brokers drop and
// send control first, instead of in a socket buffer that autotuning grows
// to seconds of a slow link.
type shallow struct {
	systems.Placement
	lowat int
}

func (s shallow) DialContext(ctx context.Context, site, network, addr string) (net.Conn, error) {
	c, err := s.Placement.DialContext(ctx, site, network, addr)
	if err != nil {
		return nil, err
	}
	if err := transport.SetNotSentLowat(c, s.lowat); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

func (s shallow) Listen(ctx context.Context, site, network, addr string) (net.Listener, error) {
	l, err := s.Placement.Listen(ctx, site, network, addr)
	if err != nil {
		return nil, err
	}
	return shallowListener{l, s.lowat}, nil
}

type shallowListener struct {
	net.Listener
	lowat int
}

func (l shallowListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	if err := transport.SetNotSentLowat(c, l.lowat); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}
