package broker

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"k8s.io/utils/clock"

	dripv1 "github.com/dripmesh/drip/api/proto/drip/v1"
	"github.com/dripmesh/drip/internal/dedup"
	"github.com/dripmesh/drip/internal/encoding"
	"github.com/dripmesh/drip/internal/linkstate"
	"github.com/dripmesh/drip/internal/transport"
)

// Option customises a Broker or a Node.
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

// WithClock sets the clock every timer of the broker runs on (default: the
// real one); tests pass a fake clock to run in virtual time.
func WithClock(c clock.WithTicker) Option { return func(o *options) { o.clock = c } }

// Broker runs a Node: one core goroutine owns its control plane, a
// transport.Link per neighbour carries frames (its reader goroutine runs
// the data plane for the bundles it receives), a dial loop per configured
// neighbour keeps links up, a goroutine per PREDICATES index build runs it
// beside the core (one at a time, Node.SetIndexBuilder), and the client
// service's streams publish and deliver. Create it with New, serve ClientService and PeerService, and
// Run it until shutdown.
type Broker struct {
	node  *Node
	authz *authorizer
	o     options
	open  *dripv1.Open
	clock clock.WithTicker

	events chan coreEvent
	wakeCh chan struct{} // coalesced "flush soon"
	// built carries the index build in flight (at most one) back to the
	// core beside events rather than behind them, which on a hub short of
	// CPU can be a long wait: in the lab's scale-clients-50 one of the
	// hub's builds took 99 s from plan to install while it queued there,
	// the data plane matching with the old index all along
	// (docs/results/experiments/scale).
	built chan *encoding.Build

	linksMu sync.Mutex
	links   map[uint32]*transport.Link // every attached link, by neighbour

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
	n, err := newNode(cfg, o)
	if err != nil {
		return nil, err
	}
	b := &Broker{
		node:     n,
		authz:    &authorizer{denied: n.m.authzDenied, log: n.log, now: o.clock.Now, logged: map[string]time.Time{}},
		o:        o,
		clock:    o.clock,
		events:   make(chan coreEvent, coreQueue),
		wakeCh:   make(chan struct{}, 1),
		built:    make(chan *encoding.Build, 1),
		links:    map[uint32]*transport.Link{},
		coreDone: make(chan struct{}),
		stopped:  make(chan struct{}),
		joined:   make(chan struct{}),
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
	n.SetWake(func() {
		select {
		case b.wakeCh <- struct{}{}:
		default:
		}
	})
	n.SetIndexBuilder(coreBuilder{b})
	factory{o.reg}.must(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: namespace, Name: "core_events_queued",
		Help: "Events waiting for the broker's control plane: control frames, links up and down. At 1024 (full) the link readers wait."},
		func() float64 { return float64(len(b.events)) }))
	return b, nil
}

// coreBuilder is the Broker's IndexBuilder.
type coreBuilder struct{ b *Broker }

// Start runs a PREDICATES index build on a goroutine of its own and hands
// it back to the core goroutine on a channel of its own, ahead of the
// queued events, and the core installs it: the core meanwhile goes on
// sending and processing hellos, which a build of seconds on a starved
// machine held up past the dead interval when it ran on the core
// (docs/results/experiments/scale). A build finished after the core has
// returned is dropped.
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
// (Node.Joined): it is linked both ways to every configured neighbour or
// has waited JoinTimeout for them, and its PREDICATES index covers the
// database it then held. Until then messages published here could be
// dropped for want of a route, or matched against an index without the
// mesh's filters and delivered nowhere, so publish streams wait for it, and
// the server reports itself ready — to Kubernetes, which then goes on with
// a rolling update — only after it.
func (b *Broker) Joined() <-chan struct{} { return b.joined }

// Stopped is closed once Run has returned.
func (b *Broker) Stopped() <-chan struct{} { return b.stopped }

