package client

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	dripv1 "github.com/dripmesh/drip/api/proto/drip/v1"
	"github.com/dripmesh/drip/internal/rawcodec"
)

// DefaultBufferSize is the number of deliveries a Subscription buffers
// between its receive goroutine and Next.
const DefaultBufferSize = 256

// DefaultReadAhead bounds the memory of the deliveries a Client's
// Subscriptions read from their streams ahead of Next, together
// (WithReadAhead): gRPC's own largest stream window, which is what one
// stream could hold unread before.
const DefaultReadAhead = 16 << 20

// DefaultBufferWait is how long a Subscription whose read-ahead is full
// holds the stream back before it reads on and drops what does not fit
// (WithBufferWait): short enough that a reader that fell behind learns of
// its losses well within a second, long enough to ride out a pause.
const DefaultBufferWait = 250 * time.Millisecond

// DefaultMaxInFlight is how many messages a Publisher sends ahead of the
// broker's acknowledgements before Publish waits.
const DefaultMaxInFlight = 8192

// Option configures Dial.
type Option func(*options)

type options struct {
	tls                *tls.Config
	dialOpts           []grpc.DialOption
	name               string
	bufferSize         int
	bufferWait         time.Duration
	readAhead          int
	maxInFlight        int
	backoffMin         time.Duration
	backoffMax         time.Duration
	onGap              func(Gap)
	onFailover         func(Failover)
	lookupHost         func(ctx context.Context, host string) ([]string, error)
	failoverWait       time.Duration
	noCongestion       bool // publishers do not listen for feedback
	congestionFeedback bool // subscriptions ask publishers to slow down
	token              string
	tokenPlaintext     bool // the token may travel without TLS
}

// WithTLS connects over TLS with cfg (nil cfg means the system roots and the
// address's host name). Without it the connection is plaintext.
func WithTLS(cfg *tls.Config) Option {
	return func(o *options) {
		if cfg == nil {
			cfg = &tls.Config{}
		}
		o.tls = cfg
	}
}

// WithToken presents token to every broker as "authorization: Bearer
// <token>" gRPC metadata; a broker with an authorization policy
// (drip broker --authz-policy) finds the client's rule by the token's
// SHA-256. A token is a password: Dial refuses to send it without WithTLS,
// since anyone on the path could read it, unless WithTokenOverPlaintext
// says so.
func WithToken(token string) Option { return func(o *options) { o.token = token } }

// WithTokenOverPlaintext lets WithToken's token travel over a plaintext
// connection. It exists for tests and brokers on the loopback interface;
// anywhere else the token is readable by anyone on the path.
func WithTokenOverPlaintext() Option { return func(o *options) { o.tokenPlaintext = true } }

// bearer is the gRPC per-call credential that carries a token.
type bearer struct {
	token  string
	secure bool
}

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + b.token}, nil
}

// RequireTransportSecurity makes gRPC itself refuse to send the token on
// a plaintext connection, unless WithTokenOverPlaintext.
func (b bearer) RequireTransportSecurity() bool { return b.secure }

// WithDialOptions adds gRPC dial options, applied after the client's own
// (transport credentials, user agent, reconnect backoff), so they can
// override them.
func WithDialOptions(opts ...grpc.DialOption) Option {
	return func(o *options) { o.dialOpts = append(o.dialOpts, opts...) }
}

// WithName sets the label brokers show for this client's subscriptions in
// their logs and metrics. It need not be unique.
func WithName(name string) Option {
	return func(o *options) { o.name = name }
}

// WithBufferSize sets how many deliveries each Subscription buffers before
// it stops reading from the broker (see the package documentation). Values
// below 1 mean 1.
func WithBufferSize(n int) Option {
	return func(o *options) { o.bufferSize = max(n, 1) }
}

// WithReadAhead bounds, in bytes, the deliveries the Client's
// Subscriptions read from their streams ahead of Next, together, beyond
// their buffers (WithBufferSize), at their estimated decoded size: each
// takes an equal share of it (default DefaultReadAhead; values below
// 64 KiB mean 64 KiB). See the package documentation.
func WithReadAhead(n int) Option {
	return func(o *options) { o.readAhead = max(n, 64<<10) }
}

// WithBufferWait sets how long a Subscription whose read-ahead is full
// may hold the stream back — gRPC flow control then slows the broker, and
// its publishers — before it reads the stream on and drops what does not
// fit, counting it as lost (default DefaultBufferWait; 0: never hold the
// stream). Reading on is what lets a slow reader learn of losses at once
// instead of behind its backlog (see the package documentation).
// Negative values mean 0.
func WithBufferWait(d time.Duration) Option {
	return func(o *options) { o.bufferWait = max(d, 0) }
}

