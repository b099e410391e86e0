package brokertest

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	testingclock "k8s.io/utils/clock/testing"

	dripv1 "github.com/dripmesh/drip/api/proto/drip/v1"
	"github.com/dripmesh/drip/internal/broker"
	"github.com/dripmesh/drip/internal/encoding"
	"github.com/dripmesh/drip/internal/linkstate"
	"github.com/dripmesh/drip/internal/node"
	"github.com/dripmesh/drip/internal/pq"
	"github.com/dripmesh/drip/internal/qos"
	"github.com/dripmesh/drip/internal/sim"
	"github.com/dripmesh/drip/internal/transport"
	"github.com/dripmesh/drip/internal/workload"
)

// Options describe a simulated mesh and its clients.
type Options struct {
	Seed uint64
	// Topology gives the routers (their IDs) and links (weights, one-way
	// delays). sim.RandomConnected and friends make them.
	Topology sim.Topology
	// Config adjusts each broker's configuration after SimConfig.
	Config func(*broker.Config)
	// Workload draws predicates and messages.
	Workload workload.Config
	// Subscribers and Publishers are spread round-robin over the brokers
	// (over ClientBrokers if set); each publisher sends Rate messages per
	// second as a Poisson process.
	Subscribers, Publishers int
	Rate                    float64
	ClientBrokers           []uint32
	// Flow, if set, gives subscriber i's deadline and two-path option
	// (docs/design.md §11).
	Flow func(i int) qos.Flow
	// Logger receives the brokers' logs (default: none).
	Logger *zap.Logger
	// Signed has every broker sign what it originates and check what it
	// receives (node.WithAuthenticator), with a key of its own that the
	// others know (SimKeys), as --tls-peer-identity does with
	// certificates: a compromised broker then signs only as itself.
	Signed bool
	// Compromised lists the compromised brokers (adversary.go): they run
	// the brokers' code, and what their neighbours send them about
	// themselves never reaches them, so that what Inject sends in their
	// name stays what the mesh holds of them. They take frames whole (no
	// compression, no advertisement deltas).
	Compromised []uint32
	// DenseOnly lists routers that offer no sparse destinations in their
	// Open, as brokers older than them: their neighbours send them
	// destination bitsets.
	DenseOnly []uint32
	// BuildTime is how long each PREDICATES index build takes in virtual
	// time, beside its broker's control plane (broker.IndexBuilder): the
	// build runs, and is installed, as an event of its own that long after
	// the one that planned it (default 0: right after it, at the same
	// virtual time).
	BuildTime time.Duration
}

// SimConfig is the configuration brokers run with in the simulator: the
// production defaults, which virtual time makes cheap.
func SimConfig(id uint32, name string) broker.Config {
	cfg := broker.DefaultConfig(id, name)
	cfg.Mesh = "sim"
	return cfg
}

// dialDelay stands for a dial and handshake after a link could come up.
const dialDelay = 100 * time.Millisecond

// Sim is a mesh of broker Nodes in virtual time; see the package
// documentation. It is not safe for concurrent use.
type Sim struct {
	opts   Options
	rng    *rand.Rand
	clock  *testingclock.FakeClock
	base   time.Time
	now    time.Duration
	queue  pq.Heap[event]
	seq    uint64
	dirty  bool // something may have been delivered to a subscriber
	nodes  []*simNode
	index  map[uint32]int
	links  []*simLink
	group  []int // partition group per node; equal groups talk
	subs   []*subscriber
	pubs   []*publisher
	ledger *Ledger
	errs   []error
	// publishUntil stops the publishers (0: never).
	publishUntil time.Duration
	// registries holds every broker incarnation's metrics, for Counters.
	registries []*prometheus.Registry
	// heard keeps the advertisements compromised brokers received, by
	// origin and kind, the newest last (Heard).
	heard map[linkstate.Key][]linkstate.Message
}

type event struct {
	at  time.Duration
	seq uint64
	do  func()
}

