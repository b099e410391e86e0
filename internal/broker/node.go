package broker

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"golang.org/x/time/rate"
	"google.golang.org/grpc/mem"
	"k8s.io/utils/clock"

	dripv1 "github.com/dripmesh/drip/api/proto/drip/v1"
	"github.com/dripmesh/drip/internal/content"
	"github.com/dripmesh/drip/internal/dedup"
	"github.com/dripmesh/drip/internal/drp"
	"github.com/dripmesh/drip/internal/encoding"
	"github.com/dripmesh/drip/internal/linkstate"
	"github.com/dripmesh/drip/internal/qos"
	"github.com/dripmesh/drip/internal/transport"
	"google.golang.org/protobuf/proto"
)

// Link is what a Node sends through: an established link to a neighbour.
// transport.Link implements it; virtual-time harnesses pass their own.
type Link interface {
	Peer() uint32
	Name() string
	// PushControl queues a control message; it is never dropped.
	PushControl(*dripv1.Control)
	// PushBundle queues a bundle in its wire form and reports whether it
	// was queued; the link counts what it refuses.
	PushBundle(b []byte) bool
	// PushUrgent is PushBundle for a bundle with a deadline: it leaves as
	// its urgency says, and its budget is set as it leaves.
	PushUrgent(b []byte, u transport.Urgency) bool
	// Now reads the link's clock, the clock of transport.Urgency.
	Now() int64
	// SetOneWay tells the link the neighbour's one-way delay, which the
	// budgets of leaving bundles are reduced by.
	SetOneWay(time.Duration)
}

// Node is one broker's logic with no goroutine, socket or timer of its own:
// the routing protocol, the PREDICATES table, local subscriptions, B-DRP
// forwarding and duplicate suppression. Its driver feeds it link events,
// control messages and time; Broker is the production driver, and
// internal/broker/brokertest runs whole meshes of Nodes in virtual time.
//
// Control-plane methods (LinkUp, LinkDown, Control, Tick, Flush, Withdraw,
// Inspect) must be called by one goroutine at a time. The data plane
// (Forwarder, Subscribe and the Subscription methods) is safe for
// concurrent use and reads only snapshots the control plane publishes.
type Node struct {
	cfg   Config
	log   *zap.Logger
	m     *metrics
	clock clock.PassiveClock
	start time.Time
	// budget bounds the bytes of every subscriber and link queue.
	budget *budget
	// sends counts what client connections hold for Subscribe streams
	// against the budget (for listeners ClientListener wraps).
	sends *connMeter
	// sendBuffers recycles the buffers deliveries are encoded into for
	// Subscribe streams (deliverySender.buffer).
	sendBuffers mem.BufferPool
	// epoch and seq stamp every accepted message (docs/design.md §10).
	epoch uint64
	seq   atomic.Uint64

	// Control plane, owned by the driver's single caller.
	ls      *linkstate.Node
	table   *encoding.Table
	current map[uint32]Link // the link the protocol knows per neighbour
	// adEnc is what each neighbour's current link has been sent, the base
	// of the next advertisement as a delta; none for a link that does not
	// take deltas (deltaLink).
	adEnc        map[uint32]*transport.AdEncoder
	predsDirty   bool // the table changed since the last build was planned
	predsChanged int  // PREDICATES updates since the last build was planned (logged with it)
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
	// Per other router, its advertised filters that match every message.
	matchAll      map[uint32]int
	matchAllTotal int
	// Per router whose match-all filters are limited or refused, its
	// limiter; matchAllSnap is the data plane's copy.
	matchAllLimiters map[uint32]*rate.Limiter
	// noRouteLog lets the data plane log a few destinations it dropped
	// for want of a route, not every one.
	noRouteLog *rate.Sometimes
	// refusedLog does the same for bundles a link refused (Forwarder.logRefused).
	refusedLog *rate.Sometimes
	// orphanLog does the same for bundles that reach this broker while it
	// drains and that no local subscriber takes: messages for subscribers
	// that moved away, which a publisher's broker still routed here.
	orphanLog *rate.Sometimes
	// bounces holds bundles whose routes lead back where they came from
	// (bounce.go); bounceLog logs a few of them.
	bounces   bounceHold
	bounceLog *rate.Sometimes
	// Per router, its QoS classes (docs/design.md §11), and whether the
	// data plane's qos.Table is behind them.
	classes      map[uint32][]linkstate.QoSClass
	classesDirty bool
	lastBudgets  time.Time

	// Data plane snapshots, replaced whole by the control plane.
	routes atomic.Pointer[linkstate.Table]
	preds  atomic.Pointer[encoding.Snapshot]
	qos    atomic.Pointer[qos.Table]
	// matchAllSnap is nil until a router is limited or refused.
	matchAllSnap atomic.Pointer[matchAllRouters]
	links        atomic.Pointer[map[uint32]Link]
	// budgets collects, per neighbour, the least delay budget of the
	// deadline bundles the data plane sent it since the control plane
	// last looked (SetDelayBudget, reactive rerouting).
	budgets delayBudgets

	subs      *subscriptions
	dups      *dedup.Filter
	adPending atomic.Bool   // local subscriptions changed since the last advertisement
	wake      func()        // tells the driver a Flush is due; may be nil
	drain     chan struct{} // closed by BeginDrain
	draining  atomic.Bool
}

