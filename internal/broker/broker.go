package broker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"golang.org/x/time/rate"
	"google.golang.org/grpc/mem"
	"k8s.io/utils/clock"

	dripv1 "github.com/dripmesh/drip/api/proto/drip/v1"
	"github.com/dripmesh/drip/internal/authz"
	"github.com/dripmesh/drip/internal/dedup"
	"github.com/dripmesh/drip/internal/encoding"
	"github.com/dripmesh/drip/internal/linkstate"
	"github.com/dripmesh/drip/internal/node"
	"github.com/dripmesh/drip/internal/transport"
)

// Option customises a Broker.
type Option func(*options)

type options struct {
	log    *zap.Logger
	reg    prometheus.Registerer
	dialer transport.Dialer
	clock  clock.WithTicker
	auth   linkstate.Authenticator
	// runBuild runs a PREDICATES index build on the Broker's build
	// goroutine: tests hold builds back with it.
	runBuild func(*encoding.Build)
}

func defaults() options {
	return options{log: zap.NewNop(), dialer: transport.GRPCDialer{}, clock: clock.RealClock{},
		runBuild: func(b *encoding.Build) { b.Run() }}
}

// WithLogger sets the logger (default: a no-op logger).
func WithLogger(l *zap.Logger) Option { return func(o *options) { o.log = l } }

// WithRegisterer sets where metrics are registered (default: nowhere).
func WithRegisterer(r prometheus.Registerer) Option { return func(o *options) { o.reg = r } }

// WithDialer sets how neighbours are dialled (default: plaintext gRPC,
// Config.PeerNotSentLowat bounding each connection's unsent bytes).
func WithDialer(d transport.Dialer) Option { return func(o *options) { o.dialer = d } }

// WithAuthenticator signs the advertisements the broker originates and
// checks every received one before it is installed (linkstate.Config.Auth;
// NewServer sets it from the peer certificate when PeerIdentity is on).
func WithAuthenticator(a linkstate.Authenticator) Option { return func(o *options) { o.auth = a } }

// WithClock sets the clock every timer of the broker, its node and its
// links runs on (default: the real one).
func WithClock(c clock.WithTicker) Option { return func(o *options) { o.clock = c } }

// Broker runs a node.Node: one core goroutine owns its control plane, a
// transport.Link per neighbour carries frames (its reader goroutine runs
// the data plane for the bundles it receives), a dial loop per configured
// neighbour keeps links up, a goroutine per PREDICATES index build runs it
// beside the core (one at a time, node.IndexBuilder), and the client
// service's streams publish and deliver. Create it with New, serve
// ClientService and PeerService, and Run it until shutdown.
type Broker struct {
	node  *node.Node
	cfg   Config
	log   *zap.Logger
	m     *metrics
	authz *authorizer
	o     options
	open  *dripv1.Open
	clock clock.WithTicker
	// control converts what the node sends for every link (the core
	// goroutine's).
	control *transport.ControlEncoder
	// sends counts what client connections hold for Subscribe streams
	// against the node's memory budget (for listeners it wraps).
	sends *connMeter
	// sendBuffers recycles the buffers deliveries are encoded into for
	// Subscribe streams (deliverySender.buffer).
	sendBuffers mem.BufferPool

	events chan coreEvent
	wakeCh chan struct{} // coalesced "flush soon"
	// built carries the index build in flight (at most one) back to the
	// core beside events rather than behind them, which on a hub short of
	// CPU can be a long wait, the data plane matching with the old index
	// all along.
	built chan *encoding.Build

	linksMu sync.Mutex
	links   map[uint32]*transport.Link // every attached link, by neighbour
	// establishedLog logs a few of the links refused for claiming a
	// linked neighbour's router ID (attach).
	establishedLog *rate.Sometimes
	// detached is closed, and replaced, whenever a link leaves links: a
	// dial loop waits on it for its neighbour's link to be gone.
	detached chan struct{}

	running   atomic.Bool
	stopping  atomic.Bool   // links are draining: attach nothing new
	coreDone  chan struct{} // closed when the core goroutine has returned
	stopped   chan struct{} // closed when Run has finished
	joined    chan struct{} // closed when the broker has routes (Joined)
	linkGroup sync.WaitGroup
	builds    sync.WaitGroup // the index build in flight (coreBuilder)
}

// New validates cfg and returns a broker that is not running yet.
func New(cfg Config, opts ...Option) (*Broker, error) {
	o := defaults()
	o.dialer = transport.GRPCDialer{NotSentLowat: cfg.PeerNotSentLowat}
	for _, opt := range opts {
		opt(&o)
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("broker %q: %w", cfg.Name, err)
	}
	n, err := node.New(cfg.Config, node.WithLogger(o.log), node.WithRegisterer(o.reg), node.WithClock(o.clock), node.WithAuthenticator(o.auth))
	if err != nil {
		return nil, err
	}
	m := newMetrics(o.reg)
	b := &Broker{
		node:        n,
		cfg:         cfg,
		log:         n.Log(),
		m:           m,
		authz:       &authorizer{denied: m.authzDenied, log: n.Log(), now: o.clock.Now, logged: map[string]time.Time{}},
		o:           o,
		clock:       o.clock,
		control:     &transport.ControlEncoder{},
		sends:       newConnMeter(n.Budget()),
		sendBuffers: newSendBuffers(),
		events:      make(chan coreEvent, coreQueue),
		wakeCh:      make(chan struct{}, 1),
		built:       make(chan *encoding.Build, 1),
		links:       map[uint32]*transport.Link{},
		// As refused TLS handshakes are: at most three per ten seconds.
		establishedLog: &rate.Sometimes{First: 3, Interval: 10 * time.Second},
		detached:       make(chan struct{}),
		coreDone:       make(chan struct{}),
		stopped:        make(chan struct{}),
		joined:         make(chan struct{}),
		open: &dripv1.Open{
			ProtocolVersion: transport.ProtocolVersion,
			RouterId:        cfg.ID,
			RouterName:      cfg.Name,
			Mesh:            cfg.Mesh,
		},
	}
	transport.SetOpenBloom(b.open, cfg.Encoding)
	if cfg.PeerCompression {
		b.open.Compression = []string{transport.CompressionDeflate}
	}
	b.open.PredicateDeltas = cfg.PeerPredicateDeltas
	b.open.SparseDestinations = true
	n.SetWake(func() {
		select {
		case b.wakeCh <- struct{}{}:
		default:
		}
	})
	n.SetIndexBuilder(coreBuilder{b})
	if o.reg != nil {
		o.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: namespace, Name: "core_events_queued",
			Help: "Events waiting for the broker's control plane: control frames, links up and down. At 1024 (full) the link readers wait."},
			func() float64 { return float64(len(b.events)) }))
	}
	return b, nil
}