type simNode struct {
	idx  int
	id   uint32
	name string
	cfg  broker.Config
	node *node.Node // nil while down
	// control converts what the node sends for its links, shared by them
	// as a Broker's links share one; linkMetrics counts each link's
	// traffic as a Broker does.
	control     *transport.ControlEncoder
	linkMetrics func(peer string) transport.LinkMetrics
	inc         int // incarnation: bumped at every kill, stop and restart
	// controlDelay holds back the control messages the node receives
	// (SlowControl); controlAt is when the last one held back reaches it.
	controlDelay, controlAt time.Duration
	// release is the data plane that sends held bounced bundles on.
	release *node.Forwarder
	reg     *prometheus.Registry // the current incarnation's metrics
	// denseOnly makes the broker's Open offer no sparse destinations, as
	// a broker older than them (Options.DenseOnly).
	denseOnly bool
	// compromised hides from the broker what its neighbours send about
	// it (Options.Compromised).
	compromised bool
}

// alive says whether the node runs (it may be leaving).
func (n *simNode) alive() bool { return n.node != nil }

// running says whether the node runs and is not leaving.
func (n *simNode) running() bool { return n.node != nil && n.node.Phase() == node.Running }

type simLink struct {
	a, b   int
	weight uint32
	delay  time.Duration
	extra  time.Duration
	cut    bool
	silent bool // Silence: frames are held, and neither end is told
	// stalled ends (Stall) send nothing: what they take to send waits in
	// their queues, as behind a writer blocked on a full TCP window.
	stalled [2]bool
	gen     int // bumped whenever the connection ends
	ends    [2]*transport.Link
	lastAt  [2]time.Duration // FIFO per direction: the last scheduled arrival
	dialAt  bool             // a connect is scheduled
	// held are frames that reached a partition: the stream stalls, as TCP
	// does, and delivers them once the partition ends.
	held [2][]heldFrame
}

type heldFrame struct {
	gen int
	raw []byte
}

func (l *simLink) other(i int) int {
	if l.a == i {
		return l.b
	}
	return l.a
}

func (l *simLink) side(i int) int {
	if l.a == i {
		return 0
	}
	return 1
}

// New builds the mesh and its clients and boots every broker at virtual
// time zero; nothing runs until RunUntil.
func New(opts Options) (*Sim, error) {
	if err := opts.Topology.Validate(); err != nil {
		return nil, err
	}
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s := &Sim{
		opts:   opts,
		rng:    rand.New(rand.NewPCG(opts.Seed, 0x5eed)),
		clock:  testingclock.NewFakeClock(base),
		base:   base,
		queue:  pq.New(func(a, b event) bool { return a.at < b.at || a.at == b.at && a.seq < b.seq }, 1024),
		index:  map[uint32]int{},
		ledger: newLedger(),
	}
	for i, id := range opts.Topology.Routers {
		cfg := SimConfig(id, fmt.Sprintf("b%d", id))
		if opts.Config != nil {
			opts.Config(&cfg)
		}
		compromised := slices.Contains(opts.Compromised, id)
		if compromised {
			cfg.PeerCompression, cfg.PeerPredicateDeltas = false, false
		}
		s.nodes = append(s.nodes, &simNode{idx: i, id: id, name: cfg.Name, cfg: cfg, denseOnly: slices.Contains(opts.DenseOnly, id), compromised: compromised})
		s.index[id] = i
		s.group = append(s.group, 0)
	}
	for _, l := range opts.Topology.Links {
		s.links = append(s.links, &simLink{a: s.index[l.A], b: s.index[l.B], weight: l.Weight, delay: max(l.Delay, time.Microsecond)})
		// Each end knows the other as a configured neighbour, as a
		// topology file tells brokers: Node.Joined waits for them.
		for _, e := range [][2]uint32{{l.A, l.B}, {l.B, l.A}} {
			n := s.nodes[s.index[e[0]]]
			n.cfg.Peers = append(n.cfg.Peers, broker.Peer{ID: e[1], Addr: fmt.Sprintf("b%d", e[1]), Weight: l.Weight})
		}
	}
	for _, n := range s.nodes {
		if err := s.boot(n); err != nil {
			return nil, err
		}
	}
	if err := s.addClients(); err != nil {
		return nil, err
	}
	return s, nil
}

// Now is the virtual time since the start.
func (s *Sim) Now() time.Duration { return s.now }