// WithMaxInFlight sets how many messages a Publisher sends ahead of the
// broker's acknowledgements before Publish waits; values below 1 mean 1.
// They are what a publisher resends to another broker when its broker
// drains, and what it reports in flight when its broker dies.
func WithMaxInFlight(n int) Option {
	return func(o *options) { o.maxInFlight = max(n, 1) }
}

// WithReconnectBackoff bounds the jittered exponential backoff between
// rounds of attempts over the brokers' addresses after every one failed
// (default 100 ms to 2 s). A round tries each address once, at once.
func WithReconnectBackoff(minDelay, maxDelay time.Duration) Option {
	return func(o *options) {
		o.backoffMin, o.backoffMax = max(minDelay, time.Millisecond), max(maxDelay, minDelay)
	}
}

// WithGapHandler is called, from the subscription's goroutine, each time a
// subscription is installed again after its broker failed: the Gap says
// how long no broker held it. It must not block.
func WithGapHandler(f func(Gap)) Option { return func(o *options) { o.onGap = f } }

// WithFailoverHandler is called, from the publishing goroutine, each time a
// Publisher moves to another broker. It must not block.
func WithFailoverHandler(f func(Failover)) Option { return func(o *options) { o.onFailover = f } }

// WithLookupHost replaces the DNS lookup of dns:/// targets (default
// net.DefaultResolver.LookupHost), for a registry of your own or tests.
func WithLookupHost(f func(ctx context.Context, host string) ([]string, error)) Option {
	return func(o *options) { o.lookupHost = f }
}

// WithFailoverWait bounds how long Publish and Subscribe keep trying to
// reach a broker before they return the last error (default: until their
// context ends).
func WithFailoverWait(d time.Duration) Option { return func(o *options) { o.failoverWait = d } }

// Client is a connection to a mesh through one broker at a time, chosen
// from the addresses Dial was given. Publishers and subscriptions made from
// it share its connections, and each moves to the next address on its own
// when its broker fails or drains.
type Client struct {
	opts   options
	target string
	dns    string // host:port to resolve again at each round, for dns:/// targets
	// ctx ends with Close: the client's own goroutines (feedback) stop.
	ctx      context.Context
	cancel   context.CancelFunc
	feedback feedbackSender

	// readAhead bounds what the subscriptions read ahead, together.
	readAhead *readAhead

	mu     sync.Mutex
	addrs  []string
	conns  map[string]*grpc.ClientConn
	cur    int // index into addrs of the address to use next
	closed bool
}

// Dial connects to a mesh and waits until one broker answers, every
// address has failed, or ctx ends. target is
//
//   - one broker, host:port;
//   - several, comma-separated (host1:port,host2:port), tried in order and
//     failed over in turn;
//   - dns:///name:port, whose addresses (a Kubernetes headless Service has
//     one per broker) are looked up again whenever all have failed;
//   - any other gRPC target with a scheme (unix:, passthrough:///), used
//     as given.
//
// An address without a port is an error rather than gRPC's default 443.
func Dial(ctx context.Context, target string, opts ...Option) (*Client, error) {
	o := options{name: "drip-go", bufferSize: DefaultBufferSize, bufferWait: DefaultBufferWait, readAhead: DefaultReadAhead, maxInFlight: DefaultMaxInFlight,
		backoffMin: 100 * time.Millisecond, backoffMax: 2 * time.Second, lookupHost: net.DefaultResolver.LookupHost}
	for _, opt := range opts {
		opt(&o)
	}
	if o.token != "" && o.tls == nil && !o.tokenPlaintext {
		return nil, errors.New("drip client: WithToken needs WithTLS: a bearer token over plaintext can be read by anyone on the path (WithTokenOverPlaintext allows it for loopback tests)")
	}
	c := &Client{opts: o, target: target, conns: map[string]*grpc.ClientConn{}, readAhead: &readAhead{limit: int64(o.readAhead)}}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	addrs, dns, err := parseTarget(target)
	if err != nil {
		return nil, fmt.Errorf("drip client: %w", err)
	}
	c.addrs, c.dns = addrs, dns
	if dns != "" {
		if err := c.resolve(ctx); err != nil {
			return nil, fmt.Errorf("drip client: %w", err)
		}
	}
	var errs []error
	for range len(c.addrs) {
		cc, addr, err := c.use()
		if err == nil {
			if err = waitReady(ctx, cc); err == nil {
				return c, nil
			}
			c.failed(addr)
		}
		if ctx.Err() != nil {
			c.Close()
			return nil, ctx.Err()
		}
		errs = append(errs, fmt.Errorf("connecting to broker %s: %w", addr, err))
	}
	c.Close()
	return nil, fmt.Errorf("drip client: %w", errors.Join(errs...))
}