// NewNode validates cfg and returns a node that knows only itself. Of the
// options, WithLogger, WithRegisterer and WithClock apply.
func NewNode(cfg Config, opts ...Option) (*Node, error) {
	o := defaults()
	for _, opt := range opts {
		opt(&o)
	}
	return newNode(cfg, o)
}

func newNode(cfg Config, o options) (*Node, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("broker %q: %w", cfg.Name, err)
	}
	lsCfg := cfg.linkStateConfig()
	lsCfg.Auth = o.auth
	ls, err := linkstate.New(lsCfg)
	if err != nil {
		return nil, fmt.Errorf("broker %q: %w", cfg.Name, err)
	}
	dups, err := dedup.New(cfg.Dedup)
	if err != nil {
		return nil, fmt.Errorf("broker %q: %w", cfg.Name, err)
	}
	now := o.clock.Now()
	// The queues get half the budget: the rest is for everything else the
	// broker holds and for the collector's headroom (docs/design.md §14).
	queues := &budget{limit: int64(cfg.MemoryBudget) / 2}
	n := &Node{
		cfg:              cfg,
		log:              o.log.With(zap.String("broker", cfg.Name), zap.Uint32("router", cfg.ID)),
		m:                newMetrics(o.reg, cfg.Name, queues),
		budget:           queues,
		sends:            newConnMeter(queues),
		sendBuffers:      newSendBuffers(),
		clock:            o.clock,
		start:            now,
		epoch:            uint64(now.UnixNano()),
		ls:               ls,
		table:            encoding.NewTable(cfg.Encoding),
		current:          map[uint32]Link{},
		adEnc:            map[uint32]*transport.AdEncoder{},
		heldSeq:          map[uint32]uint64{},
		refusedLogged:    map[refusal]time.Time{},
		matchAll:         map[uint32]int{},
		matchAllLimiters: map[uint32]*rate.Limiter{},
		noRouteLog:       &rate.Sometimes{First: 5, Interval: 10 * time.Second},
		orphanLog:        &rate.Sometimes{First: 5, Interval: 10 * time.Second},
		refusedLog:       &rate.Sometimes{First: 5, Interval: 10 * time.Second},
		bounceLog:        &rate.Sometimes{First: 5, Interval: 10 * time.Second},
		classes:          map[uint32][]linkstate.QoSClass{},
		dups:             dups,
		drain:            make(chan struct{}),
	}
	n.subs = newSubscriptions(subscriptionsConfig{
		max: cfg.MaxSubscriptions, queue: cfg.SubscriberQueue, queueBytes: cfg.SubscriberQueueBytes,
		enc: cfg.Encoding, broker: cfg.Name, slow: cfg.SlowSubscribers,
		now:    func() int64 { return int64(n.clock.Since(n.start)) },
		budget: queues,
	}, n.m, n.subscriptionsChanged)
	n.routes.Store(ls.Routes())
	n.preds.Store(n.table.Snapshot())
	n.qos.Store(qos.NewTable(nil))
	n.links.Store(&map[uint32]Link{})
	return n, nil
}

// LinkAccount is what the node's link queues report their bytes to
// (transport.LinkConfig.Account): the broker's memory budget.
func (n *Node) LinkAccount() func(delta int64) { return n.budget.account }

// MemoryUsed is the bytes the node's subscriber and link queues hold,
// counted against Config.MemoryBudget.
func (n *Node) MemoryUsed() int64 { return n.budget.Used() }

// Config returns the node's configuration.
func (n *Node) Config() Config { return n.cfg }

// Epoch is the node's boot epoch, part of every stamp it gives.
func (n *Node) Epoch() uint64 { return n.epoch }

// IndexBuilder runs the builds of a Node's PREDICATES index
// (encoding.Build.Run) away from its control plane, which meanwhile goes
// on processing hellos and advertisements: a build takes tens of
// milliseconds, and seconds on a broker short of CPU, longer than the dead
// interval (docs/results/experiments/scale). Broker runs each on a
// goroutine of its own; a virtual-time harness may run it where and when
// it pleases.
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

