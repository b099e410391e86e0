package stomp

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"time"
)

// Options configure a connection.
type Options struct {
	// Host is the virtual host of the CONNECT frame; default "localhost".
	Host            string
	Login, Passcode string
	// Dial opens the transport; default a net.Dialer.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// Limits bound incoming frames; zero fields take DefaultLimits.
	Limits Limits
	// Buffer is how many MESSAGE frames each subscription queues before
	// the connection stops reading (which pushes back on the server);
	// default 4096.
	Buffer int
}

// ErrClosed is returned by operations on a connection closed by Close or
// Disconnect.
var ErrClosed = errors.New("stomp: connection closed")

// ServerError is an ERROR frame.
type ServerError struct {
	Message string // the message header
	Body    string
}

func (e *ServerError) Error() string {
	if e.Body == "" {
		return "stomp: server error: " + e.Message
	}
	return fmt.Sprintf("stomp: server error: %s: %s", e.Message, e.Body)
}

// Conn is a STOMP connection. Its methods may be called concurrently.
type Conn struct {
	nc     net.Conn
	opts   Options
	server string // the CONNECTED frame's server header

	wmu sync.Mutex // serialises frame writes
	w   *bufio.Writer
	buf []byte // encoding scratch, under wmu

	mu       sync.Mutex
	subs     map[string]*Subscription
	receipts map[string]chan error
	nextID   uint64
	err      error // why the connection ended; set once
	// disconnecting: the server is expected to close the connection.
	disconnecting bool

	done chan struct{} // closed when the reader goroutine has exited
}

// Dial connects to addr and performs the STOMP 1.2 handshake.
func Dial(ctx context.Context, addr string, opts Options) (*Conn, error) {
	dial := opts.Dial
	if dial == nil {
		var d net.Dialer
		dial = d.DialContext
	}
	nc, err := dial(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("stomp: dialling %s: %w", addr, err)
	}
	c, err := NewConn(ctx, nc, opts)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("stomp: %s: %w", addr, err)
	}
	return c, nil
}

// NewConn performs the handshake over nc and starts reading. It does not
// close nc on failure.
func NewConn(ctx context.Context, nc net.Conn, opts Options) (*Conn, error) {
	if opts.Host == "" {
		opts.Host = "localhost"
	}
	def := DefaultLimits()
	if opts.Limits.MaxLine <= 0 {
		opts.Limits.MaxLine = def.MaxLine
	}
	if opts.Limits.MaxHeaders <= 0 {
		opts.Limits.MaxHeaders = def.MaxHeaders
	}
	if opts.Limits.MaxBody <= 0 {
		opts.Limits.MaxBody = def.MaxBody
	}
	if opts.Buffer <= 0 {
		opts.Buffer = 4096
	}
	c := &Conn{
		nc: nc, opts: opts, w: bufio.NewWriterSize(nc, 32<<10),
		subs: map[string]*Subscription{}, receipts: map[string]chan error{}, done: make(chan struct{}),
	}
	connect := &Frame{Command: CmdConnect, Headers: []Header{
		{"accept-version", "1.2"}, {"host", opts.Host}, {"heart-beat", "0,0"},
	}}
	if opts.Login != "" {
		connect.Headers = append(connect.Headers, Header{"login", opts.Login}, Header{"passcode", opts.Passcode})
	}
	// The handshake honours ctx by expiring the connection's deadline.
	stop := context.AfterFunc(ctx, func() { _ = nc.SetDeadline(time.Unix(1, 0)) })
	r := NewReader(nc, opts.Limits)
	err := c.write(connect, true)
	var f *Frame
	if err == nil {
		f, err = r.ReadFrame()
	}
	if !stop() || ctx.Err() != nil {
		return nil, ctx.Err()
	}
	_ = nc.SetDeadline(time.Time{})
	if err != nil {
		return nil, fmt.Errorf("handshake: %w", err)
	}
	switch f.Command {
	case CmdConnected:
	case CmdError:
		return nil, serverError(f)
	default:
		return nil, fmt.Errorf("handshake: got a %s frame, want CONNECTED", f.Command)
	}
	if v, _ := f.Get("version"); v != "1.2" {
		return nil, fmt.Errorf("handshake: server speaks STOMP %q, want 1.2", v)
	}
	c.server, _ = f.Get("server")
	go c.read(r)
	return c, nil
}