// Errors lists what went wrong in the harness itself (not verdicts).
func (s *Sim) Errors() []error { return s.errs }

// Ledger is the record of published messages and deliveries.
func (s *Sim) Ledger() *Ledger { return s.ledger }

// Node returns router id's node, nil while it is down.
func (s *Sim) Node(id uint32) *node.Node { return s.nodes[s.index[id]].node }

func (s *Sim) after(d time.Duration, do func()) { s.at(s.now+d, do) }

func (s *Sim) at(t time.Duration, do func()) {
	s.seq++
	s.queue.Push(event{at: max(t, s.now), seq: s.seq, do: do})
}

// RunUntil processes events up to virtual time t.
func (s *Sim) RunUntil(t time.Duration) {
	for s.queue.Len() > 0 && s.queue.Peek().at <= t {
		ev := s.queue.Pop()
		s.now = ev.at
		s.clock.SetTime(s.base.Add(s.now))
		ev.do()
		s.settle()
	}
	s.now = max(s.now, t)
	s.clock.SetTime(s.base.Add(s.now))
}

// settle does what production's goroutines would do at once after an
// input: flush nodes whose subscriptions changed, move queued frames onto
// the wire, let clients read, and close the links of a node whose drain is
// over (node.Stopped), as Broker.Run does.
func (s *Sim) settle() {
	for range 100 {
		progress := false
		for _, n := range s.nodes {
			if n.node != nil && n.node.AdvertisementPending() {
				n.node.Flush()
			}
			if n.node != nil && n.node.Phase() == node.Stopped {
				s.closeStopped(n)
				progress = true
			}
		}
		for _, l := range s.links {
			progress = s.pump(l) || progress
		}
		if s.dirty {
			s.dirty = false
			for _, sub := range s.subs {
				s.pollSubscriber(sub)
			}
			progress = true
		}
		if !progress {
			return
		}
	}
}

func (s *Sim) boot(n *simNode) error {
	reg := prometheus.NewRegistry()
	s.registries = append(s.registries, reg)
	n.reg = reg
	opts := []node.Option{node.WithClock(s.clock), node.WithLogger(s.opts.Logger), node.WithRegisterer(reg)}
	if s.opts.Signed {
		opts = append(opts, node.WithAuthenticator(SimKeys{}.For(n.id)))
	}
	nd, err := node.New(n.cfg.Config, opts...)
	if err != nil {
		return err
	}
	n.node, n.release, n.control = nd, nd.NewForwarder(), &transport.ControlEncoder{}
	n.linkMetrics = broker.LinkMetrics(reg)
	n.inc++
	inc := n.inc
	nd.SetIndexBuilder(simBuilder{s, n, inc})
	// Each node ticks at its own phase, as independent processes would.
	var tick func()
	tick = func() {
		if n.inc != inc || n.node == nil {
			return
		}
		n.node.Tick()
		// Production releases held bounced bundles on a goroutine of its
		// own at the same interval (Broker.releaseBounced).
		n.release.ReleaseHeld(false)
		if n.inc == inc && n.node != nil {
			s.after(n.cfg.TickInterval, tick)
		}
	}
	s.after(time.Duration(s.rng.Int64N(int64(n.cfg.TickInterval)))+1, tick)
	s.reconcile()
	return nil
}

// simBuilder runs a node's PREDICATES index builds as events of their
// own, Options.BuildTime after the event that planned them: in virtual
// time, deterministically, beside the node's control plane as Broker's
// goroutine runs them. A build of an incarnation that has since died is
// dropped with it.
type simBuilder struct {
	s   *Sim
	n   *simNode
	inc int
}

func (b simBuilder) Start(build *encoding.Build) {
	b.s.after(b.s.opts.BuildTime, func() {
		if b.n.inc != b.inc || b.n.node == nil {
			return
		}
		b.n.node.InstallIndex(build.Run())
	})
}

// reconcile schedules a connect for every link that could be up and is not.
func (s *Sim) reconcile() {
	for _, l := range s.links {
		if l.ends[0] != nil || l.dialAt || l.cut || !s.canLink(s.nodes[l.a]) || !s.canLink(s.nodes[l.b]) {
			continue
		}
		l.dialAt = true
		s.after(dialDelay+time.Duration(s.rng.Int64N(int64(dialDelay))), func() {
			l.dialAt = false
			s.connect(l)
		})
	}
}

