package node

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"golang.org/x/time/rate"
	"k8s.io/utils/clock"

	"github.com/dripmesh/drip/internal/content"
	"github.com/dripmesh/drip/internal/dedup"
	"github.com/dripmesh/drip/internal/drp"
	"github.com/dripmesh/drip/internal/encoding"
	"github.com/dripmesh/drip/internal/linkstate"
	"github.com/dripmesh/drip/internal/qos"
)

// Node is one broker's logic with no goroutine, socket or timer of its own:
// the routing protocol, the PREDICATES table, local subscriptions, B-DRP
// forwarding, duplicate suppression and the phases of leaving the mesh. Its
// driver feeds it link events, control messages and clock ticks;
// broker.Broker is the production driver, and internal/broker/brokertest
// runs whole meshes of Nodes in virtual time.
//
// Control-plane methods (LinkUp, LinkDown, Control, Tick, Flush,
// InstallIndex, Stop, Joined, Inspect) must be called by one goroutine at a
// time. The data plane (Forwarder, Subscribe and the Subscription methods)
// is safe for concurrent use and reads only snapshots the control plane
// publishes.
type Node struct {
	cfg   Config
	log   *zap.Logger
	m     *metrics
	clock clock.WithTicker
	start time.Time
	// budget bounds the bytes of every subscriber and link queue.
	budget *Budget
	// epoch and seq stamp every accepted message (docs/design.md §10).
	epoch uint64
	seq   atomic.Uint64

	// Control plane, owned by the driver's single caller.
	ls           *linkstate.Node
	table        *encoding.Table
	current      map[uint32]Link // the link the protocol knows per neighbour
	predsDirty   bool            // the table changed since the last build was planned
	predsChanged int             // PREDICATES updates since the last build was planned (logged with it)
	// builder runs the builds of the PREDICATES index (nil: on the
	// caller's goroutine, at once); building is the one in flight, planned
	// at lastBuild, with the updates it takes in and the QoS classes it
	// publishes (nil: unchanged).
	builder         IndexBuilder
	building        *encoding.Build
	buildingChanged int
	buildingQoS     *qos.Table
	lastBuild       time.Time
	lastBuildTook   time.Duration // from plan to install, on the node's clock (rebuildPacing)
	lastFullTook    time.Duration // of the last full build (compactAfter)
	lastAd          time.Time
	lastRTTExport   time.Time
	lastExpire      time.Time
	withdrawn       bool
	// The drain (lifecycle.go): where it stands, when it began, when the
	// node withdrew, and when the current phase ends at the latest.
	phase                             Phase
	drainStart, withdrawnAt, phaseEnd time.Time
	// The newest sequence number of each neighbour's LSA the node has
	// acted on for its link, from when the link came up: a newer withdrawn
	// one says the neighbour is leaving now (finishLeavers).
	heldSeq map[uint32]uint64
	// refusedLogged is when a refusal of a neighbour's advertisement was
	// last logged, per neighbour and reason: a forger sending thousands
	// gets one line per refusedLogInterval, the counter counts them all.
	refusedLogged map[refusal]time.Time
	// An adjacency has been advertised, the node holding the neighbour's
	// database (HasRoutes).
	adjacencyAdvertised bool
	// joined is sticky: the node has joined the mesh (Joined).
	joined bool
	// joinDue says the node has met the condition of joining — linked to
	// every neighbour, or the join timeout; joinGen is predsGen then,
	// which the installed PREDICATES index must reach before the node has
	// joined (Joined).
	joinDue bool
	joinGen uint64
	// predsGen counts the PREDICATES updates applied to the table;
	// buildingGen is its value when the build in flight was planned, and
	// indexGen the value the installed index covers.
	predsGen, buildingGen, indexGen uint64
	// matchAll applies the match-all policy to other routers' filters.
	matchAll *matchAll
	// noRouteLog lets the data plane log a few destinations it dropped
	// for want of a route, not every one.
	noRouteLog *rate.Sometimes
	// refusedLog does the same for bundles a link refused (Forwarder.logRefused).
	refusedLog *rate.Sometimes
	// orphanLog does the same for bundles that reach this broker while it
	// drains and that no local subscriber takes: messages for subscribers
	// that moved away, which a publisher's broker still routed here.
	orphanLog *rate.Sometimes
	// refusedBundleLog logs a few of the bundles refused for where they
	// came from (admitSource); unverified holds those waiting for the
	// routes to confirm it.
	refusedBundleLog *rate.Sometimes
	unverified       unverifiedHold
	// coarsenLog logs a few of the times the node's own advertisement
	// was coarsened to fit (withinLimit).
	coarsenLog *rate.Sometimes
	// sent remembers this broker's latest messages sent to others, which
	// it takes back when they return (own.go).
	sent *sentMessages
	// bounces holds bundles whose routes lead back where they came from
	// (bounce.go); bounceLog logs a few of them.
	bounces   bounceHold
	bounceLog *rate.Sometimes
	// replays holds what links that became suspect had sent last, to be
	// sent again around them (replay.go).
	replays replayHold
	// Per router, its QoS classes (docs/design.md §11), and whether the
	// data plane's qos.Table is behind them.
	classes      map[uint32][]linkstate.QoSClass
	classesDirty bool
	lastBudgets  time.Time

	// Data plane snapshots, replaced whole by the control plane.
	routes atomic.Pointer[linkstate.Table]
	// retired are the routes replaced within the last retiredRoutesFor,
	// which bundles sent while the change floods may still follow
	// (admitSource).
	retired atomic.Pointer[[]retiredRoutes]
	preds   atomic.Pointer[encoding.Snapshot]
	qos     atomic.Pointer[qos.Table]
	links   atomic.Pointer[map[uint32]Link]
	// budgets collects, per neighbour, the least delay budget of the
	// deadline bundles the data plane sent it since the control plane
	// last looked (SetDelayBudget, reactive rerouting).
	budgets delayBudgets

	subs      *subscriptionTable
	dups      *dedup.Filter
	adPending atomic.Bool   // local subscriptions changed since the last advertisement
	wake      func()        // tells the driver a Flush is due; may be nil
	drain     chan struct{} // closed by Stop
	draining  atomic.Bool
}