// Server is the server header of the CONNECTED frame, e.g.
// "ActiveMQ/5.17.2".
func (c *Conn) Server() string { return c.server }

func serverError(f *Frame) error {
	msg, _ := f.Get("message")
	return &ServerError{Message: msg, Body: string(f.Body)}
}

// write encodes f and, if flush, sends the buffer.
func (c *Conn) write(f *Frame, flush bool) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	var err error
	if c.buf, err = AppendFrame(c.buf[:0], f); err != nil {
		return err
	}
	if _, err := c.w.Write(c.buf); err != nil {
		return err
	}
	if flush {
		return c.w.Flush()
	}
	return nil
}

// Send sends a SEND frame to destination with the given headers and body;
// content-length is added. It does not wait for the server: Disconnect's
// receipt confirms everything sent before it.
func (c *Conn) Send(destination string, headers []Header, body []byte) error {
	f := &Frame{Command: CmdSend, Body: body}
	f.Headers = make([]Header, 0, len(headers)+2)
	f.Headers = append(f.Headers, Header{"destination", destination}, Header{"content-length", strconv.Itoa(len(body))})
	f.Headers = append(f.Headers, headers...)
	if err := c.failed(); err != nil {
		return err
	}
	if err := c.write(f, true); err != nil {
		return c.broken(err)
	}
	return nil
}

// Subscription is one SUBSCRIBE.
type Subscription struct {
	c    *Conn
	id   string
	ch   chan *Frame
	gone chan struct{} // closed when unsubscribed or the connection ended
	once sync.Once
}

// ID is the subscription's id header.
func (s *Subscription) ID() string { return s.id }

// Subscribe subscribes to destination with auto acknowledgement and the
// given extra headers (such as "selector"), and waits for the server's
// receipt, so that a rejected selector is an error here.
func (c *Conn) Subscribe(ctx context.Context, destination string, headers ...Header) (*Subscription, error) {
	c.mu.Lock()
	c.nextID++
	id := strconv.FormatUint(c.nextID, 10)
	s := &Subscription{c: c, id: id, ch: make(chan *Frame, c.opts.Buffer), gone: make(chan struct{})}
	if c.err != nil {
		c.mu.Unlock()
		return nil, c.err
	}
	c.subs[id] = s
	c.mu.Unlock()
	f := &Frame{Command: CmdSubscribe, Headers: append([]Header{{"destination", destination}, {"id", id}, {"ack", "auto"}}, headers...)}
	if err := c.request(ctx, f); err != nil {
		s.end()
		c.mu.Lock()
		delete(c.subs, id)
		c.mu.Unlock()
		return nil, err
	}
	return s, nil
}

