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

	dripv1 "github.com/dripmesh/drip/api/proto/drip/v1"
	"github.com/dripmesh/drip/internal/drp"
	"github.com/dripmesh/drip/internal/encoding"
	"github.com/dripmesh/drip/internal/linkstate"
	"github.com/dripmesh/drip/internal/transport"
)

// Option customises a Broker.
type Option func(*Broker)

// WithLogger sets the logger (default: a no-op logger).
func WithLogger(l *zap.Logger) Option { return func(b *Broker) { b.log = l } }

// WithRegisterer sets where metrics are registered (default: nowhere).
func WithRegisterer(r prometheus.Registerer) Option { return func(b *Broker) { b.reg = r } }

// WithDialer sets how neighbours are dialled (default: plaintext gRPC).
func WithDialer(d transport.Dialer) Option { return func(b *Broker) { b.dialer = d } }

// Broker is one drip broker. Create it with New, serve its services
// (ClientService, PeerService or HandleLink), and Run it until shutdown.
type Broker struct {
	cfg    Config
	log    *zap.Logger
	reg    prometheus.Registerer
	m      *metrics
	dialer transport.Dialer
	open   *dripv1.Open
	start  time.Time

	// Owned by the core goroutine.
	node    *linkstate.Node
	table   *encoding.Table
	current map[uint32]*peerLink // the link the node knows for each peer
	// The encoded-predicate index is rebuilt whole (tens of ms at 1000
	// routers × 100 filters), so updates are batched: at most one rebuild
	// per PredicateRebuildInterval.
	predsDirty    bool
	lastBuild     time.Time
	adPending     bool      // subscriptions changed since the last advertisement
	lastAd        time.Time // when the last advertisement was originated
	lastRTTExport time.Time

	events    chan coreEvent
	advertise chan struct{} // coalesced "local predicate changed"

	// Snapshots the data plane reads.
	routes atomic.Pointer[linkstate.Table]
	preds  atomic.Pointer[encoding.Snapshot]

	linksMu sync.RWMutex
	links   map[uint32]*peerLink

	subs *subscriptions

	stopping  atomic.Bool
	stopped   chan struct{} // closed when Run has finished shutting down
	running   atomic.Bool
	linkGroup sync.WaitGroup // link goroutines
}

// New validates cfg and returns a broker that is not running yet.
func New(cfg Config, opts ...Option) (*Broker, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("broker %q: %w", cfg.Name, err)
	}
	b := &Broker{
		cfg:       cfg,
		log:       zap.NewNop(),
		dialer:    transport.GRPCDialer{},
		start:     time.Now(),
		current:   map[uint32]*peerLink{},
		events:    make(chan coreEvent, 1024),
		advertise: make(chan struct{}, 1),
		links:     map[uint32]*peerLink{},
		stopped:   make(chan struct{}),
	}
	for _, o := range opts {
		o(b)
	}
	b.log = b.log.With(zap.String("broker", cfg.Name), zap.Uint32("router", cfg.ID))
	b.m = newMetrics(b.reg, cfg.Name)
	node, err := linkstate.New(cfg.linkStateConfig())
	if err != nil {
		return nil, fmt.Errorf("broker %q: %w", cfg.Name, err)
	}
	b.node = node
	b.table = encoding.NewTable(cfg.Encoding)
	b.routes.Store(node.Routes())
	b.preds.Store(b.table.Snapshot())
	b.subs = newSubscriptions(b)
	b.open = &dripv1.Open{
		ProtocolVersion: transport.ProtocolVersion,
		RouterId:        cfg.ID,
		RouterName:      cfg.Name,
		Mesh:            cfg.Mesh,
		BloomBits:       uint32(cfg.Encoding.M),
		BloomHashes:     uint32(cfg.Encoding.K),
	}
	if cfg.PeerCompression {
		b.open.Compression = []string{transport.CompressionDeflate}
	}
	return b, nil
}