// LinkUp tells the node that l is established. A second link to the same
// neighbour replaces the first.
func (n *Node) LinkUp(l Link, weight uint32) {
	now := n.now()
	peer := l.Peer()
	if old := n.current[peer]; old != nil {
		n.ls.LinkDown(peer, now)
	}
	n.current[peer] = l
	delete(n.adEnc, peer)
	if d, ok := l.(deltaLink); ok && d.SendsPredicateDeltas() {
		n.adEnc[peer] = transport.NewAdEncoder()
	}
	n.heldSeq[peer] = 0
	if lsa, ok := n.ls.LSA(peer); ok {
		n.heldSeq[peer] = lsa.Seq
	}
	n.publishLinks()
	if !n.withdrawn {
		if err := n.ls.LinkUp(peer, weight, now); err != nil {
			n.log.Warn("link-state refused link", zap.String("peer", l.Name()), zap.Error(err))
		}
	}
	n.flush()
}

// LinkDown tells the node that l has ended. A link that was already
// replaced is ignored.
func (n *Node) LinkDown(l Link) {
	peer := l.Peer()
	if n.current[peer] != l {
		return
	}
	delete(n.current, peer)
	delete(n.adEnc, peer)
	delete(n.heldSeq, peer)
	for r := range n.refusedLogged {
		if r.peer == peer {
			delete(n.refusedLogged, r)
		}
	}
	n.publishLinks()
	n.ls.LinkDown(peer, n.now())
	n.flush()
}

// publishLinks hands the data plane a fresh copy of the link set.
func (n *Node) publishLinks() {
	m := make(map[uint32]Link, len(n.current))
	for id, l := range n.current {
		m[id] = l
	}
	n.links.Store(&m)
}

// ErrMalformedControl is what DecodeControl's errors wrap.
var ErrMalformedControl = errors.New("malformed control message")

// DecodeControl turns the control messages of one frame from l into the
// protocol's. Drivers call it on the link's reader, so the control plane
// does not spend its time on the copying. A malformed message is an error:
// a peer that sends one is broken, and the driver should close the link
// rather than let it corrupt routing.
//
// d is the link's own decoder, which rebuilds the predicate advertisements
// its neighbour sends as deltas.
func DecodeControl(l Link, d *transport.AdDecoder, cs []*dripv1.Control) ([]linkstate.Message, error) {
	msgs := make([]linkstate.Message, len(cs))
	for i, c := range cs {
		msg, err := d.Decode(c)
		if err != nil {
			return nil, fmt.Errorf("%w from %s: %w", ErrMalformedControl, l.Name(), err)
		}
		msgs[i] = msg
	}
	return msgs, nil
}

// Control processes the control messages of one frame from l, decoded by
// DecodeControl.
func (n *Node) Control(l Link, msgs []linkstate.Message) {
	if n.current[l.Peer()] != l {
		return // from a link already replaced: stale
	}
	now := n.now()
	for _, msg := range msgs {
		if a, ok := msg.(*linkstate.LSA); ok && n.withdrawn && a.Withdrawn && a.Origin == l.Peer() {
			// Both ends are leaving (a whole mesh stopping): neither
			// routes anything new through the other, and neither's
			// protocol installs the other's withdrawal, so each finishes
			// its end here rather than wait out RerouteGrace.
			if f, ok := l.(finisher); ok {
				f.Finish()
			}
		}
		err := n.ls.Step(l.Peer(), msg, now)
		var refused *linkstate.AuthError
		switch {
		case errors.As(err, &refused):
			n.refused(l, refused.Reason, err)
		case err != nil && !errors.Is(err, linkstate.ErrShutdown):
			n.log.Debug("control message ignored", zap.String("peer", l.Name()), zap.Error(err))
		}
	}
	n.flush()
}

// refusal keys the log rate limit of refused advertisements.
type refusal struct {
	peer   uint32
	reason string
}

// refusedLogInterval is how often refusals of one reason from one
// neighbour are logged.
const refusedLogInterval = time.Minute

// refused counts an advertisement the link-state core refused (its
// signature, certificate or identity did not check out, or it had none)
// and logs it once per neighbour, reason and refusedLogInterval.
func (n *Node) refused(l Link, reason string, err error) {
	n.m.adsRefused.WithLabelValues(reason).Inc()
	k, now := refusal{l.Peer(), reason}, n.clock.Now()
	if last, ok := n.refusedLogged[k]; ok && now.Sub(last) < refusedLogInterval {
		return
	}
	n.refusedLogged[k] = now
	n.log.Warn("advertisement refused: a neighbour sent one its origin did not sign (more of this reason from it are counted, not logged, for a minute)",
		zap.String("peer", l.Name()), zap.String("reason", reason), zap.Error(err))
}

