package transport

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	dripv1 "github.com/dripmesh/drip/api/proto/drip/v1"
	"github.com/dripmesh/drip/internal/rawcodec"
)

// frameStream is what the client and server sides of Peer.Link share.
type frameStream interface {
	SendMsg(any) error
	RecvMsg(any) error
	Context() context.Context
}

// streamConn adapts a Link stream to Conn.
type streamConn struct {
	stream    frameStream
	remote    *dripv1.Open
	cancel    context.CancelFunc // ends the stream
	onDone    func()             // releases the client connection, if any
	closeSend func() error       // half-closes: CloseSend, or ending the server handler

	once sync.Once
	done chan struct{}
	err  error
}

func newStreamConn(s frameStream, remote *dripv1.Open, cancel context.CancelFunc, onDone func(), closeSend func() error) *streamConn {
	c := &streamConn{stream: s, remote: remote, cancel: cancel, onDone: onDone, closeSend: closeSend, done: make(chan struct{})}
	go func() {
		// The stream's context ends when either side goes away.
		select {
		case <-s.Context().Done():
			c.Close(fmt.Errorf("%w: %v", ErrClosed, context.Cause(s.Context())))
		case <-c.done:
		}
	}()
	return c
}

func (c *streamConn) Remote() *dripv1.Open { return c.remote }

func (c *streamConn) Send(frame []byte) error {
	if err := c.stream.SendMsg(&rawcodec.Raw{B: frame}); err != nil {
		c.Close(err)
		return err
	}
	return nil
}

func (c *streamConn) Recv() ([]byte, error) {
	var f rawcodec.Raw
	if err := c.stream.RecvMsg(&f); err != nil {
		c.Close(err)
		return nil, err
	}
	return f.B, nil
}

func (c *streamConn) CloseSend() error { return c.closeSend() }

func (c *streamConn) Close(reason error) {
	c.once.Do(func() {
		if reason == nil {
			reason = ErrClosed
		}
		c.err = reason
		close(c.done)
		c.cancel()
		if c.onDone != nil {
			c.onDone()
		}
	})
}

func (c *streamConn) Done() <-chan struct{} { return c.done }

func (c *streamConn) Err() error {
	<-c.done
	return c.err
}

// PeerServer implements drip.v1.Peer: it answers each Link with the
// handshake and hands the link to a Handler.
type PeerServer struct {
	dripv1.UnimplementedPeerServer
	local  *dripv1.Open
	handle Handler
	// Authorize, if set, decides whether the peer that sent remote may
	// link: ctx is the stream's, with the connection's TLS state
	// (google.golang.org/grpc/peer). An error refuses the link; make it an
	// *IncompatibleError for its reason label.
	Authorize func(ctx context.Context, remote *dripv1.Open) error
	// Rejected, if set, is told about every refused handshake (for logs
	// and metrics).
	Rejected func(remote *dripv1.Open, err error)
}

// NewPeerServer returns a Peer service introducing itself with local.
// Serve it on a gRPC server made with PeerServerOptions.
func NewPeerServer(local *dripv1.Open, handle Handler) *PeerServer {
	return &PeerServer{local: local, handle: handle}
}

// PeerServerOptions are the gRPC server options the Peer service needs:
// the codec that carries frames in their wire form.
func PeerServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{grpc.ForceServerCodecV2(rawcodec.Codec{})}
}

// Link implements drip.v1.PeerServer.
func (s *PeerServer) Link(stream dripv1.Peer_LinkServer) error {
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	err = Compatible(s.local, first.GetOpen())
	if err == nil && s.Authorize != nil {
		err = s.Authorize(stream.Context(), first.GetOpen())
	}
	if err != nil {
		if s.Rejected != nil {
			s.Rejected(first.GetOpen(), err)
		}
		return status.Error(codes.FailedPrecondition, err.Error())
	}
	if err := stream.Send(&dripv1.Frame{Open: s.local}); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(stream.Context())
	// The server half-closes by returning from this handler: gRPC sends
	// every queued frame, then the trailers, and the client reads io.EOF.
	halfClosed := make(chan struct{})
	var once sync.Once
	closeSend := func() error { once.Do(func() { close(halfClosed) }); return nil }
	conn := newStreamConn(serverStream{stream, ctx}, first.GetOpen(), cancel, nil, closeSend)
	handled := make(chan struct{})
	go func() {
		defer close(handled)
		s.handle(conn)
	}()
	select {
	case <-handled:
		conn.Close(ErrClosed)
	case <-halfClosed:
		// Return now so gRPC ends the stream in order; the handler sees
		// the link end when the stream's context is cancelled.
		go func() { <-handled }()
	}
	return nil
}