// parseTarget splits a target into addresses, or names the DNS host to
// resolve.
func parseTarget(target string) (addrs []string, dns string, err error) {
	if rest, ok := strings.CutPrefix(target, "dns:///"); ok {
		if _, port, err := net.SplitHostPort(rest); err != nil || port == "" {
			return nil, "", fmt.Errorf("broker address %q has no port (want dns:///name:port)", target)
		}
		return nil, rest, nil
	}
	for _, a := range strings.Split(target, ",") {
		a = strings.TrimSpace(a)
		if a == "" {
			continue
		}
		if strings.Contains(a, "://") || strings.HasPrefix(a, "unix:") {
			addrs = append(addrs, a) // a gRPC target of its own
			continue
		}
		if _, port, err := net.SplitHostPort(a); err != nil || port == "" {
			return nil, "", fmt.Errorf("broker address %q has no port (want host:port, for example 127.0.0.1:7000)", a)
		}
		addrs = append(addrs, a)
	}
	if len(addrs) == 0 {
		return nil, "", fmt.Errorf("no broker address in %q", target)
	}
	return addrs, "", nil
}

// resolve looks the DNS target up again; the new list replaces the old.
func (c *Client) resolve(ctx context.Context) error {
	host, port, _ := net.SplitHostPort(c.dns)
	ips, err := c.opts.lookupHost(ctx, host)
	if err != nil {
		return fmt.Errorf("looking up brokers %s: %w", c.dns, err)
	}
	if len(ips) == 0 {
		return fmt.Errorf("looking up brokers %s: no addresses", c.dns)
	}
	addrs := make([]string, len(ips))
	for i, ip := range ips {
		addrs[i] = net.JoinHostPort(ip, port)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.addrs, c.cur = addrs, 0
	return nil
}

// use returns the connection to the address to try now.
func (c *Client) use() (*grpc.ClientConn, string, error) {
	return c.useOther("")
}

// useOther returns the connection to the current address, or, if that is
// avoid, to the next one (a subscription moving off a draining broker).
func (c *Client) useOther(avoid string) (*grpc.ClientConn, string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, "", errors.New("drip client: client closed")
	}
	addr := c.addrs[c.cur%len(c.addrs)]
	if addr == avoid {
		if len(c.addrs) == 1 {
			return nil, "", fmt.Errorf("no broker other than %s to move to", avoid)
		}
		addr = c.addrs[(c.cur+1)%len(c.addrs)]
	}
	cc := c.conns[addr]
	if cc == nil {
		var err error
		if cc, err = c.newConn(addr); err != nil {
			return nil, addr, err
		}
		c.conns[addr] = cc
	}
	return cc, addr, nil
}

func (c *Client) newConn(addr string) (*grpc.ClientConn, error) {
	creds := insecure.NewCredentials()
	if c.opts.tls != nil {
		cfg := c.opts.tls.Clone()
		if cfg.ServerName == "" && c.dns != "" {
			// Addresses looked up from a name are verified against the name.
			cfg.ServerName, _, _ = net.SplitHostPort(c.dns)
		}
		creds = credentials.NewTLS(cfg)
	}
	const maxReceive = 64 << 20
	dialOpts := append([]grpc.DialOption{
		grpc.WithTransportCredentials(creds),
		grpc.WithUserAgent("drip-go-client/" + c.opts.name),
		// Publish requests and deliveries travel in their wire form
		// (rawcodec.Raw): encoded and decoded without protobuf objects.
		grpc.WithDefaultCallOptions(grpc.ForceCodecV2(rawcodec.Codec{}),
			// The broker bounds what it delivers (its message limits);
			// gRPC's default of 4 MiB would refuse a message it accepted.
			grpc.MaxCallRecvMsgSize(maxReceive)),
		// A restarted broker is dialled again within a second.
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second},
			MinConnectTimeout: 5 * time.Second,
		}),
	}, c.opts.dialOpts...)
	if c.opts.token != "" {
		dialOpts = append(dialOpts, grpc.WithPerRPCCredentials(bearer{token: c.opts.token, secure: !c.opts.tokenPlaintext}))
	}
	target := addr
	if !strings.Contains(addr, "://") && !strings.HasPrefix(addr, "unix:") {
		// One address is one broker: no resolver of gRPC's in between (the
		// client does its own failover), and the dialer resolves host names.
		target = "passthrough:///" + addr
	}
	cc, err := grpc.NewClient(target, dialOpts...)
	if err != nil {
		return nil, fmt.Errorf("broker address %q: %w", addr, err)
	}
	return cc, nil
}