// Next returns the next MESSAGE frame, waiting until ctx ends. Once the
// subscription has ended and its queue is empty it returns why.
func (s *Subscription) Next(ctx context.Context) (*Frame, error) {
	select {
	case f := <-s.ch:
		return f, nil
	default:
	}
	select {
	case f := <-s.ch:
		return f, nil
	case <-s.gone:
		select {
		case f := <-s.ch:
			return f, nil
		default:
		}
		if err := s.c.failed(); err != nil {
			return nil, err
		}
		return nil, ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Unsubscribe ends the subscription.
func (s *Subscription) Unsubscribe() error {
	s.c.mu.Lock()
	_, live := s.c.subs[s.id]
	delete(s.c.subs, s.id)
	s.c.mu.Unlock()
	s.end()
	if !live {
		return nil
	}
	if err := s.c.failed(); err != nil {
		return nil // the server forgot it with the connection
	}
	return s.c.write(&Frame{Command: CmdUnsubscribe, Headers: []Header{{"id", s.id}}}, true)
}

func (s *Subscription) end() { s.once.Do(func() { close(s.gone) }) }

// request sends f with a receipt header and waits for the RECEIPT (or the
// ERROR that names it).
func (c *Conn) request(ctx context.Context, f *Frame) error {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return c.err
	}
	c.nextID++
	rid := "r" + strconv.FormatUint(c.nextID, 10)
	ch := make(chan error, 1)
	c.receipts[rid] = ch
	c.mu.Unlock()
	f.Headers = append(f.Headers, Header{"receipt", rid})
	if err := c.write(f, true); err != nil {
		return c.broken(err)
	}
	select {
	case err := <-ch:
		return err
	case <-ctx.Done():
		c.mu.Lock()
		delete(c.receipts, rid)
		c.mu.Unlock()
		return ctx.Err()
	}
}

// Disconnect asks the server to close the connection once it has processed
// everything sent before, waits for its receipt (or ctx), and closes.
func (c *Conn) Disconnect(ctx context.Context) error {
	c.mu.Lock()
	c.disconnecting = true
	c.mu.Unlock()
	err := c.request(ctx, &Frame{Command: CmdDisconnect})
	c.shutdown(ErrClosed)
	if errors.Is(err, ErrClosed) {
		err = nil
	}
	return err
}

// Close closes the connection without a DISCONNECT.
func (c *Conn) Close() error {
	c.shutdown(ErrClosed)
	return nil
}

// shutdown records why the connection ended, closes it and waits for the
// reader to exit.
func (c *Conn) shutdown(why error) {
	c.mu.Lock()
	if c.err == nil {
		c.err = why
	}
	c.mu.Unlock()
	_ = c.nc.Close()
	<-c.done
}

// failed returns the error that ended the connection, if it has ended.
func (c *Conn) failed() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// broken records a write failure as the connection's end and returns it.
func (c *Conn) broken(err error) error {
	c.mu.Lock()
	if c.err == nil {
		c.err = fmt.Errorf("stomp: %w", err)
	}
	err = c.err
	c.mu.Unlock()
	_ = c.nc.Close()
	return err
}

// read dispatches incoming frames until the connection fails.
func (c *Conn) read(r *Reader) {
	defer close(c.done)
	var why error
	for why == nil {
		f, err := r.ReadFrame()
		if err != nil {
			why = fmt.Errorf("stomp: reading: %w", err)
			break
		}
		switch f.Command {
		case CmdMessage:
			id, _ := f.Get("subscription")
			c.mu.Lock()
			s := c.subs[id]
			c.mu.Unlock()
			if s == nil {
				continue // unsubscribed while in flight
			}
			select {
			case s.ch <- f:
			case <-s.gone:
			}
		case CmdReceipt:
			id, _ := f.Get("receipt-id")
			c.settle(id, nil)
		case CmdError:
			err := serverError(f)
			if id, ok := f.Get("receipt-id"); ok && c.settle(id, err) {
				// The server closes the connection after an ERROR; the
				// next read reports that.
				continue
			}
			why = err
		default:
			why = fmt.Errorf("stomp: unexpected %s frame from the server", f.Command)
		}
	}
	c.mu.Lock()
	if c.disconnecting && errors.Is(why, io.EOF) {
		why = ErrClosed
	}
	if c.err == nil {
		c.err = why
	}
	err := c.err
	subs, receipts := c.subs, c.receipts
	c.subs, c.receipts = map[string]*Subscription{}, map[string]chan error{}
	c.mu.Unlock()
	_ = c.nc.Close()
	for _, s := range subs {
		s.end()
	}
	for _, ch := range receipts {
		ch <- err
	}
}

// settle completes the request waiting for receipt id; false if none is.
func (c *Conn) settle(id string, err error) bool {
	c.mu.Lock()
	ch, ok := c.receipts[id]
	delete(c.receipts, id)
	c.mu.Unlock()
	if ok {
		ch <- err
	}
	return ok
}