// Option customises a Node.
type Option func(*options)

type options struct {
	log   *zap.Logger
	reg   prometheus.Registerer
	clock clock.WithTicker
	auth  linkstate.Authenticator
}

// WithLogger sets the logger (default: a no-op logger).
func WithLogger(l *zap.Logger) Option { return func(o *options) { o.log = l } }

// WithRegisterer sets where metrics are registered (default: nowhere).
func WithRegisterer(r prometheus.Registerer) Option { return func(o *options) { o.reg = r } }

// WithClock sets the clock every time of the node is read from (default:
// the real one); a harness passes a fake clock to run in virtual time.
func WithClock(c clock.WithTicker) Option { return func(o *options) { o.clock = c } }

// WithAuthenticator signs the advertisements the node originates and
// checks every received one before it is installed (linkstate.Config.Auth).
func WithAuthenticator(a linkstate.Authenticator) Option { return func(o *options) { o.auth = a } }

// New validates cfg and returns a node that knows only itself.
func New(cfg Config, opts ...Option) (*Node, error) {
	o := options{log: zap.NewNop(), clock: clock.RealClock{}}
	for _, opt := range opts {
		opt(&o)
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("broker %q: %w", cfg.Name, err)
	}
	now := o.clock.Now()
	// The boot epoch is the incarnation the link-state database tells
	// every router, in nanoseconds (admitSource).
	inc := max(now.UnixNano()/int64(linkstate.IncarnationUnit), 1)
	// The queues get half the budget: the rest is for everything else the
	// broker holds and for the collector's headroom (docs/design.md §14).
	queues := &Budget{limit: int64(cfg.MemoryBudget) / 2}
	lsCfg := cfg.linkStateConfig()
	lsCfg.Auth, lsCfg.Incarnation = o.auth, uint64(inc)
	if lsCfg.MaxDatabaseFilters == 0 {
		lsCfg.MaxDatabaseFilters = maxTableFilters(queues.limit)
	}
	ls, err := linkstate.New(lsCfg)
	if err != nil {
		return nil, fmt.Errorf("broker %q: %w", cfg.Name, err)
	}
	dups, err := dedup.New(cfg.Dedup)
	if err != nil {
		return nil, fmt.Errorf("broker %q: %w", cfg.Name, err)
	}
	n := &Node{
		cfg:              cfg,
		log:              o.log.With(zap.String("broker", cfg.Name), zap.Uint32("router", cfg.ID)),
		m:                newMetrics(o.reg, cfg.Name, queues),
		budget:           queues,
		clock:            o.clock,
		start:            now,
		epoch:            uint64(inc) * uint64(linkstate.IncarnationUnit),
		ls:               ls,
		table:            encoding.NewTable(cfg.Encoding),
		current:          map[uint32]Link{},
		heldSeq:          map[uint32]uint64{},
		refusedLogged:    map[refusal]time.Time{},
		noRouteLog:       &rate.Sometimes{First: 5, Interval: 10 * time.Second},
		orphanLog:        &rate.Sometimes{First: 5, Interval: 10 * time.Second},
		refusedLog:       &rate.Sometimes{First: 5, Interval: 10 * time.Second},
		bounceLog:        &rate.Sometimes{First: 5, Interval: 10 * time.Second},
		refusedBundleLog: &rate.Sometimes{First: 5, Interval: time.Minute},
		coarsenLog:       &rate.Sometimes{First: 1, Interval: time.Minute},
		classes:          map[uint32][]linkstate.QoSClass{},
		dups:             dups,
		sent:             newSentMessages(cfg.ID),
		drain:            make(chan struct{}),
	}
	n.matchAll = newMatchAll(cfg.MatchAll, cfg.ID, n.log, n.m)
	n.subs = newSubscriptions(subscriptionsConfig{
		max: cfg.MaxSubscriptions, queue: cfg.SubscriberQueue, queueBytes: cfg.SubscriberQueueBytes,
		enc: cfg.Encoding, broker: cfg.Name, slow: cfg.SlowSubscribers,
		clock: o.clock, start: now, budget: queues,
	}, n.m, n.subscriptionsChanged)
	n.routes.Store(ls.Routes())
	n.preds.Store(n.table.Snapshot())
	n.qos.Store(qos.NewTable(nil))
	n.links.Store(&map[uint32]Link{})
	return n, nil
}