// Node is the broker's logic (tests and diagnostics).
func (b *Broker) Node() *Node { return b.node }

// Open is how this broker introduces itself on peer links.
func (b *Broker) Open() *dripv1.Open { return b.open }

// Config returns the broker's configuration.
func (b *Broker) Config() Config { return b.node.cfg }

// AdvertisementsRefused returns the counter of neighbours' advertisements
// refused for a reason (linkstate.RefusedReasons).
func (b *Broker) AdvertisementsRefused(reason string) prometheus.Counter {
	return b.node.AdvertisementsRefused(reason)
}

// HandshakeFailures returns the counter of refused links for a reason.
func (b *Broker) HandshakeFailures(reason string) prometheus.Counter {
	return b.node.HandshakeFailures(reason)
}

// PublishedCounter counts messages accepted from local publishers.
func (b *Broker) PublishedCounter() prometheus.Counter { return b.node.PublishedCounter() }

// DuplicatesSuppressed counts copies not passed on, by verdict.
func (b *Broker) DuplicatesSuppressed(v dedup.Verdict) prometheus.Counter {
	return b.node.DuplicatesSuppressed(v)
}

// coreQueue is how many events wait for the core goroutine before the link
// readers that bring them wait too.
const coreQueue = 1024

// coreEvent is an input for the core goroutine.
type coreEvent struct {
	kind   eventKind
	link   *transport.Link
	weight uint32
	// replaces is the link a new one replaces (evLinkUp): it drains once
	// the data plane's links name the new one.
	replaces *transport.Link
	ctl      []linkstate.Message
	arrived  time.Time // evControl: when the frame arrived
	reply    chan<- Inspection
}

type eventKind uint8

const (
	evLinkUp eventKind = iota + 1
	evLinkDown
	evControl
	evInspect
)

// toCore hands an event to the core goroutine unless it has returned.
func (b *Broker) toCore(ev coreEvent) {
	select {
	case b.events <- ev:
	case <-b.coreDone:
		if ev.replaces != nil {
			// No core to publish the successor: the broker is stopping.
			ev.replaces.Close(fmt.Errorf("%w: replaced by a newer link", errDuplicate))
		}
	}
}

func (b *Broker) handle(ev coreEvent) {
	n := b.node
	switch ev.kind {
	case evLinkUp:
		// Two links to one neighbour attached at once (both ends dialled)
		// can have their events queued in either order: a link replaced
		// before the core heard of it must not become current after its
		// successor, or when it closes the core is left with no link to
		// the neighbour, whose adjacency then never forms (seen for 3.5
		// minutes in the 42-site lab). Its successor's event drains it.
		b.linksMu.Lock()
		current := b.links[ev.link.Peer()] == ev.link
		b.linksMu.Unlock()
		if current {
			n.LinkUp(ev.link, ev.weight)
		}
		if old := ev.replaces; old != nil {
			// Only now: the data plane pushed onto the old link until
			// LinkUp published the new one, and a push refused by a
			// closed link would be a lost bundle. The old link sends
			// what it holds, and reads what its neighbour sent, until
			// both ends have half-closed it.
			b.linkGroup.Add(1)
			go func() {
				defer b.linkGroup.Done()
				ctx, cancel := context.WithTimeout(context.Background(), replacedDrainTimeout)
				defer cancel()
				old.Drain(ctx)
			}()
		}
	case evLinkDown:
		n.LinkDown(ev.link)
	case evControl:
		n.m.controlWait.Observe(b.clock.Since(ev.arrived).Seconds())
		n.Control(ev.link, ev.ctl)
	case evInspect:
		ev.reply <- n.Inspect()
	}
}

// drainPhase is where a graceful shutdown stands (docs/design.md §10).
type drainPhase uint8

const (
	running         drainPhase = iota
	subscribersMove            // clients move their subscriptions and publishers elsewhere
	reroute                    // withdrawn; neighbours reroute while in-flight bundles pass
	linksDrain                 // links send what is queued and close
)

