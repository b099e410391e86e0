package transport

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	dripv1 "github.com/dripmesh/drip/api/proto/drip/v1"
)

// MemNetwork connects brokers in memory: listeners register a Handler under
// an address and Dial reaches them through a pair of channels. Frames are
// copied on send, as a real wire would copy them, so no state leaks between
// brokers. Cut ends every link of an address, as a network failure would.
type MemNetwork struct {
	mu        sync.Mutex
	listeners map[string]memListener
	conns     map[string][]*memConn // by listener address, both ends
	// silenced are the addresses whose path drops everything (Silence),
	// each with a channel closed when it heals.
	silenced map[string]chan struct{}
}

type memListener struct {
	local  *dripv1.Open
	handle Handler
}

// NewMemNetwork returns an empty network.
func NewMemNetwork() *MemNetwork {
	return &MemNetwork{listeners: map[string]memListener{}, conns: map[string][]*memConn{}, silenced: map[string]chan struct{}{}}
}

// Listen registers handle for links dialled to addr, which introduce
// themselves to dialers with local. It replaces any earlier listener.
func (n *MemNetwork) Listen(addr string, local *dripv1.Open, handle Handler) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.listeners[addr] = memListener{local: local, handle: handle}
}

// Unlisten removes the listener of addr and cuts its links.
func (n *MemNetwork) Unlisten(addr string) {
	n.mu.Lock()
	delete(n.listeners, addr)
	n.mu.Unlock()
	n.Cut(addr)
}

// Cut closes every link dialled to addr.
func (n *MemNetwork) Cut(addr string) {
	n.mu.Lock()
	conns := n.conns[addr]
	delete(n.conns, addr)
	n.mu.Unlock()
	for _, c := range conns {
		c.Close(fmt.Errorf("%w: cut", ErrClosed))
	}
}

// Silence makes the path to addr drop everything, without closing
// anything, as a failed network path does: frames on the links dialled to
// addr vanish in both directions, and those links never carry anything
// again (a TCP connection whose retransmissions have backed off past
// the test's horizon); a dial to addr waits for its context, as one to an
// unreachable host waits for its timeout, until Heal.
func (n *MemNetwork) Silence(addr string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if _, ok := n.silenced[addr]; !ok {
		n.silenced[addr] = make(chan struct{})
	}
	for _, c := range n.conns[addr] {
		c.shared.silent.Store(true)
	}
}

// Heal ends Silence for new links to addr; the links it silenced stay
// silent.
func (n *MemNetwork) Heal(addr string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if ch, ok := n.silenced[addr]; ok {
		close(ch)
		delete(n.silenced, addr)
	}
}

// Dialer returns a Dialer into this network.
func (n *MemNetwork) Dialer() Dialer { return memDialer{n} }

type memDialer struct{ n *MemNetwork }

func (d memDialer) Dial(ctx context.Context, addr string, local *dripv1.Open) (Conn, error) {
	n := d.n
	n.mu.Lock()
	l, ok := n.listeners[addr]
	healed, silent := n.silenced[addr]
	n.mu.Unlock()
	if silent {
		select {
		case <-healed:
		case <-ctx.Done():
			return nil, fmt.Errorf("dial %s: %w", addr, ctx.Err())
		}
	}
	if !ok {
		return nil, fmt.Errorf("dial %s: connection refused", addr)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := Compatible(l.local, local); err != nil {
		return nil, fmt.Errorf("peer %s: %w", addr, &IncompatibleError{Reason: "refused", Detail: err.Error()})
	}
	if err := Compatible(local, l.local); err != nil {
		return nil, fmt.Errorf("peer %s: %w", addr, err)
	}
	dialSide, listenSide := memPipe(local, l.local)
	n.mu.Lock()
	n.conns[addr] = append(n.conns[addr], dialSide, listenSide)
	n.mu.Unlock()
	go func() {
		l.handle(listenSide)
		listenSide.Close(ErrClosed)
	}()
	return dialSide, nil
}

// memConn is one end of an in-memory link. Closing either end closes both;
// CloseSend closes only this end's direction, after what was sent.
type memConn struct {
	remote *dripv1.Open
	in     <-chan []byte
	out    chan<- []byte
	shared *memShared

	sendMu     sync.Mutex // Send and CloseSend come from one goroutine; this guards misuse
	sendClosed bool
}

type memShared struct {
	once   sync.Once
	done   chan struct{}
	err    error
	silent atomic.Bool // MemNetwork.Silence: frames vanish
}

// memPipe returns the two ends of a link; a's Remote is bOpen and vice versa.
func memPipe(aOpen, bOpen *dripv1.Open) (a, b *memConn) {
	// A little buffering stands in for socket buffers; Send still blocks
	// once it is full, which is the flow control the writer must handle.
	ab := make(chan []byte, 16)
	ba := make(chan []byte, 16)
	sh := &memShared{done: make(chan struct{})}
	return &memConn{remote: bOpen, in: ba, out: ab, shared: sh},
		&memConn{remote: aOpen, in: ab, out: ba, shared: sh}
}

func (c *memConn) Remote() *dripv1.Open { return c.remote }

func (c *memConn) Send(frame []byte) error {
	if c.shared.silent.Load() {
		return nil
	}
	f := bytes.Clone(frame)
	c.sendMu.Lock()
	defer c.sendMu.Unlock()
	if c.sendClosed {
		return errors.New("send after CloseSend")
	}
	select {
	case c.out <- f:
		return nil
	case <-c.shared.done:
		return c.shared.err
	}
}

func (c *memConn) CloseSend() error {
	c.sendMu.Lock()
	defer c.sendMu.Unlock()
	if !c.sendClosed {
		c.sendClosed = true
		close(c.out)
	}
	return nil
}

func (c *memConn) Recv() ([]byte, error) {
	select {
	case f, ok := <-c.in:
		if !ok {
			return nil, io.EOF
		}
		return f, nil
	case <-c.shared.done:
		return nil, c.shared.err
	}
}

func (c *memConn) Close(reason error) {
	c.shared.once.Do(func() {
		if reason == nil {
			reason = ErrClosed
		}
		c.shared.err = reason
		close(c.shared.done)
	})
}

func (c *memConn) Done() <-chan struct{} { return c.shared.done }

func (c *memConn) Err() error {
	<-c.shared.done
	return c.shared.err
}
