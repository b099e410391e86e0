package client

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	dripv1 "github.com/dripmesh/drip/api/proto/drip/v1"
)

// DefaultBufferSize is the number of deliveries a Subscription buffers
// between its receive goroutine and Next.
const DefaultBufferSize = 256

// Option configures Dial.
type Option func(*options)

type options struct {
	tls        *tls.Config
	dialOpts   []grpc.DialOption
	name       string
	bufferSize int
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

// WithDialOptions adds gRPC dial options, applied after the client's own
// (transport credentials, user agent), so they can override them.
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

// Client is a connection to one broker. Publishers and subscriptions made
// from it share the connection.
type Client struct {
	conn *grpc.ClientConn
	api  dripv1.BrokerClient
	addr string
	opts options
}

// Dial connects to the broker at addr (host:port, or any gRPC target) and
// waits until the connection is up, the first attempt has failed, or ctx
// ends.
func Dial(ctx context.Context, addr string, opts ...Option) (*Client, error) {
	o := options{name: "drip-go", bufferSize: DefaultBufferSize}
	for _, opt := range opts {
		opt(&o)
	}
	creds := insecure.NewCredentials()
	if o.tls != nil {
		creds = credentials.NewTLS(o.tls)
	}
	dialOpts := append([]grpc.DialOption{
		grpc.WithTransportCredentials(creds),
		grpc.WithUserAgent("drip-go-client/" + o.name),
	}, o.dialOpts...)
	conn, err := grpc.NewClient(addr, dialOpts...)
	if err != nil {
		return nil, fmt.Errorf("drip client: broker address %q: %w", addr, err)
	}
	c := &Client{conn: conn, api: dripv1.NewBrokerClient(conn), addr: addr, opts: o}
	if err := c.waitReady(ctx); err != nil {
		_ = conn.Close()
		return nil, fmt.Errorf("drip client: connecting to broker %s: %w", addr, err)
	}
	return c, nil
}

// waitReady waits for the first connection attempt to settle. gRPC keeps
// retrying in the background after a failure, but a caller that has just
// asked to connect is better served by the reason now.
func (c *Client) waitReady(ctx context.Context) error {
	c.conn.Connect()
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		switch s := c.conn.GetState(); s {
		case connectivity.Ready:
			return nil
		case connectivity.TransientFailure:
			return c.connectError(ctx)
		case connectivity.Shutdown:
			return errors.New("connection shut down")
		default:
			if !c.conn.WaitForStateChange(ctx, s) {
				return ctx.Err()
			}
		}
	}
}

// connectError returns why the connection failed. The connectivity API does
// not expose the reason, but a fail-fast call on a failed connection returns
// it (for example "connection refused" or a TLS verification error) without
// reaching the broker.
func (c *Client) connectError(ctx context.Context) error {
	probeCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	if _, err := c.api.Publish(probeCtx); err != nil {
		return ctxOr(ctx, err)
	}
	// The connection came up meanwhile; the probe stream is cancelled unused.
	return nil
}

// ctxOr returns ctx's error if ctx has ended, err otherwise: when the
// caller cancelled, the gRPC status that resulted says less than the
// context error, which errors.Is can recognise.
func ctxOr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// Addr returns the address the client was dialled with.
func (c *Client) Addr() string { return c.addr }

// Close closes the connection, which ends every publisher and subscription
// made from the client; close those first to get their results.
func (c *Client) Close() error { return c.conn.Close() }