// Run drives the broker until ctx ends, then leaves the mesh without losing
// messages: it tells publishers and subscribers to move to other brokers
// and waits until its subscribers have (or half of DrainTimeout), withdraws
// from the mesh and keeps forwarding while neighbours reroute — until each
// has said it sends nothing more here (or RerouteGrace) — then drains and
// closes its links. DrainTimeout bounds the whole.
// Run returns once all of the broker's goroutines have stopped.
func (b *Broker) Run(ctx context.Context) error {
	if !b.running.CompareAndSwap(false, true) {
		return errors.New("broker is already running")
	}
	n, cfg := b.node, b.node.cfg
	n.log.Info("broker starting", zap.String("mesh", cfg.Mesh), zap.Int("peers", len(cfg.Peers)),
		zap.Stringer("bloom_scheme", cfg.Encoding.Scheme), zap.Int("bloom_bits", cfg.Encoding.M), zap.Int("bloom_hashes", cfg.Encoding.K))
	dialCtx, stopDialing := context.WithCancel(context.Background())
	var dialers sync.WaitGroup
	for _, p := range cfg.Peers {
		dialers.Add(1)
		go func() {
			defer dialers.Done()
			b.dialLoop(dialCtx, p)
		}()
	}

	releasing := make(chan struct{})
	released := make(chan struct{})
	go func() {
		defer close(released)
		b.releaseBounced(releasing)
	}()

	ticker := b.clock.NewTicker(cfg.TickInterval)
	defer ticker.Stop()
	n.Tick()
	phase, ctxDone := running, ctx.Done()
	var drainStart, withdrawn, phaseEnd time.Time
	joined := false
	for phase != linksDrain {
		select {
		case <-ctxDone:
			ctxDone = nil
			drainStart = b.clock.Now()
			phase, phaseEnd = subscribersMove, drainStart.Add(cfg.DrainTimeout/2)
			n.log.Info("broker draining: clients move to other brokers", zap.Int("subscriptions", n.Subscriptions()))
			n.BeginDrain(drainStart.Add(cfg.DrainTimeout), cfg.DrainOverlap)
		case <-ticker.C():
			n.Tick()
		case ev := <-b.events:
			b.handle(ev)
		case <-b.wakeCh:
			n.Flush()
		case build := <-b.built:
			n.InstallIndex(build)
		}
		now := b.clock.Now()
		if !joined && n.Joined() {
			joined = true
			close(b.joined)
		}
		switch {
		case phase == subscribersMove && (n.Subscriptions() == 0 || !now.Before(phaseEnd)):
			// Subscriptions still open here were kept by clients that saw
			// messages routed to this broker alone: ending them can lose.
			n.log.Info("subscribers' move over", zap.Int("subscriptions_ended", n.Subscriptions()), zap.Duration("after", now.Sub(drainStart)),
				zap.Strings("ended", n.subs.describe(5)))
			n.EndSubscriptions()
			n.Withdraw()
			stopDialing()
			withdrawn = now
			phase, phaseEnd = reroute, now.Add(min(cfg.RerouteGrace, max(0, drainStart.Add(cfg.DrainTimeout).Sub(now))))
		case phase == reroute:
			finished := b.peersFinished()
			if !finished && now.Before(phaseEnd) {
				break
			}
			if finished {
				n.log.Info("neighbours route around this broker", zap.Duration("after", now.Sub(withdrawn)))
			} else {
				n.log.Warn("neighbours did not all route around this broker in time; closing links anyway",
					zap.Duration("waited", now.Sub(withdrawn)))
			}
			phase = linksDrain
		}
	}
	close(b.coreDone)
	stopDialing()
	dialers.Wait()
	close(releasing)
	<-released
	b.builds.Wait()
	b.drainLinks(drainStart.Add(cfg.DrainTimeout))
	close(b.stopped)
	n.log.Info("broker stopped")
	return nil
}