// Tick drives the protocol's timers (hellos, dead intervals, refresh,
// aging) and the node's housekeeping. Call it every TickInterval.
func (n *Node) Tick() {
	now := n.now()
	n.heardFrames(now)
	n.ls.Tick(now)
	wall := n.clock.Now()
	if wall.Sub(n.lastBudgets) >= n.cfg.DelayBudgetInterval {
		n.lastBudgets = wall
		n.setDelayBudgets()
	}
	if wall.Sub(n.lastRTTExport) >= time.Second {
		n.lastRTTExport = wall
		n.exportNeighbors()
	}
	if wall.Sub(n.lastExpire) >= time.Minute {
		n.lastExpire = wall
		n.dups.Expire(wall)
		origins, windows, bytes := n.dups.Stats()
		n.m.dedupOrigins.Set(float64(origins))
		n.m.dedupWindows.Set(float64(windows))
		n.m.dedupBytes.Set(float64(bytes))
	}
	n.flush()
}

// receiver is a Link that says when its last frame arrived, on its own
// clock (transport.Link).
type receiver interface {
	LastReceived() int64
}

// heardFrames hands the routing protocol the arrival of each link's last
// frame as evidence that the neighbour is alive (linkstate.Node.Alive). A
// frame is stamped when the link's reader takes it, while the hellos in it
// or after it may still wait in the driver's queue behind other control
// messages, or behind data on the link: on a broker short of CPU, those
// hellos would otherwise arrive after the dead interval and drop a working
// adjacency (docs/design.md §3). Link clocks may differ from the node's,
// so the stamp travels as an age.
func (n *Node) heardFrames(now time.Duration) {
	for peer, l := range n.current {
		r, ok := l.(receiver)
		if !ok {
			continue
		}
		if at := r.LastReceived(); at > 0 {
			age := max(0, time.Duration(l.Now()-at))
			n.ls.Alive(peer, now-age)
		}
	}
}

// rebuildPacing is how many times as long as the last PREDICATES rebuild
// took, from its plan to its install on the node's clock, the next one
// waits at least from the last one's start, beyond PredicateRebuildInterval:
// while advertisements keep changing — a flood of subscriptions, an
// adjacency flapping — rebuilds then take at most a tenth of the broker's
// time. A full rebuild costs about 10 ms at 42 routers × 300 filters, one
// that indexes only the changes a small part of that (encoding.Table.Snapshot);
// on a broker short of CPU either takes far longer on the clock, and the pacing
// backs off with it, instead of spending what CPU there is on indexes that
// the next advertisement makes stale (docs/results/experiments/scale). The
// build itself runs beside the control plane (IndexBuilder), one at a
// time: the pacing bounds the CPU rebuilds take, not how long they hold up
// hellos, which they no longer do.
const rebuildPacing = 10

// Flush does what is due now: a pending advertisement once the advertise
// interval allows it, the protocol's output, a pending rebuild of the
// PREDICATES index. Drivers call it when SetWake's function has run.
func (n *Node) Flush() { n.flush() }

func (n *Node) flush() {
	now := n.clock.Now()
	if !n.withdrawn && n.adPending.Load() && now.Sub(n.lastAd) >= n.cfg.AdvertiseInterval {
		n.adPending.Store(false)
		n.lastAd = now
		n.m.adPending.Set(0)
		n.setLocalPredicate()
	}
	n.processReady()
	switch {
	case n.building != nil:
		// One build at a time: the changes since it was planned wait for
		// the next, once it is installed.
	case n.predsDirty && now.Sub(n.lastBuild) >= max(n.cfg.PredicateRebuildInterval, n.pacing()):
		// Usually re-indexes only the routers whose advertisements changed
		// since the last full build (encoding.Table.Snapshot).
		n.startBuild(now, false)
	case !n.predsDirty && n.preds.Load().Partial() && now.Sub(n.lastBuild) >= max(compactAfter, rebuildPacing*n.lastFullTook):
		// Changes paused: index everything together, which matches faster.
		n.startBuild(now, true)
	}
}

// pacing is how long the next PREDICATES build waits beyond
// PredicateRebuildInterval from the last one's start: rebuildPacing times
// the last one's duration, except while the node waits for an index of the
// database it joined with (Joined). That wait holds its readiness and its
// publishers, and the ten builds' worth of pacing it would add — seconds on
// a broker short of CPU — buys nothing while the node serves nobody.
func (n *Node) pacing() time.Duration {
	if n.joinDue && !n.joined {
		return 0
	}
	return rebuildPacing * n.lastBuildTook
}

// compactAfter is how long the PREDICATES index keeps a partial build
// (encoding.Snapshot.Partial) after the last change before it is built
// whole.
const compactAfter = 2 * time.Second

// startBuild plans a build of the PREDICATES index from the table as it is
// now (cheap: encoding.Table.Plan) and has it run, beside the control
// plane if the node has an IndexBuilder. Matching uses the last snapshot
// until InstallIndex publishes this one; what changes meanwhile goes into
// the next.
func (n *Node) startBuild(now time.Time, full bool) {
	b := n.table.Plan(full)
	n.building, n.lastBuild, n.predsDirty = b, now, false
	n.buildingChanged, n.predsChanged = n.predsChanged, 0
	n.buildingGen = n.predsGen
	n.buildingQoS = nil
	if n.classesDirty {
		// Published with the filters they refine.
		n.buildingQoS, n.classesDirty = qos.NewTable(n.classes), false
	}
	if n.builder == nil {
		n.InstallIndex(b.Run())
		return
	}
	n.builder.Start(b)
}