// coreBuilder is the Broker's IndexBuilder.
type coreBuilder struct{ b *Broker }

// Start runs a PREDICATES index build on a goroutine of its own and hands
// it back to the core goroutine on a channel of its own, ahead of the
// queued events, and the core installs it: the core meanwhile goes on
// sending and processing hellos, which a build of seconds on a starved
// machine would hold up past the dead interval. A build finished after the
// core has returned is dropped.
func (c coreBuilder) Start(build *encoding.Build) {
	b := c.b
	b.builds.Add(1)
	go func() {
		defer b.builds.Done()
		b.o.runBuild(build)
		select {
		case b.built <- build:
		case <-b.coreDone:
		}
	}()
}

// Joined is closed once the running broker has joined the mesh
// (node.Node.Joined): it is linked both ways to every configured neighbour
// or has waited JoinTimeout for them, and its PREDICATES index covers the
// database it then held. Until then messages published here could be
// dropped for want of a route, or matched against an index without the
// mesh's filters and delivered nowhere, so publish streams wait for it, and
// the server reports itself ready — to Kubernetes, which then goes on with
// a rolling update — only after it.
func (b *Broker) Joined() <-chan struct{} { return b.joined }

// Stopped is closed once Run has returned.
func (b *Broker) Stopped() <-chan struct{} { return b.stopped }

// Node is the broker's logic (tests and diagnostics).
func (b *Broker) Node() *node.Node { return b.node }

// Open is how this broker introduces itself on peer links.
func (b *Broker) Open() *dripv1.Open { return b.open }

// Config returns the broker's configuration.
func (b *Broker) Config() Config { return b.cfg }

// AdvertisementsRefused returns the counter of neighbours' advertisements
// refused for a reason (linkstate.RefusedReasons).
func (b *Broker) AdvertisementsRefused(reason string) prometheus.Counter {
	return b.node.AdvertisementsRefused(reason)
}

// HandshakeFailures returns the counter of refused links for a reason.
func (b *Broker) HandshakeFailures(reason string) prometheus.Counter {
	return b.m.linkHandshakeFails.WithLabelValues(reason)
}

// PublishedCounter counts messages accepted from local publishers.
func (b *Broker) PublishedCounter() prometheus.Counter { return b.node.PublishedCounter() }

// DuplicatesSuppressed counts copies not passed on, by verdict.
func (b *Broker) DuplicatesSuppressed(v dedup.Verdict) prometheus.Counter {
	return b.node.DuplicatesSuppressed(v)
}

// SetAuthzPolicy installs p for the client streams opened from now on; nil
// turns authorization off (every client may publish and subscribe to
// anything). A policy whose subscribe predicate could never fit the
// broker's predicate limits is refused.
func (b *Broker) SetAuthzPolicy(p *authz.Policy) error {
	if p != nil {
		if err := p.CheckLimits(b.cfg.Predicates); err != nil {
			return err
		}
	}
	b.authz.policy.Store(p)
	return nil
}

// AuthzPolicy is the policy in force, nil when authorization is off.
func (b *Broker) AuthzPolicy() *authz.Policy { return b.authz.policy.Load() }

// coreQueue is how many events wait for the core goroutine before the link
// readers that bring them wait too.
const coreQueue = 1024

// coreEvent is an input for the core goroutine.
type coreEvent struct {
	kind eventKind
	link *transport.Link
	// replaces is the link a new one replaces (evLinkUp): it drains once
	// the data plane's links name the new one.
	replaces *transport.Link
	ctl      []linkstate.Message
	arrived  time.Time // evControl: when the frame arrived
	reply    chan<- node.Inspection
}

type eventKind uint8

const (
	evLinkUp eventKind = iota + 1
	evLinkDown
	evControl
	evInspect
)

// Inspect returns the broker's routing state, taken on the core goroutine.
// It fails if the broker is not running.
func (b *Broker) Inspect(ctx context.Context) (node.Inspection, error) {
	reply := make(chan node.Inspection, 1)
	select {
	case b.events <- coreEvent{kind: evInspect, reply: reply}:
	case <-ctx.Done():
		return node.Inspection{}, ctx.Err()
	case <-b.coreDone:
		return node.Inspection{}, errors.New("broker stopped")
	}
	select {
	case r := <-reply:
		return r, nil
	case <-ctx.Done():
		return node.Inspection{}, ctx.Err()
	}
}