// failed records that addr did not answer: the next use takes the address
// after it. addr is the current address, or the next one, which useOther
// returns when the current one is to be avoided.
func (c *Client) failed(addr string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := len(c.addrs)
	for k := range min(n, 2) {
		if c.addrs[(c.cur+k)%n] == addr {
			c.cur = (c.cur + k + 1) % n
			return
		}
	}
}

// moved records that a stream left addr for another: prefer that one.
func (c *Client) moved(to string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, a := range c.addrs {
		if a == to {
			c.cur = i
		}
	}
}

// addressCount is how many addresses one round tries.
func (c *Client) addressCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.addrs)
}

// retrier paces attempts to reach a broker: a round tries each address at
// once; between rounds it waits a jittered exponential backoff and looks a
// DNS target up again.
type retrier struct {
	c        *Client
	tries    int // in this round
	delay    time.Duration
	deadline time.Time // zero: none
}

func (c *Client) newRetrier() *retrier {
	r := &retrier{c: c, delay: c.opts.backoffMin}
	if c.opts.failoverWait > 0 {
		r.deadline = time.Now().Add(c.opts.failoverWait)
	}
	return r
}

// next returns how long to wait before the next attempt, and false when
// the failover wait is over.
func (r *retrier) next(ctx context.Context) (time.Duration, bool) {
	r.tries++
	if !r.deadline.IsZero() && time.Now().After(r.deadline) {
		return 0, false
	}
	if r.tries < r.c.addressCount() {
		return 0, true
	}
	r.tries = 0
	wait := r.delay/2 + rand.N(r.delay/2+1)
	r.delay = min(2*r.delay, r.c.opts.backoffMax)
	if r.c.dns != "" {
		_ = r.c.resolve(ctx) // the next round uses the new list, or the old one
	}
	return wait, true
}

// waitReady waits for the first connection attempt to settle. gRPC keeps
// retrying in the background after a failure, but a caller that has just
// asked to connect is better served by the reason now.
func waitReady(ctx context.Context, cc *grpc.ClientConn) error {
	cc.Connect()
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		switch s := cc.GetState(); s {
		case connectivity.Ready:
			return nil
		case connectivity.TransientFailure:
			return connectError(ctx, cc)
		case connectivity.Shutdown:
			return errors.New("connection shut down")
		default:
			if !cc.WaitForStateChange(ctx, s) {
				return ctx.Err()
			}
		}
	}
}

// connectError returns why the connection failed. The connectivity API does
// not expose the reason, but a fail-fast call on a failed connection returns
// it (for example "connection refused" or a TLS verification error) without
// reaching the broker.
func connectError(ctx context.Context, cc *grpc.ClientConn) error {
	probeCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	if _, err := dripv1.NewBrokerClient(cc).Publish(probeCtx); err != nil {
		return ctxOr(ctx, err)
	}
	// The connection came up meanwhile; the probe stream is cancelled unused.
	return nil
}

// ctxOr returns ctx's error if ctx has ended, err otherwise: when the
// caller cancelled, the gRPC status that resulted says less than the
// context error, which errors.Is can recognise. A broker's answer that is
// not the cancellation itself (the last of several attempts: a refusal,
// an unreachable address) is told beside it, so that a caller whose
// deadline ran out learns why it was not met.
func ctxOr(ctx context.Context, err error) error {
	cerr := ctx.Err()
	switch {
	case cerr == nil:
		return err
	case err == nil, errors.Is(err, cerr), status.Code(err) == codes.Canceled, status.Code(err) == codes.DeadlineExceeded:
		return cerr
	}
	return fmt.Errorf("%w; the last attempt: %v", cerr, err)
}

// permanent says whether a broker's error ends a stream for good: moving
// to another broker would get the same answer.
func permanent(err error) bool {
	switch status.Code(err) {
	case codes.InvalidArgument, codes.PermissionDenied, codes.Unauthenticated, codes.FailedPrecondition,
		codes.OutOfRange, codes.Unimplemented:
		return true
	}
	return false
}

// Addr returns the target the client was dialled with.
func (c *Client) Addr() string { return c.target }

// Close closes every connection, which ends every publisher and
// subscription made from the client; close those first to get their
// results.
func (c *Client) Close() error {
	c.cancel()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	for addr, cc := range c.conns {
		_ = cc.Close()
		delete(c.conns, addr)
	}
	return nil
}