// InstallIndex publishes the PREDICATES index b, which the node's
// IndexBuilder was given and has run, to the data plane (a control-plane
// call).
func (n *Node) InstallIndex(b *encoding.Build) {
	if b == nil || b != n.building {
		n.log.Error("PREDICATES index build handed back that the node is not waiting for; ignored")
		return
	}
	snap := n.table.Install(b)
	n.preds.Store(snap)
	n.indexGen = n.buildingGen
	if n.buildingQoS != nil {
		n.qos.Store(n.buildingQoS)
	}
	n.building, n.buildingQoS = nil, nil
	n.lastBuildTook = n.clock.Since(n.lastBuild)
	if snap.Partial() {
		n.m.rebuildPartial.Observe(n.lastBuildTook.Seconds())
	} else {
		n.lastFullTook = n.lastBuildTook
		n.m.rebuildFull.Observe(n.lastBuildTook.Seconds())
	}
	n.log.Debug("PREDICATES index rebuilt", zap.Int("updates", n.buildingChanged), zap.Bool("partial", snap.Partial()), zap.Duration("took", n.lastBuildTook))
}

// AdvertisementPending reports whether local subscription changes wait to
// be advertised or the PREDICATES index waits to be rebuilt or is being
// rebuilt (a control-plane call; Inspection.Pending carries it across
// goroutines).
func (n *Node) AdvertisementPending() bool {
	return n.adPending.Load() || n.predsDirty || n.building != nil
}

func (n *Node) processReady() {
	for n.ls.HasReady() {
		rd := n.ls.Ready()
		n.sendControl(rd.Messages)
		// Once withdrawn, the protocol's tables shrink to this router alone;
		// the data plane keeps the last real ones for the bundles still on
		// their way.
		if rd.RoutesChanged && !n.withdrawn {
			t := n.ls.Routes()
			n.routes.Store(t)
			n.m.routersKnown.Set(float64(t.Known()))
		}
		if !n.withdrawn {
			n.finishLeavers()
		}
		for _, u := range rd.PredicateUpdates {
			if n.withdrawn {
				break
			}
			filters := n.applyMatchAll(u)
			if u.Removed {
				n.table.Remove(u.Router)
			} else {
				n.table.Set(u.Router, filters)
			}
			n.setClasses(u)
			n.predsDirty = true
			n.predsChanged++
			n.predsGen++
		}
		for _, ev := range rd.Events {
			n.observe(ev)
		}
		n.m.lsdbEntries.Set(float64(n.ls.LSDBSize()))
		// 48 bits survive the float64 exactly.
		n.m.lsdbDigest.Set(float64(n.ls.Digest() & (1<<48 - 1)))
		n.ls.Advance()
	}
}

// setClasses keeps the QoS classes of the update's router for the next
// PREDICATES rebuild, which publishes them with the filters they refine.
func (n *Node) setClasses(u linkstate.PredicateUpdate) {
	old := n.classes[u.Router]
	if u.Removed || len(u.Classes) == 0 {
		if old == nil {
			return
		}
		delete(n.classes, u.Router)
	} else {
		n.classes[u.Router] = u.Classes
	}
	n.classesDirty = true
}

// finisher is a Link that can tell its neighbour that nothing more will
// be queued for it (transport.Link.Finish), and end.
// downer is a link that says whether it takes no more bundles.
type downer interface{ Down() bool }

type finisher interface {
	Finish()
	Finishing() bool
	Close(reason error)
}

// finishLeavers finishes the links to neighbours that have withdrawn from
// the mesh since their link came up, once the routes just published lead
// around them: each leaving broker then knows when the last bundle on its
// way to it has arrived, and may close without losing it (docs/design.md
// §10). A link to a neighbour's later incarnation is not finished, since
// the withdrawn LSA is older than the link. A finished link carries
// nothing more, hellos included, so if its neighbour advertises itself
// again over the same link — the withdrawal was forged, say — the link is
// closed, and dialled afresh.
func (n *Node) finishLeavers() {
	for peer, l := range n.current {
		f, ok := l.(finisher)
		if !ok {
			continue
		}
		lsa, ok := n.ls.LSA(peer)
		if !ok || lsa.Seq <= n.heldSeq[peer] {
			continue
		}
		n.heldSeq[peer] = lsa.Seq
		switch {
		case lsa.Withdrawn && !f.Finishing():
			f.Finish()
		case !lsa.Withdrawn && f.Finishing():
			f.Close(errors.New("neighbour advertised itself again after withdrawing"))
		}
	}
}