// Open is how this broker introduces itself on peer links.
func (b *Broker) Open() *dripv1.Open { return b.open }

// Config returns the broker's configuration.
func (b *Broker) Config() Config { return b.cfg }

func (b *Broker) now() time.Duration { return time.Since(b.start) }

// coreEvent is an input for the core goroutine.
type coreEvent struct {
	kind  eventKind
	link  *peerLink
	msgs  []linkstate.Message
	reply chan<- any
}

type eventKind uint8

const (
	evLinkUp eventKind = iota + 1
	evLinkDown
	evControl
	evInspect // reply with an Inspection (tests, debugging)
)

// Run drives the broker until ctx ends, then shuts down gracefully:
// it withdraws the broker from the mesh, drains the link queues for at most
// DrainTimeout, ends every subscription and closes every link. It returns
// once all of the broker's goroutines have stopped.
func (b *Broker) Run(ctx context.Context) error {
	if !b.running.CompareAndSwap(false, true) {
		return errors.New("broker is already running")
	}
	b.log.Info("broker starting", zap.String("mesh", b.cfg.Mesh), zap.Int("peers", len(b.cfg.Peers)),
		zap.Int("bloom_bits", b.cfg.Encoding.M), zap.Int("bloom_hashes", b.cfg.Encoding.K))
	dialCtx, stopDialing := context.WithCancel(ctx)
	var dialers sync.WaitGroup
	for _, p := range b.cfg.Peers {
		dialers.Add(1)
		go func() {
			defer dialers.Done()
			b.dialLoop(dialCtx, p)
		}()
	}

	ticker := time.NewTicker(b.cfg.TickInterval)
	defer ticker.Stop()
	b.node.Tick(b.now())
	b.processReady()
	for running := true; running; {
		select {
		case <-ctx.Done():
			running = false
		case <-ticker.C:
			b.node.Tick(b.now())
			b.observeNeighbors()
		case ev := <-b.events:
			b.handle(ev)
		case <-b.advertise:
			b.adPending = true
			b.m.adPending.Set(1)
		}
		if b.adPending && time.Since(b.lastAd) >= b.cfg.AdvertiseInterval {
			b.adPending, b.lastAd = false, time.Now()
			b.m.adPending.Set(0)
			b.setLocalPredicate()
		}
		b.processReady()
	}

	stopDialing()
	dialers.Wait()
	b.shutdown()
	return nil
}

func (b *Broker) handle(ev coreEvent) {
	now := b.now()
	switch ev.kind {
	case evLinkUp:
		if old := b.current[ev.link.peer]; old != nil {
			b.node.LinkDown(old.peer, now)
		}
		b.current[ev.link.peer] = ev.link
		if err := b.node.LinkUp(ev.link.peer, ev.link.weight, now); err != nil {
			b.log.Warn("link-state refused link", zap.String("peer", ev.link.name), zap.Error(err))
		}
	case evLinkDown:
		if b.current[ev.link.peer] == ev.link {
			delete(b.current, ev.link.peer)
			b.node.LinkDown(ev.link.peer, now)
		}
	case evControl:
		if b.current[ev.link.peer] != ev.link {
			return // from a link already replaced: stale
		}
		for _, msg := range ev.msgs {
			if err := b.node.Step(ev.link.peer, msg, now); err != nil {
				b.log.Debug("control message ignored", zap.String("peer", ev.link.name), zap.Error(err))
			}
		}
	case evInspect:
		ev.reply <- b.inspect()
	}
}