// serverStream gives the server stream a context the handler can cancel.
type serverStream struct {
	dripv1.Peer_LinkServer
	ctx context.Context
}

func (s serverStream) Context() context.Context { return s.ctx }

// GRPCDialer dials neighbours over gRPC.
type GRPCDialer struct {
	// Creds secure the link; nil means plaintext.
	Creds credentials.TransportCredentials
	// NotSentLowat, when positive, bounds the bytes each connection keeps
	// unsent in the kernel (SetNotSentLowat; brokers use
	// DefaultNotSentLowat). The connection is then made by DialContext or
	// a net.Dialer, not by gRPC's own dialer, so HTTPS_PROXY is not used.
	NotSentLowat int
	// DialContext, if set, makes the TCP connection (the lab dials from a
	// site's network namespace); NotSentLowat applies to what it returns.
	DialContext func(ctx context.Context, addr string) (net.Conn, error)
	// Options are appended to the dial options (tests use them for
	// in-process listeners); a dialer among them replaces DialContext
	// and NotSentLowat.
	Options []grpc.DialOption
}

// dialTCP makes the connection under the gRPC client: DialContext's or
// a net.Dialer's, with the unsent bytes bounded.
func (d GRPCDialer) dialTCP(ctx context.Context, addr string) (net.Conn, error) {
	dial := d.DialContext
	if dial == nil {
		var nd net.Dialer
		dial = func(ctx context.Context, addr string) (net.Conn, error) { return nd.DialContext(ctx, "tcp", addr) }
	}
	c, err := dial(ctx, addr)
	if err != nil {
		return nil, err
	}
	if err := SetNotSentLowat(c, d.NotSentLowat); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// Dial implements Dialer.
func (d GRPCDialer) Dial(ctx context.Context, addr string, local *dripv1.Open) (Conn, error) {
	creds := d.Creds
	if creds == nil {
		creds = insecure.NewCredentials()
	}
	if err := CheckNotSentLowat(d.NotSentLowat); err != nil {
		return nil, fmt.Errorf("dial peer %s: %w", addr, err)
	}
	opts := []grpc.DialOption{grpc.WithTransportCredentials(creds)}
	if d.NotSentLowat > 0 || d.DialContext != nil {
		opts = append(opts, grpc.WithContextDialer(d.dialTCP))
	}
	opts = append(opts, d.Options...)
	cc, err := grpc.NewClient(addr, opts...)
	if err != nil {
		return nil, fmt.Errorf("dial peer %s: %w", addr, err)
	}
	// The stream outlives ctx, which only bounds the handshake.
	streamCtx, cancel := context.WithCancel(context.Background())
	fail := func(err error) (Conn, error) {
		cancel()
		_ = cc.Close()
		return nil, err
	}
	stream, err := dripv1.NewPeerClient(cc).Link(streamCtx, grpc.ForceCodecV2(rawcodec.Codec{}))
	if err != nil {
		return fail(fmt.Errorf("open link to %s: %w", addr, err))
	}
	type result struct {
		f   *dripv1.Frame
		err error
	}
	res := make(chan result, 1)
	go func() {
		if err := stream.Send(&dripv1.Frame{Open: local}); err != nil {
			res <- result{err: err}
			return
		}
		f, err := stream.Recv()
		res <- result{f, err}
	}()
	var r result
	select {
	case r = <-res:
	case <-ctx.Done():
		return fail(fmt.Errorf("handshake with %s: %w", addr, ctx.Err()))
	}
	if r.err != nil {
		if st, ok := status.FromError(r.err); ok && st.Code() == codes.FailedPrecondition {
			return fail(fmt.Errorf("peer %s: %w", addr, &IncompatibleError{Reason: "refused", Detail: st.Message()}))
		}
		return fail(fmt.Errorf("handshake with %s: %w", addr, r.err))
	}
	if err := Compatible(local, r.f.GetOpen()); err != nil {
		return fail(fmt.Errorf("peer %s: %w", addr, err))
	}
	return newStreamConn(stream, r.f.GetOpen(), cancel, func() { _ = cc.Close() }, stream.CloseSend), nil
}

// IsIncompatible reports whether err is a refused handshake, from either
// side, and its reason label.
func IsIncompatible(err error) (reason string, ok bool) {
	var ie *IncompatibleError
	if errors.As(err, &ie) {
		return ie.Reason, true
	}
	return "", false
}