// deltaLink is a link that can say whether its neighbour takes predicate
// advertisements as deltas (transport.Link: both ends offered them).
type deltaLink interface{ SendsPredicateDeltas() bool }

func (n *Node) sendControl(envs []linkstate.Envelope) {
	// Floods send one message to many neighbours: convert each once, and
	// each delta once per base (the links a flood reaches mostly had the
	// same last advertisement of its origin).
	type deltaKey struct{ msg, base *linkstate.PredAd }
	converted := make(map[linkstate.Message]*dripv1.Control, len(envs))
	var deltas map[deltaKey]*dripv1.Control // nil value: whole
	for _, env := range envs {
		l := n.current[env.To]
		if l == nil {
			continue
		}
		ad, isAd := env.Msg.(*linkstate.PredAd)
		enc := n.adEnc[env.To]
		var c *dripv1.Control
		if isAd && enc != nil {
			if k := (deltaKey{ad, enc.Base(ad.Origin)}); k.base != nil {
				var ok bool
				if c, ok = deltas[k]; !ok {
					c = n.predDelta(k.base, ad)
					if deltas == nil {
						deltas = map[deltaKey]*dripv1.Control{}
					}
					deltas[k] = c
				}
			}
		}
		delta := c != nil
		if !delta {
			var ok bool
			if c, ok = converted[env.Msg]; !ok {
				var err error
				if c, err = transport.ControlToProto(env.Msg); err != nil {
					n.log.Error("cannot encode control message", zap.Error(err))
					continue
				}
				converted[env.Msg] = c
			}
		}
		l.PushControl(c)
		if isAd {
			if enc != nil {
				enc.Sent(ad) // what the neighbour now holds: the base of the next delta
			}
			n.m.countAdSent(delta, proto.Size(c))
		}
	}
}

// predDelta returns ad as a delta against base, nil where it goes whole.
func (n *Node) predDelta(base, ad *linkstate.PredAd) *dripv1.Control {
	sum, ok := n.ls.PredSum(ad)
	if !ok {
		sum = ad.Checksum()
	}
	c, ok := transport.PredAdDelta(base, ad, sum)
	if !ok {
		return nil
	}
	return c
}

func (n *Node) observe(ev linkstate.Event) {
	n.m.protocolEvents.WithLabelValues(ev.Type.String()).Inc()
	if ev.Type == linkstate.EventAdjacencyAdvertised || ev.Type == linkstate.EventLoadTimeout {
		n.adjacencyAdvertised = true // the link is in the LSA, as after a finished exchange
	}
	name := n.peerName(ev.Peer)
	switch ev.Type {
	case linkstate.EventSPF:
		n.m.spfRuns.Inc()
		n.m.routersKnown.Set(float64(ev.Routers))
	case linkstate.EventAdjacencyUp:
		n.log.Info("adjacency up", zap.String("peer", name), zap.Uint32("cost", ev.Cost))
		n.m.linkCost.WithLabelValues(name).Set(float64(ev.Cost))
	case linkstate.EventAdjacencyDown:
		n.log.Info("adjacency down", zap.String("peer", name), zap.Stringer("reason", ev.Reason))
	case linkstate.EventCostChanged:
		n.log.Info("link cost changed", zap.String("peer", name), zap.Uint32("from", ev.OldCost), zap.Uint32("to", ev.Cost), zap.Duration("rtt", ev.RTT))
		n.m.linkCost.WithLabelValues(name).Set(float64(ev.Cost))
	case linkstate.EventBudgetViolation:
		n.log.Info("link delay broke a deadline flow's budget; advertised at once",
			zap.String("peer", name), zap.Duration("rtt", ev.RTT), zap.Duration("budget", ev.Budget), zap.Uint32("cost", ev.Cost))
		n.m.linkCost.WithLabelValues(name).Set(float64(ev.Cost))
	case linkstate.EventSeqFlush:
		// Only a forged or corrupt copy gets there: worth an operator's eye.
		n.log.Warn("own advertisement reached the largest sequence number; flushed it and restarted at 1",
			zap.Stringer("kind", ev.Kind))
	case linkstate.EventSealFailed:
		// The key of the peer certificate could not sign (an external
		// signer gone): neighbours refuse the unsigned advertisement.
		n.log.Error("could not sign own advertisement; it went out unsigned and neighbours will refuse it",
			zap.Stringer("kind", ev.Kind), zap.Uint64("seq", ev.Seq))
	case linkstate.EventVersionMismatch, linkstate.EventParamsMismatch:
		n.log.Warn("peer incompatible", zap.Stringer("event", ev.Type), zap.String("peer", name), zap.Uint64("seq", ev.Seq))
	default:
		n.log.Debug("link-state event", zap.Stringer("event", ev.Type), zap.String("peer", name))
	}
}