// releaseBounced sends on the bundles the data plane held because their
// routes led back where they came from (Forwarder.ReleaseHeld), as they
// fall due, until stop is closed; then it sends every one still held,
// before the links drain.
func (b *Broker) releaseBounced(stop <-chan struct{}) {
	fwd := b.node.NewForwarder()
	t := b.clock.NewTicker(b.node.cfg.TickInterval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			fwd.ReleaseHeld(true)
			return
		case <-t.C():
			fwd.ReleaseHeld(false)
		}
	}
}

// peersFinished reports whether every neighbour has said (Frame.finished)
// that it routes around this withdrawn broker and has sent its last
// bundle here, or its link has ended.
func (b *Broker) peersFinished() bool {
	b.linksMu.Lock()
	defer b.linksMu.Unlock()
	for _, l := range b.links {
		select {
		case <-l.PeerFinished():
		case <-l.Done():
		default:
			return false
		}
	}
	return true
}

// drainLinks sends what every link has queued, half-closes it and waits for
// the neighbour to close, until deadline.
func (b *Broker) drainLinks(deadline time.Time) {
	b.stopping.Store(true)
	b.linksMu.Lock()
	links := make([]*transport.Link, 0, len(b.links))
	for _, l := range b.links {
		links = append(links, l)
	}
	b.linksMu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), max(deadline.Sub(b.clock.Now()), time.Second))
	defer cancel()
	var wg sync.WaitGroup
	for _, l := range links {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l.Drain(ctx)
		}()
	}
	wg.Wait()
	b.linkGroup.Wait()
}

// Inspect returns the broker's routing state, taken on the core goroutine.
// It fails if the broker is not running.
func (b *Broker) Inspect(ctx context.Context) (Inspection, error) {
	reply := make(chan Inspection, 1)
	select {
	case b.events <- coreEvent{kind: evInspect, reply: reply}:
	case <-ctx.Done():
		return Inspection{}, ctx.Err()
	case <-b.coreDone:
		return Inspection{}, errors.New("broker stopped")
	}
	select {
	case r := <-reply:
		return r, nil
	case <-ctx.Done():
		return Inspection{}, ctx.Err()
	}
}

// HandleLink serves a link a neighbour dialled (transport.Handler). It
// returns when the link ends.
func (b *Broker) HandleLink(c transport.Conn) {
	l, err := b.attach(c, false)
	if err != nil {
		if !b.stopping.Load() {
			b.node.log.Warn("refused peer link", zap.String("peer", c.Remote().GetRouterName()),
				zap.Uint32("peer_router", c.Remote().GetRouterId()), zap.Error(err))
		}
		c.Close(err)
		return
	}
	<-l.Done()
}

// PeerService returns the drip.v1.Peer service of this broker.
func (b *Broker) PeerService() *transport.PeerServer {
	ps := transport.NewPeerServer(b.open, b.HandleLink)
	ps.Rejected = func(remote *dripv1.Open, err error) {
		reason, _ := transport.IsIncompatible(err)
		b.node.m.linkHandshakeFails.WithLabelValues(reason).Inc()
		b.node.log.Warn("refused peer link", zap.String("peer", remote.GetRouterName()), zap.Uint32("peer_router", remote.GetRouterId()), zap.Error(err))
	}
	return ps
}

var errDuplicate = errors.New("a link to this router already exists")

// replacedDrainTimeout bounds the drain of a link a newer one replaced: a
// neighbour that restarted will never half-close the old one.
const replacedDrainTimeout = 5 * time.Second