// processReady carries out what the link-state core asks for.
func (b *Broker) processReady() {
	for b.node.HasReady() {
		rd := b.node.Ready()
		b.sendControl(rd.Messages)
		if rd.RoutesChanged {
			t := b.node.Routes()
			b.routes.Store(t)
			b.m.routersKnown.Set(float64(t.Known()))
		}
		for _, u := range rd.PredicateUpdates {
			if u.Removed {
				b.table.Remove(u.Router)
			} else {
				b.table.Set(u.Router, u.Filters)
			}
			b.predsDirty = true
		}
		for _, ev := range rd.Events {
			b.observe(ev)
		}
		b.m.lsdbEntries.Set(float64(b.node.LSDBSize()))
		// 48 bits survive the float64 exactly.
		b.m.lsdbDigest.Set(float64(b.node.Digest() & (1<<48 - 1)))
		b.node.Advance()
	}
	if b.predsDirty && time.Since(b.lastBuild) >= b.cfg.PredicateRebuildInterval {
		b.preds.Store(b.table.Snapshot())
		b.predsDirty, b.lastBuild = false, time.Now()
	}
}

func (b *Broker) sendControl(envs []linkstate.Envelope) {
	// Floods send one message to many neighbours: convert each once.
	converted := make(map[linkstate.Message]*dripv1.Control, len(envs))
	for _, env := range envs {
		c, ok := converted[env.Msg]
		if !ok {
			var err error
			if c, err = controlToProto(env.Msg); err != nil {
				b.log.Error("cannot encode control message", zap.Error(err))
				continue
			}
			converted[env.Msg] = c
		}
		if l := b.current[env.To]; l != nil {
			l.queue.PushControl(c)
			l.m.sentControl.Inc()
		}
	}
}

func (b *Broker) observe(ev linkstate.Event) {
	b.m.protocolEvents.WithLabelValues(ev.Type.String()).Inc()
	name := b.peerName(ev.Peer)
	switch ev.Type {
	case linkstate.EventSPF:
		b.m.spfRuns.Inc()
		b.m.routersKnown.Set(float64(ev.Routers))
	case linkstate.EventAdjacencyUp:
		b.log.Info("adjacency up", zap.String("peer", name), zap.Uint32("cost", ev.Cost))
		b.m.linkCost.WithLabelValues(name).Set(float64(ev.Cost))
	case linkstate.EventAdjacencyDown:
		b.log.Info("adjacency down", zap.String("peer", name), zap.Stringer("reason", ev.Reason))
	case linkstate.EventCostChanged:
		b.log.Info("link cost changed", zap.String("peer", name), zap.Uint32("from", ev.OldCost), zap.Uint32("to", ev.Cost), zap.Duration("rtt", ev.RTT))
		b.m.linkCost.WithLabelValues(name).Set(float64(ev.Cost))
	case linkstate.EventVersionMismatch, linkstate.EventParamsMismatch:
		b.log.Warn("peer incompatible", zap.Stringer("event", ev.Type), zap.String("peer", name), zap.Uint64("seq", ev.Seq))
	default:
		b.log.Debug("link-state event", zap.Stringer("event", ev.Type), zap.String("peer", name))
	}
}

// observeNeighbors exports each neighbour's smoothed RTT, which hellos
// refresh every HelloInterval whatever the cost mode, at most once a
// second.
func (b *Broker) observeNeighbors() {
	if time.Since(b.lastRTTExport) < time.Second {
		return
	}
	b.lastRTTExport = time.Now()
	for _, nb := range b.node.Neighbors() {
		if l := b.current[nb.ID]; l != nil && nb.Samples > 0 {
			b.m.linkRTT.WithLabelValues(l.name).Set(nb.RTT.Seconds())
		}
	}
}

func (b *Broker) peerName(id uint32) string {
	if l := b.current[id]; l != nil {
		return l.name
	}
	return fmt.Sprint(id)
}

// setLocalPredicate advertises the encoded filters of all local
// subscriptions, deduplicated and with covered filters removed (docs/design.md §2).
func (b *Broker) setLocalPredicate() {
	filters := encoding.Advertise(b.subs.encodedFilters())
	b.m.advertised.Set(float64(len(filters)))
	b.m.advertisements.Inc()
	if err := b.node.SetLocalPredicate(filters); err != nil {
		b.log.Error("cannot advertise local predicate", zap.Error(err))
	}
}