// exportNeighbors exports each neighbour's smoothed RTT, which hellos
// refresh every HelloInterval whatever the cost mode, and tells each link
// its one-way delay for the budgets of deadline bundles.
func (n *Node) exportNeighbors() {
	for _, nb := range n.ls.Neighbors() {
		if l := n.current[nb.ID]; l != nil && nb.Samples > 0 {
			n.m.linkRTT.WithLabelValues(l.Name()).Set(nb.RTT.Seconds())
			l.SetOneWay(nb.RTT / 2)
		}
	}
}

// MaxNeighborRTT is the largest smoothed RTT to a neighbour (zero before
// the first sample).
func (n *Node) MaxNeighborRTT() time.Duration {
	var rtt time.Duration
	for _, nb := range n.ls.Neighbors() {
		rtt = max(rtt, nb.RTT)
	}
	return rtt
}

func (n *Node) peerName(id uint32) string {
	if l := n.current[id]; l != nil {
		return l.Name()
	}
	return fmt.Sprint(id)
}

// setLocalPredicate advertises the encoded filters of all local
// subscriptions, deduplicated and with covered filters removed
// (docs/design.md §2).
func (n *Node) setLocalPredicate() {
	all, classes := n.subs.advertisement()
	filters := encoding.Advertise(all)
	n.m.advertised.Set(float64(len(filters)))
	n.m.advertisements.Inc()
	if err := n.ls.SetLocalPredicate(filters, classes...); err != nil {
		n.log.Error("cannot advertise local predicate", zap.Error(err))
	}
}

func (n *Node) subscriptionsChanged() {
	if !n.adPending.Swap(true) {
		n.m.adPending.Set(1)
	}
	if n.wake != nil {
		n.wake()
	}
}

// Subscribe installs a local subscription (Carzaniga09 §2.2's
// LOCAL-PREDICATES) with what it asks of delivery: a deadline, two paths
// (docs/design.md §11), or nothing (the zero Flow). It fails with
// codes.Unavailable once the node drains, and codes.InvalidArgument for a
// deadline out of range.
func (n *Node) Subscribe(p content.Predicate, f qos.Flow, client string) (*Subscription, error) {
	return n.subs.add(p, f, client)
}

// Subscriptions counts the local subscriptions.
func (n *Node) Subscriptions() int { return n.subs.count() }

// HasRoutes reports whether the node has joined the mesh: it has no
// configured peers, or it holds a neighbour's database through a finished
// exchange (an advertised adjacency), so its routes are as complete as
// that neighbour's.
func (n *Node) HasRoutes() bool { return len(n.cfg.Peers) == 0 || n.adjacencyAdvertised }

// Linked counts the configured neighbours (Config.Peers) whose link routes
// both ways: this node advertises it (their database exchange is done) and
// the neighbour's own advertisement lists this node. Only such a link is in
// every router's shortest paths.
func (n *Node) Linked() (linked, configured int) {
	advertised := make(map[uint32]bool, len(n.cfg.Peers))
	for _, nb := range n.ls.Neighbors() {
		advertised[nb.ID] = nb.Advertised
	}
	for _, p := range n.cfg.Peers {
		if advertised[p.ID] && n.listedBy(p.ID) {
			linked++
		}
	}
	return linked, len(n.cfg.Peers)
}

// listedBy says whether router id's advertisement lists a link to this node.
func (n *Node) listedBy(id uint32) bool {
	lsa, ok := n.ls.LSA(id)
	if !ok || lsa.Withdrawn {
		return false
	}
	_, found := slices.BinarySearchFunc(lsa.Links, n.cfg.ID, func(l linkstate.Link, id uint32) int { return cmp.Compare(l.Neighbor, id) })
	return found
}

// Joined reports whether the node has joined the mesh: it is linked both
// ways to every configured neighbour (Linked), or JoinTimeout has passed
// since it started, as the first broker of a mesh, or one whose neighbour
// is down, must serve anyway; and its PREDICATES index covers the
// advertisements it held at that moment. Once joined it stays joined, and
// the first call that finds it says so in the log. Only then may the next
// broker of a rolling update leave: a broker ready after its first
// neighbour's database, as it once was, could be that neighbour's only link
// to the mesh when Kubernetes took the neighbour down next, and dropped what
// it was handed for want of a route (docs/design.md §10, "Ready means
// joined"). And only then may it take publishers: a message matched
// against an index built before the database arrived — seconds before it
// could be rebuilt, on a broker short of CPU — reaches none of the brokers
// missing from it, and no broker counts that as a drop. A control-plane
// call.
func (n *Node) Joined() bool {
	if n.joined {
		return true
	}
	if !n.joinDue {
		linked, configured := n.Linked()
		switch {
		case linked == configured:
		case n.clock.Since(n.start) < n.cfg.JoinTimeout:
			return false
		case n.HasRoutes():
			n.log.Warn("not linked to every neighbour after the join timeout; serving with the routes it has",
				zap.Int("linked", linked), zap.Int("neighbours", configured), zap.Duration("join_timeout", n.cfg.JoinTimeout))
		default:
			n.log.Warn("no neighbour's database after the join timeout; serving anyway", zap.Duration("join_timeout", n.cfg.JoinTimeout))
		}
		// Not a moving target: what arrives from now on is the mesh's
		// ordinary churn, which the index follows as it always does.
		n.joinDue, n.joinGen = true, n.predsGen
	}
	if n.indexGen < n.joinGen {
		return false
	}
	n.joined = true
	linked, configured := n.Linked()
	n.log.Info("joined the mesh", zap.Duration("after", n.clock.Since(n.start)), zap.Int("neighbours", configured), zap.Int("linked", linked))
	return true
}