// canLink says whether a node accepts new links: not once it is withdrawn.
func (s *Sim) canLink(n *simNode) bool { return n.alive() && n.node.Phase() <= node.Moving }

func (s *Sim) open(n *simNode) *dripv1.Open {
	o := &dripv1.Open{ProtocolVersion: transport.ProtocolVersion, RouterId: n.id, RouterName: n.name, Mesh: n.cfg.Mesh}
	transport.SetOpenBloom(o, n.cfg.Encoding)
	if n.cfg.PeerCompression {
		o.Compression = []string{transport.CompressionDeflate}
	}
	o.PredicateDeltas = n.cfg.PeerPredicateDeltas
	o.SparseDestinations = !n.denseOnly
	return o
}

func (s *Sim) connect(l *simLink) {
	a, b := s.nodes[l.a], s.nodes[l.b]
	if l.ends[0] != nil || l.cut || !s.canLink(a) || !s.canLink(b) {
		return
	}
	if err := transport.Compatible(s.open(a), s.open(b)); err != nil {
		s.errs = append(s.errs, fmt.Errorf("link %s–%s: %w", a.name, b.name, err))
		return
	}
	for side, n := range []*simNode{a, b} {
		peer := []*simNode{b, a}[side]
		fwd := n.node.NewForwarder()
		nd, inc := n.node, n.inc
		end, err := transport.NewLink(newStepConn(s.open(peer)), transport.LinkConfig{
			QueueBytes: n.cfg.LinkQueueBytes, MaxFrameBytes: n.cfg.MaxFrameBytes, Compression: n.cfg.PeerCompression,
			PredicateDeltas: n.cfg.PeerPredicateDeltas, Dialed: side == 0, MaxAdFilters: n.cfg.LinkState.MaxFilters,
			Account: nd.Budget().Account,
			Control: n.control,
			Metrics: n.linkMetrics(peer.name),
			// Urgency, budgets and keepalives in virtual time.
			Clock:       s.clock,
			Keepalive:   n.cfg.LinkState.Keepalive,
			ReplayBytes: n.cfg.LinkReplayBytes,
			MarkBytes:   n.cfg.LinkMarkBytes,
		}, func(tl *transport.Link, msgs []linkstate.Message, bundles [][]byte) error {
			if n.inc != inc {
				return errors.New("broker is down")
			}
			if len(msgs) > 0 {
				if n.controlDelay > 0 || n.controlAt > s.now {
					// Behind: in order, after those already held back.
					gen := l.gen
					n.controlAt = max(s.now+n.controlDelay, n.controlAt)
					s.at(n.controlAt, func() {
						if n.inc == inc && l.gen == gen {
							nd.Control(tl, msgs)
						}
					})
				} else {
					nd.Control(tl, msgs)
				}
			}
			if len(bundles) > 0 {
				fwd.Bundles(tl, bundles)
				s.dirty = true
			}
			return nil
		})
		if err != nil {
			s.errs = append(s.errs, err)
			return
		}
		l.ends[side] = end
	}
	l.lastAt = [2]time.Duration{s.now, s.now}
	a.node.LinkUp(l.ends[0])
	b.node.LinkUp(l.ends[1])
}

// pump moves what each end of l has queued onto the wire.
func (s *Sim) pump(l *simLink) bool {
	moved := false
	for side := range 2 {
		end := l.ends[side]
		if end == nil || l.stalled[side] || !s.nodes[[2]int{l.a, l.b}[side]].alive() {
			continue
		}
		for {
			f, ok, err := end.TakeFrame()
			if err != nil {
				s.disconnect(l, err)
				return true
			}
			if !ok {
				break
			}
			moved = true
			raw := bytes.Clone(f) // what crosses the wire
			at := max(s.now+l.delay+l.extra, l.lastAt[side])
			l.lastAt[side] = at
			gen := l.gen
			s.at(at, func() { s.deliver(l, side, gen, raw) })
		}
	}
	return moved
}