// subscriptionsChanged asks the core goroutine to re-advertise.
func (b *Broker) subscriptionsChanged() {
	select {
	case b.advertise <- struct{}{}:
	default:
	}
}

// shutdown withdraws from the mesh and stops everything Run started.
func (b *Broker) shutdown() {
	b.stopping.Store(true)
	b.log.Info("broker shutting down: withdrawing from the mesh")
	b.subs.closeAll()
	b.node.Shutdown()
	b.processReady()

	// Drain: no new data, every writer sends what is queued (the
	// withdrawal included) and stops, then each link is half-closed so the
	// neighbour reads everything up to EOF and closes its side. Closing at
	// once would cancel the streams and lose what they still buffer.
	b.linksMu.Lock()
	links := make([]*peerLink, 0, len(b.links))
	for _, l := range b.links {
		links = append(links, l)
	}
	b.linksMu.Unlock()
	drain, stop := context.WithTimeout(context.Background(), b.cfg.DrainTimeout)
	defer stop()
	for _, l := range links {
		l.queue.Close()
	}
	for _, l := range links {
		select {
		case <-l.writerDone:
			_ = l.conn.CloseSend()
		case <-drain.Done():
		}
	}
	for _, l := range links {
		select {
		case <-l.conn.Done():
		case <-drain.Done():
		}
		l.close(errors.New("broker shut down"))
	}
	b.linkGroup.Wait()
	close(b.stopped)
	b.log.Info("broker stopped")
}

// Forwarding state for tests and debugging.

// Inspection is a consistent view of the broker's routing state.
type Inspection struct {
	Routers    []uint32          // reachable, self included
	NextHops   map[uint32]uint32 // destination → neighbour
	Predicates map[uint32]int    // router → advertised filters
	Links      map[uint32]string // neighbour ID → name of links that are up
	LSDB       int               // entries
	Neighbors  []linkstate.NeighborInfo
}

// Inspect returns the broker's routing state, taken on the core goroutine.
// It fails if the broker is not running.
func (b *Broker) Inspect(ctx context.Context) (Inspection, error) {
	reply := make(chan any, 1)
	select {
	case b.events <- coreEvent{kind: evInspect, reply: reply}:
	case <-ctx.Done():
		return Inspection{}, ctx.Err()
	case <-b.stopped:
		return Inspection{}, errors.New("broker stopped")
	}
	select {
	case r := <-reply:
		return r.(Inspection), nil
	case <-ctx.Done():
		return Inspection{}, ctx.Err()
	}
}

func (b *Broker) inspect() Inspection {
	t := b.node.Routes()
	in := Inspection{
		Routers:    t.Routers(),
		NextHops:   map[uint32]uint32{},
		Predicates: map[uint32]int{},
		Links:      map[uint32]string{},
		LSDB:       b.node.LSDBSize(),
		Neighbors:  b.node.Neighbors(),
	}
	for _, r := range in.Routers {
		if nh, ok := t.NextHop(r); ok {
			in.NextHops[r] = nh
		}
	}
	// The data plane's view, which may trail the protocol's by up to
	// PredicateRebuildInterval.
	snap := b.preds.Load()
	for _, r := range snap.Routers() {
		f, _ := snap.Filters(r)
		in.Predicates[r] = len(f)
	}
	for id, l := range b.current {
		in.Links[id] = l.name
	}
	return in
}

var _ drp.Routing = (*linkstate.Table)(nil)

// HandshakeFailures returns the counter of refused links for a reason
// (tests and diagnostics).
func (b *Broker) HandshakeFailures(reason string) prometheus.Counter {
	return b.m.linkHandshakeFails.WithLabelValues(reason)
}

// PublishedCounter is the counter of messages accepted from local
// publishers (tests and diagnostics).
func (b *Broker) PublishedCounter() prometheus.Counter { return b.m.published }