// BeginDrain starts a graceful departure: new subscriptions are refused,
// each local subscriber is told to move (Draining, with the overlap its
// client should keep both subscriptions for), and Draining() is closed so
// publish streams can hand their publishers over.
func (n *Node) BeginDrain(deadline time.Time, overlap time.Duration) {
	if n.draining.Swap(true) {
		return
	}
	n.subs.drain(&dripv1.Draining{DeadlineUnixNano: deadline.UnixNano(), OverlapNs: int64(overlap)})
	close(n.drain)
}

// Draining is closed once BeginDrain has run.
func (n *Node) Draining() <-chan struct{} { return n.drain }

// EndSubscriptions ends every local subscription (their streams end with
// codes.Unavailable).
func (n *Node) EndSubscriptions() { n.subs.closeAll() }

// Withdraw floods a withdrawal of this router so that neighbours reroute
// around it at once, and stops the routing protocol. The data plane keeps
// forwarding with the last routes, for the bundles still on their way.
func (n *Node) Withdraw() {
	if n.withdrawn {
		return
	}
	n.withdrawn = true
	n.log.Info("withdrawing from the mesh")
	n.ls.Shutdown()
	n.processReady()
}

// Inspection is a consistent view of the broker's routing state.
type Inspection struct {
	Routers    []uint32          // reachable, self included
	NextHops   map[uint32]uint32 // destination → neighbour
	Predicates map[uint32]int    // router → advertised filters
	Links      map[uint32]string // neighbour ID → name of links that are up
	LSDB       int               // entries
	Digest     uint64            // LSDB digest: equal on converged brokers
	// Pending says local subscription changes wait to be advertised or a
	// PREDICATES rebuild is due or in flight.
	Pending   bool
	Neighbors []linkstate.NeighborInfo
}

// Inspect returns the routing state (a control-plane call).
func (n *Node) Inspect() Inspection {
	t := n.ls.Routes()
	in := Inspection{
		Routers:    t.Routers(),
		NextHops:   map[uint32]uint32{},
		Predicates: map[uint32]int{},
		Links:      map[uint32]string{},
		LSDB:       n.ls.LSDBSize(),
		Digest:     n.ls.Digest(),
		Pending:    n.AdvertisementPending(),
		Neighbors:  n.ls.Neighbors(),
	}
	for _, r := range in.Routers {
		if nh, ok := t.NextHop(r); ok {
			in.NextHops[r] = nh
		}
	}
	// The data plane's view, which may trail the protocol's by up to
	// PredicateRebuildInterval.
	snap := n.preds.Load()
	for _, r := range snap.Routers() {
		f, _ := snap.Filters(r)
		in.Predicates[r] = len(f)
	}
	for id, l := range n.current {
		in.Links[id] = l.Name()
	}
	return in
}

// HandshakeFailures returns the counter of refused links for a reason
// (tests and diagnostics).
func (n *Node) HandshakeFailures(reason string) prometheus.Counter {
	return n.m.linkHandshakeFails.WithLabelValues(reason)
}

// AdvertisementsRefused returns the counter of neighbours' advertisements
// refused for a reason (linkstate.RefusedReasons).
func (n *Node) AdvertisementsRefused(reason string) prometheus.Counter {
	return n.m.adsRefused.WithLabelValues(reason)
}

// PublishedCounter counts messages accepted from local publishers.
func (n *Node) PublishedCounter() prometheus.Counter { return n.m.published }

// DuplicatesSuppressed counts copies not passed on, by verdict (duplicate,
// stale).
func (n *Node) DuplicatesSuppressed(verdict dedup.Verdict) prometheus.Counter {
	return n.m.duplicates.WithLabelValues(verdict.String())
}

// linkMetrics resolves one link's counters.
func (n *Node) linkMetrics(peer string) transport.LinkMetrics { return n.m.forLink(peer) }

var _ drp.Routing = (*linkstate.Table)(nil)