func (s *Sim) deliver(l *simLink, side, gen int, raw []byte) {
	if l.gen != gen || l.ends[0] == nil {
		return // lost with the connection
	}
	if s.group[l.a] != s.group[l.b] || l.silent {
		l.held[side] = append(l.held[side], heldFrame{gen, raw})
		return
	}
	if to := s.nodes[[2]int{l.a, l.b}[1-side]]; to.compromised {
		s.overheard(raw)
		raw = hideSelf(raw, to.id)
	}
	if err := l.ends[1-side].Deliver(raw); err != nil {
		if errors.Is(err, transport.ErrMalformedControl) {
			// Correct brokers never send one: a defect (a predicate
			// delta taken against what the far end does not hold, say).
			s.errs = append(s.errs, fmt.Errorf("at %v: %w", s.now, err))
		}
		s.disconnect(l, err)
	}
}

// disconnect ends the connection of l at both ends at once.
func (s *Sim) disconnect(l *simLink, reason error) {
	if l.ends[0] == nil {
		return
	}
	ends := l.ends
	l.ends = [2]*transport.Link{}
	l.gen++
	l.stalled = [2]bool{}
	for side, end := range ends {
		end.Close(reason)
		if n := s.nodes[[2]int{l.a, l.b}[side]]; n.node != nil {
			n.node.LinkDown(end)
		}
	}
	s.reconcile()
}

// closeLater ends l's connection once the frames already sent from node
// from have arrived, as TCP delivers data before the close.
func (s *Sim) closeLater(l *simLink, from int, reason error) {
	gen := l.gen
	s.at(max(s.now+l.delay+l.extra, l.lastAt[l.side(from)])+1, func() {
		if l.gen == gen {
			s.disconnect(l, reason)
		}
	})
}

func (s *Sim) linksOf(i int) []*simLink {
	var out []*simLink
	for _, l := range s.links {
		if l.a == i || l.b == i {
			out = append(out, l)
		}
	}
	return out
}

// Kill crashes router id: its streams close (frames it had sent still
// arrive, frames to it are lost), its clients lose their connections.
func (s *Sim) Kill(id uint32) {
	n := s.nodes[s.index[id]]
	if !n.alive() {
		return
	}
	n.node = nil
	n.inc++
	for _, l := range s.linksOf(n.idx) {
		if l.ends[0] != nil {
			s.closeLater(l, n.idx, errors.New("neighbour killed"))
		}
	}
	s.dirty = true
}

// Restart boots router id afresh: a new epoch, an empty database.
func (s *Sim) Restart(id uint32) {
	n := s.nodes[s.index[id]]
	if n.alive() {
		return
	}
	if err := s.boot(n); err != nil {
		s.errs = append(s.errs, err)
	}
}

// Stop shuts router id down gracefully (docs/design.md §10): the node's
// own drain (node.Node.Stop) tells clients to move, then withdraws, lets
// neighbours reroute until they say they have, and the simulator closes its
// links once what they hold has left (closeStopped).
func (s *Sim) Stop(id uint32) {
	n := s.nodes[s.index[id]]
	if !n.running() {
		return
	}
	if s.separates(n.idx) {
		// Leaving splits the running mesh: messages between the parts
		// cannot be delivered, graceful or not.
		s.disrupted()
	}
	n.node.Stop()
	s.dirty = true
}

// separates says whether the running brokers other than i would lose their
// connectivity without i (i is a cut vertex of the working mesh).
func (s *Sim) separates(i int) bool {
	start := -1
	running := 0
	for j, n := range s.nodes {
		if j != i && n.running() {
			running++
			if start < 0 {
				start = j
			}
		}
	}
	if running == 0 {
		return false
	}
	return len(s.reach(start, i)) < running
}

// bridges says whether the link between a and b, once healed, would join
// running brokers that cannot reach each other without it.
func (s *Sim) bridges(a, b uint32) bool {
	ia, ib := s.index[a], s.index[b]
	if !s.nodes[ia].running() || !s.nodes[ib].running() {
		return false // it carries nothing until both run; Restart judges that
	}
	return !s.reach(ia, -1)[ib]
}