// attach starts a new link and tells the core. When two links to one
// neighbour race (both sides dialled), the one dialled by the lower router
// ID wins on both sides, so exactly one survives; a new link in the same
// direction as an existing one replaces it (the neighbour restarted or
// redialled).
func (b *Broker) attach(c transport.Conn, dialed bool) (*transport.Link, error) {
	if b.stopping.Load() {
		return nil, errors.New("broker shutting down")
	}
	n := b.node
	remote := c.Remote()
	if id := remote.GetRouterId(); id > n.cfg.MaxRouterID {
		// Per-message state is sized by the largest router ID known.
		n.m.linkHandshakeFails.WithLabelValues("router_id").Inc()
		return nil, fmt.Errorf("peer %q claims router ID %d, beyond the largest this mesh admits (--max-router-id %d)",
			remote.GetRouterName(), id, n.cfg.MaxRouterID)
	}
	fwd := n.NewForwarder()
	ads := transport.NewAdDecoder(n.cfg.PeerPredicateDeltas)
	l, err := transport.NewLink(c, transport.LinkConfig{
		QueueBytes: n.cfg.LinkQueueBytes, MaxFrameBytes: n.cfg.MaxFrameBytes,
		Compression: n.cfg.PeerCompression, PredicateDeltas: n.cfg.PeerPredicateDeltas,
		Dialed: dialed, Metrics: n.linkMetrics(remote.GetRouterName()),
		Account:      n.LinkAccount(),
		Backpressure: transport.Backpressure{Stalled: n.cfg.SlowLinks.Stalled, Behind: n.cfg.SlowLinks.Behind, Now: n.subs.cfg.now},
	}, func(l *transport.Link, control []*dripv1.Control, bundles [][]byte) error {
		if len(control) > 0 {
			msgs, err := DecodeControl(l, ads, control)
			if err != nil {
				return err
			}
			b.toCore(coreEvent{kind: evControl, link: l, ctl: msgs, arrived: b.clock.Now()})
		}
		if len(bundles) > 0 {
			fwd.Bundles(l, bundles)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	peer := l.Peer()
	var replaced *transport.Link
	b.linksMu.Lock()
	if old := b.links[peer]; old != nil {
		lowerDials := n.cfg.ID < peer
		if refuseNew(old.Dialed(), dialed, lowerDials, b.silent(old)) {
			b.linksMu.Unlock()
			n.m.linkHandshakeFails.WithLabelValues("duplicate").Inc()
			b.readRefused(l)
			return nil, fmt.Errorf("%w (%s)", errDuplicate, l.Name())
		}
		replaced = old
	}
	b.links[peer] = l
	b.linkGroup.Add(1)
	b.linksMu.Unlock()

	n.m.linkUp.WithLabelValues(l.Name()).Set(1)
	n.log.Info("link up", zap.String("peer", l.Name()), zap.Uint32("peer_router", peer), zap.Bool("dialed", dialed))
	b.toCore(coreEvent{kind: evLinkUp, link: l, weight: b.weightOf(peer), replaces: replaced})
	l.Start()
	go func() {
		defer b.linkGroup.Done()
		<-l.Done()
		l.Wait()
		b.detach(l)
	}()
	return l, nil
}

// readRefused reads what the neighbour sends on a link this broker
// refused, until the neighbour ends it or replacedDrainTimeout, and sends
// nothing on it. When both ends dial at once, each end sees the two links
// arrive in its own order: the neighbour may have taken the link refused
// here as its only one and sent bundles on it before the link both ends
// keep reached it. It then replaces this one and drains it — sends what it
// holds and half-closes — and what it sent is forwarded from here instead
// of going down with the connection. Its control messages are ignored (the
// core knows only the link it keeps).
func (b *Broker) readRefused(l *transport.Link) {
	l.Start()
	ctx, cancel := context.WithTimeout(context.Background(), replacedDrainTimeout)
	defer cancel()
	select {
	case <-l.Done():
	case <-ctx.Done():
	case <-b.coreDone:
	}
	l.Close(errDuplicate)
	l.Wait()
}

func (b *Broker) weightOf(peer uint32) uint32 {
	for _, p := range b.node.cfg.Peers {
		if p.ID == peer && p.Weight > 0 {
			return p.Weight
		}
	}
	return 1
}

func (b *Broker) detach(l *transport.Link) {
	n := b.node
	b.linksMu.Lock()
	if b.links[l.Peer()] == l {
		delete(b.links, l.Peer())
		n.m.linkUp.WithLabelValues(l.Name()).Set(0)
	}
	b.linksMu.Unlock()
	l.Close(nil) // counts what was still queued
	n.log.Info("link down", zap.String("peer", l.Name()), zap.Error(l.Err()))
	b.toCore(coreEvent{kind: evLinkDown, link: l})
}

// refuseNew says whether a new link to a neighbour that already has one is
// refused. When two links race (both sides dialled), the one dialled by the
// lower router ID wins on both sides; a new link in the direction of the
// old one replaces it (the neighbour restarted or redialled), and so does
// any new link once the old one has gone silent.
func refuseNew(oldDialed, newDialed, lowerDials, oldSilent bool) bool {
	return oldDialed != newDialed && oldDialed == lowerDials && !oldSilent
}

// silent says whether nothing has arrived on l for a dead interval: its
// neighbour is gone or cannot reach it (a path that drops rather than
// resets keeps a TCP connection open for minutes), and a new link from the
// same neighbour replaces it whichever side dialled. Without this a link
// cut silently and healed stayed down until TCP gave up on the old
// connection, the neighbour's every redial refused as a duplicate (5.2 s in
// the 42-site lab; docs/results/experiments/scale).
func (b *Broker) silent(l *transport.Link) bool {
	last := l.LastReceived()
	return last != 0 && l.Now()-last > int64(b.node.cfg.LinkState.DeadInterval)
}

// link returns the current link to a neighbour, or nil.
func (b *Broker) link(peer uint32) *transport.Link {
	b.linksMu.Lock()
	defer b.linksMu.Unlock()
	return b.links[peer]
}

// dialLoop keeps a link to one configured neighbour, redialling with
// jittered exponential backoff whenever it is down.
func (b *Broker) dialLoop(ctx context.Context, p Peer) {
	n := b.node
	backoff := n.cfg.DialBackoffMin
	failures := 0
	for ctx.Err() == nil {
		if l := b.link(p.ID); l != nil {
			select {
			case <-l.Done():
			case <-ctx.Done():
				return
			}
			continue
		}
		dctx, cancel := context.WithTimeout(ctx, n.cfg.DialTimeout)
		c, err := b.o.dialer.Dial(dctx, p.Addr, b.open)
		cancel()
		if err == nil {
			if c.Remote().RouterId != p.ID {
				err = fmt.Errorf("peer at %s is router %d (%s), configured as router %d", p.Addr, c.Remote().RouterId, c.Remote().RouterName, p.ID)
				c.Close(err)
			} else if _, err = b.attach(c, true); err != nil {
				c.Close(err)
			}
		}
		if err == nil {
			backoff, failures = n.cfg.DialBackoffMin, 0
			continue
		}
		if ctx.Err() != nil {
			return
		}
		failures++
		if reason, ok := transport.IsIncompatible(err); ok {
			n.m.linkHandshakeFails.WithLabelValues(reason).Inc()
			n.log.Warn("peer refused or incompatible", zap.String("addr", p.Addr), zap.Error(err))
		} else if failures == 1 || failures%20 == 0 {
			// The first failure and then every twentieth: a neighbour that
			// is down for long must not flood the log.
			n.log.Info("cannot reach peer, retrying", zap.String("addr", p.Addr), zap.Int("attempts", failures), zap.Error(err))
		}
		sleep := backoff/2 + rand.N(backoff/2+1)
		select {
		case <-b.clock.After(sleep):
		case <-ctx.Done():
			return
		}
		backoff = min(2*backoff, n.cfg.DialBackoffMax)
	}
}