// Budget is the node's memory budget: what its subscriber queues hold, and
// what the driver's link queues and client streams hold, which the driver
// accounts to it.
func (n *Node) Budget() *Budget { return n.budget }

// Config returns the node's configuration.
func (n *Node) Config() Config { return n.cfg }

// Log is the node's logger, which names the broker and its router.
func (n *Node) Log() *zap.Logger { return n.log }

// Epoch is the node's boot epoch, part of every stamp it gives.
func (n *Node) Epoch() uint64 { return n.epoch }

// IndexBuilder runs the builds of a Node's PREDICATES index
// (encoding.Build.Run) away from its control plane, which meanwhile goes
// on processing hellos and advertisements: a build takes tens of
// milliseconds at hundreds of routers, and seconds on a broker short of
// CPU, longer than the dead interval. Broker runs each on a goroutine of
// its own; a virtual-time harness may run it where and when it pleases.
type IndexBuilder interface {
	// Start has b run, then handed back to the node: its driver calls
	// Node.InstallIndex(b) from the goroutine that drives the node's
	// control plane. Start must not block, nor call into the node.
	Start(b *encoding.Build)
}

// SetIndexBuilder installs what runs the node's PREDICATES index builds.
// Without one, each build runs inside the control-plane call that plans
// it. Call it before the node is used.
func (n *Node) SetIndexBuilder(b IndexBuilder) { n.builder = b }

// SetWake installs the function the node calls when local subscriptions
// change and a Flush should follow soon (the advertisement may be due). It
// must not block. Call it before the node is used.
func (n *Node) SetWake(f func()) { n.wake = f }

func (n *Node) now() time.Duration { return n.clock.Since(n.start) }

// Subscribe installs a local subscription (Carzaniga09 §2.2's
// LOCAL-PREDICATES) with what it asks of delivery: a deadline, two paths
// (docs/design.md §11), or nothing (the zero Flow). It fails with
// ErrDraining or ErrStopped once the node leaves, a *LimitError at
// MaxSubscriptions, and an *InvalidError for a predicate or deadline out of
// range.
func (n *Node) Subscribe(p content.Predicate, f qos.Flow, client string) (*Subscription, error) {
	return n.subs.add(p, f, client)
}

// Subscriptions counts the local subscriptions.
func (n *Node) Subscriptions() int { return n.subs.count() }

var _ drp.Routing = (*linkstate.Table)(nil)

func (n *Node) subscriptionsChanged() {
	if !n.adPending.Swap(true) {
		n.m.adPending.Set(1)
	}
	if n.wake != nil {
		n.wake()
	}
}

// refusal keys the log rate limit of refused advertisements.
type refusal struct {
	peer   uint32
	reason string
}

// refusedLogInterval is how often refusals of one reason from one
// neighbour are logged.
const refusedLogInterval = time.Minute