// reach returns the running brokers that start reaches over working links
// without passing through avoid.
func (s *Sim) reach(start, avoid int) map[int]bool {
	seen := map[int]bool{start: true}
	stack := []int{start}
	for len(stack) > 0 {
		j := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, l := range s.linksOf(j) {
			k := l.other(j)
			if k == avoid || seen[k] || l.cut || !s.nodes[k].running() || s.group[l.a] != s.group[l.b] {
				continue
			}
			seen[k] = true
			stack = append(stack, k)
		}
	}
	return seen
}

// closeStopped ends a node whose drain is over (node.Stopped), as
// Broker.Run does: the bounced bundles it still holds are sent, its links
// carry what they hold, and each closes once its last frame has arrived.
func (s *Sim) closeStopped(n *simNode) {
	n.release.ReleaseHeld(true)
	for _, l := range s.linksOf(n.idx) {
		s.pump(l)
		if l.ends[0] != nil {
			s.closeLater(l, n.idx, errors.New("neighbour stopped"))
		}
	}
	n.node = nil
	n.inc++
	s.dirty = true
}

// Cut breaks the link between a and b until Heal.
func (s *Sim) Cut(a, b uint32) {
	if l := s.link(a, b); l != nil {
		l.cut = true
		s.disconnect(l, errors.New("cut"))
	}
}

// Heal lets a cut link come back.
func (s *Sim) Heal(a, b uint32) {
	if l := s.link(a, b); l != nil && l.cut {
		l.cut = false
		s.reconcile()
	}
}

// SetExtraDelay adds delay to both directions of a link.
func (s *Sim) SetExtraDelay(a, b uint32, d time.Duration) {
	if l := s.link(a, b); l != nil {
		l.extra = d
	}
}

// SlowControl makes router id's control plane fall behind by d (0: catch
// up): the control messages of each frame it receives — hellos, LSAs,
// database exchange — reach its Node d after the frame, in order, while the
// frame's bundles are forwarded at once and its timers keep ticking. It is
// a production broker short of CPU, whose link readers keep reading and
// forwarding while the control messages they hand over wait in its core's
// queue.
func (s *Sim) SlowControl(id uint32, d time.Duration) {
	s.nodes[s.index[id]].controlDelay = d
}

// Partition splits the routers into groups that cannot talk: streams stay
// open but stall (their frames wait, and adjacencies die by the dead
// interval), as TCP connections do across a partition shorter than the
// keepalive timeout. Routers in no group form one more group. Merge ends it.
func (s *Sim) Partition(groups ...[]uint32) {
	for i := range s.group {
		s.group[i] = 0
	}
	for g, ids := range groups {
		for _, id := range ids {
			s.group[s.index[id]] = g + 1
		}
	}
}

// Merge ends a partition: stalled streams deliver what they hold, but
// those of silenced links.
func (s *Sim) Merge() {
	s.Partition()
	for _, l := range s.links {
		if !l.silent {
			s.unhold(l)
		}
	}
}

// unhold delivers what a stalled stream holds, in order, as TCP
// retransmits it once the path is back.
func (s *Sim) unhold(l *simLink) {
	for side := range 2 {
		for _, h := range l.held[side] {
			at := max(s.now+l.delay+l.extra, l.lastAt[side])
			l.lastAt[side] = at
			s.at(at, func() { s.deliver(l, side, h.gen, h.raw) })
		}
		l.held[side] = nil
	}
}

// Silence makes the link between a and b carry nothing until Unsilence,
// and tells neither end: its stream stays open and stalls, as a TCP
// connection does on a path that drops every packet.
func (s *Sim) Silence(a, b uint32) {
	if l := s.link(a, b); l != nil {
		l.silent = true
	}
}

// Unsilence ends Silence: the stream delivers what it held.
func (s *Sim) Unsilence(a, b uint32) {
	if l := s.link(a, b); l != nil && l.silent {
		l.silent = false
		if s.group[l.a] == s.group[l.b] {
			s.unhold(l)
		}
	}
}

// Stall makes a's end of the link to b send nothing, until Unstall or
// the connection ends: the bundles a takes for b wait in its link's queue,
// and b hears nothing from a meanwhile.
func (s *Sim) Stall(a, b uint32) {
	if l := s.link(a, b); l != nil {
		l.stalled[l.side(s.index[a])] = true
	}
}

// Unstall ends Stall.
func (s *Sim) Unstall(a, b uint32) {
	if l := s.link(a, b); l != nil {
		l.stalled[l.side(s.index[a])] = false
	}
}

func (s *Sim) link(a, b uint32) *simLink {
	ia, ib := s.index[a], s.index[b]
	for _, l := range s.links {
		if l.a == ia && l.b == ib || l.a == ib && l.b == ia {
			return l
		}
	}
	return nil
}

// Converged reports whether every running broker (compromised ones
// aside) agrees on one database,
// has nothing to advertise, and holds a full adjacency over every link
// that can work; a stopping broker or a partition means no.
func (s *Sim) Converged() bool {
	var digest uint64
	first := true
	for _, n := range s.nodes {
		if !n.alive() {
			continue
		}
		if n.node.Phase() != node.Running {
			return false
		}
		if n.node.AdvertisementPending() && !n.compromised {
			return false
		}
		in := n.node.Inspect()
		switch {
		case n.compromised:
			// Its database differs by design: it keeps its own
			// advertisements, the mesh holds what Inject sent in its name.
		case first:
			digest, first = in.Digest, false
		case in.Digest != digest:
			return false
		}
		// The advertised adjacencies must be exactly the links that can
		// work: one to a broker that is gone means the news has not
		// arrived, a full one not yet advertised is still exchanging its
		// database.
		full := map[uint32]bool{}
		for _, nb := range in.Neighbors {
			if nb.State == linkstate.StateFull && nb.Advertised {
				full[nb.ID] = true
			}
		}
		for _, l := range s.linksOf(n.idx) {
			peer := s.nodes[l.other(n.idx)]
			works := peer.alive() && !l.cut && s.group[l.a] == s.group[l.b]
			if works != full[peer.id] {
				return false
			}
			delete(full, peer.id)
		}
		if len(full) > 0 {
			return false
		}
	}
	return !first
}

// stepConn is a transport.Conn for links whose frames the simulator moves:
// only its identity and its closing matter.
type stepConn struct {
	remote *dripv1.Open
	done   chan struct{}
	err    error
}

func newStepConn(remote *dripv1.Open) *stepConn {
	return &stepConn{remote: remote, done: make(chan struct{})}
}

func (c *stepConn) Remote() *dripv1.Open { return c.remote }
func (c *stepConn) Send([]byte) error {
	return errors.New("brokertest: frames are moved with TakeFrame")
}
func (c *stepConn) Recv() ([]byte, error) {
	return nil, errors.New("brokertest: frames are moved with Deliver")
}
func (c *stepConn) CloseSend() error { return nil }
func (c *stepConn) Close(reason error) {
	select {
	case <-c.done:
	default:
		if reason == nil {
			reason = transport.ErrClosed
		}
		c.err = reason
		close(c.done)
	}
}
func (c *stepConn) Done() <-chan struct{} { return c.done }
func (c *stepConn) Err() error            { return c.err }

// Counters sums a counter over every broker incarnation of the run, by the
// value of one label ("" for none): how the brokers account for what they
// dropped or suppressed.
func (s *Sim) Counters(name, label string) map[string]float64 {
	return s.counters(s.registries, name, label)
}

// CountersOf is Counters of router id's current incarnation alone; it
// reads gauges too.
func (s *Sim) CountersOf(id uint32, name, label string) map[string]float64 {
	return s.counters([]*prometheus.Registry{s.nodes[s.index[id]].reg}, name, label)
}

func (s *Sim) counters(regs []*prometheus.Registry, name, label string) map[string]float64 {
	out := map[string]float64{}
	for _, reg := range regs {
		mfs, err := reg.Gather()
		if err != nil {
			s.errs = append(s.errs, err)
			continue
		}
		for _, mf := range mfs {
			if mf.GetName() != name {
				continue
			}
			for _, m := range mf.GetMetric() {
				key := ""
				for _, lp := range m.GetLabel() {
					if lp.GetName() == label {
						key = lp.GetValue()
					}
				}
				out[key] += m.GetCounter().GetValue() + m.GetGauge().GetValue()
			}
		}
	}
	return out
}
