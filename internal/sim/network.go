package sim

import (
	"cmp"
	"errors"
	"fmt"
	"github.com/dripmesh/drip/internal/pq"
	"maps"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/dripmesh/drip/internal/encoding"
	"github.com/dripmesh/drip/internal/linkstate"
)

// Options configure a Network. The zero value is usable.
type Options struct {
	// Seed drives every random choice (message drops), so a run is
	// reproducible from it.
	Seed uint64
	// TickInterval is how often every live router's Tick is called; 100 ms
	// when zero, as a broker's driver does.
	TickInterval time.Duration
	// Config returns a router's configuration; linkstate.DefaultConfig
	// named "r<id>" when nil. Its Keepalive is ignored: the network
	// carries no frames but link-state messages.
	Config func(id uint32) linkstate.Config
	// OnReady, if set, sees every Ready a router produces, before the
	// network acts on it.
	OnReady func(id uint32, rd linkstate.Ready)
}

// dirLink is one direction of a link.
type dirLink struct {
	delay time.Duration
	drop  float64
	// lastAt keeps deliveries in order: links are streams, and a message
	// never overtakes an earlier one even if the delay shrank.
	lastAt time.Duration
	stats  LinkStats
}

// link is an undirected link of the topology.
type link struct {
	a, b   uint32
	weight uint32
	cut    bool
	// epoch changes whenever the link's connection is reset; messages in
	// flight from an older epoch are lost with the connection.
	epoch uint64
	dir   [2]*dirLink // a→b, b→a
}

type router struct {
	id         uint32
	node       *linkstate.Node
	alive      bool
	advertised []encoding.Bloom
	// table is the PREDICATES table rebuilt from PredicateUpdates alone, to
	// check the update stream against Node.Predicates and the truth.
	table map[uint32][]encoding.Bloom
	links []*link
	group int // partition group; all routers share group 0 when merged
}

type delivery struct {
	at    time.Duration
	seq   uint64
	from  uint32
	to    uint32
	msg   linkstate.Message // nil: the stream from `from` closed
	l     *link
	epoch uint64
}

// Network is a deterministic in-memory mesh of linkstate routers with
// virtual time: deliveries wait in a priority queue ordered by time, and
// every router ticks every TickInterval. Links have a delay and a drop
// probability per direction and can be cut and healed; routers can be
// killed, stopped and restarted; the mesh can be partitioned. The same
// topology, options and operations always produce the same run.
type Network struct {
	opts     Options
	rng      *rand.Rand
	now      time.Duration
	nextTick time.Duration
	ticks    int64
	seq      uint64

	routers map[uint32]*router
	ids     []uint32 // ascending
	links   map[[2]uint32]*link
	queue   pq.Heap[delivery]
	control int // deliveries in flight other than hellos
	events  map[linkstate.EventType]int
	errs    []error
	dirty   map[uint32]bool
}

// New builds the network and brings every link up at time zero. Routers
// are not converged until the network runs.
func New(topo Topology, opts Options) (*Network, error) {
	if opts.TickInterval <= 0 {
		opts.TickInterval = 100 * time.Millisecond
	}
	if opts.Config == nil {
		opts.Config = func(id uint32) linkstate.Config {
			return linkstate.DefaultConfig(id, fmt.Sprintf("r%d", id))
		}
	}
	if err := topo.Validate(); err != nil {
		return nil, err
	}
	nw := &Network{
		queue:   pq.New(func(a, b delivery) bool { return a.at < b.at || a.at == b.at && a.seq < b.seq }, 64),
		opts:    opts,
		rng:     rand.New(rand.NewPCG(opts.Seed, 0x5eed)),
		routers: make(map[uint32]*router),
		links:   make(map[[2]uint32]*link),
		events:  make(map[linkstate.EventType]int),
		dirty:   make(map[uint32]bool),
	}
	nw.nextTick = opts.TickInterval
	for _, id := range topo.Routers {
		r := &router{id: id, alive: true}
		if err := nw.boot(r); err != nil {
			return nil, err
		}
		nw.routers[id] = r
		nw.ids = append(nw.ids, id)
	}
	slices.Sort(nw.ids)
	for _, tl := range topo.Links {
		l := &link{a: tl.A, b: tl.B, weight: tl.Weight}
		for i := range l.dir {
			l.dir[i] = &dirLink{delay: tl.Delay}
		}
		nw.links[[2]uint32{tl.A, tl.B}] = l
		nw.links[[2]uint32{tl.B, tl.A}] = l
		nw.routers[tl.A].links = append(nw.routers[tl.A].links, l)
		nw.routers[tl.B].links = append(nw.routers[tl.B].links, l)
		nw.connect(l)
	}
	nw.process()
	return nw, nil
}

func (nw *Network) boot(r *router) error {
	cfg := nw.opts.Config(r.id)
	// Links here carry link-state messages alone, no frames between
	// them: a router has no keepalives to promise, and its neighbours
	// would take the silence between its hellos for a failed link.
	cfg.Keepalive = 0
	n, err := linkstate.New(cfg)
	if err != nil {
		return fmt.Errorf("sim: router %d: %w", r.id, err)
	}
	if n.ID() != r.id {
		return fmt.Errorf("sim: Options.Config(%d) returned ID %d", r.id, n.ID())
	}
	r.node, r.advertised, r.table = n, nil, make(map[uint32][]encoding.Bloom)
	nw.dirty[r.id] = true
	return nil
}

// Now returns the virtual time.
func (nw *Network) Now() time.Duration { return nw.now }

// Ticks returns the number of tick rounds so far.
func (nw *Network) Ticks() int64 { return nw.ticks }

// Routers lists the routers' IDs in ascending order, dead ones included.
func (nw *Network) Routers() []uint32 { return slices.Clone(nw.ids) }

// Node returns a router's protocol state machine (the current incarnation).
func (nw *Network) Node(id uint32) *linkstate.Node { return nw.routers[id].node }

// Routes returns a router's current UNICAST table.
func (nw *Network) Routes(id uint32) *linkstate.Table { return nw.routers[id].node.Routes() }

// PredicateTable returns the PREDICATES table a router's driver built from
// its PredicateUpdates.
func (nw *Network) PredicateTable(id uint32) map[uint32][]encoding.Bloom {
	return maps.Clone(nw.routers[id].table)
}

// Advertised returns the filters a router was last given with
// SetPredicate in its current incarnation.
func (nw *Network) Advertised(id uint32) []encoding.Bloom { return nw.routers[id].advertised }

// Alive reports whether a router is running.
func (nw *Network) Alive(id uint32) bool { return nw.routers[id].alive }

// Errors returns the errors routers returned from inputs, other than
// messages from routers without a link (expected after a cut).
func (nw *Network) Errors() []error { return nw.errs }

// EventCount returns how many events of a type all routers reported.
func (nw *Network) EventCount(t linkstate.EventType) int { return nw.events[t] }

func (nw *Network) router(id uint32) *router {
	r := nw.routers[id]
	if r == nil {
		panic(fmt.Sprintf("sim: no router %d", id))
	}
	return r
}

func (nw *Network) link(a, b uint32) *link {
	l := nw.links[[2]uint32{a, b}]
	if l == nil {
		panic(fmt.Sprintf("sim: no link %d–%d", a, b))
	}
	return l
}

func (l *link) out(from uint32) *dirLink {
	if from == l.a {
		return l.dir[0]
	}
	return l.dir[1]
}

func (l *link) peer(id uint32) uint32 {
	if id == l.a {
		return l.b
	}
	return l.a
}

// connected reports whether the link's stream is up: both routers run and
// the link is not cut. A partition does not close streams; it loses their
// packets, as a WAN partition does.
func (nw *Network) connected(l *link) bool {
	return !l.cut && nw.routers[l.a].alive && nw.routers[l.b].alive
}

// Working reports whether messages can cross the link both ways: it is
// connected, not across a partition, and drops less than everything.
func (nw *Network) Working(a, b uint32) bool {
	l := nw.link(a, b)
	return nw.connected(l) && nw.routers[a].group == nw.routers[b].group &&
		l.dir[0].drop < 1 && l.dir[1].drop < 1
}

// connect opens the link's stream at both ends.
func (nw *Network) connect(l *link) {
	if !nw.connected(l) {
		return
	}
	l.epoch++
	for _, id := range []uint32{l.a, l.b} {
		r := nw.routers[id]
		if err := r.node.LinkUp(l.peer(id), l.weight, nw.now); err != nil {
			nw.errs = append(nw.errs, err)
		}
		nw.dirty[id] = true
	}
}

// disconnect closes the link's stream at the ends still running.
func (nw *Network) disconnect(l *link) {
	l.epoch++
	for _, id := range []uint32{l.a, l.b} {
		if r := nw.routers[id]; r.alive {
			r.node.LinkDown(l.peer(id), nw.now)
			nw.dirty[id] = true
		}
	}
}

// Cut breaks the link a–b: both ends see the stream close at once, and
// messages in flight are lost.
func (nw *Network) Cut(a, b uint32) {
	l := nw.link(a, b)
	if l.cut {
		return
	}
	wasUp := nw.connected(l)
	l.cut = true
	if wasUp {
		nw.disconnect(l)
	}
	nw.process()
}

// Heal restores a cut link; the ends reconnect if both run.
func (nw *Network) Heal(a, b uint32) {
	l := nw.link(a, b)
	if !l.cut {
		return
	}
	l.cut = false
	nw.connect(l)
	nw.process()
}

// SetWeight changes the configured weight of a–b, as an operator would,
// at both ends.
func (nw *Network) SetWeight(a, b uint32, w uint32) {
	l := nw.link(a, b)
	l.weight = w
	if nw.connected(l) {
		for _, id := range []uint32{a, b} {
			if err := nw.routers[id].node.LinkUp(l.peer(id), w, nw.now); err != nil {
				nw.errs = append(nw.errs, err)
			}
			nw.dirty[id] = true
		}
	}
	nw.process()
}

// SetDelay sets the one-way delay of a–b in both directions; measured RTT
// costs follow.
func (nw *Network) SetDelay(a, b uint32, d time.Duration) {
	l := nw.link(a, b)
	l.dir[0].delay, l.dir[1].delay = d, d
}

// SetDrop sets the probability that a message from→to is lost.
func (nw *Network) SetDrop(from, to uint32, p float64) {
	nw.link(from, to).out(from).drop = p
}

// Kill crashes a router: its neighbours see the streams close, messages to
// and from it in flight are lost, and it floods nothing.
func (nw *Network) Kill(id uint32) {
	r := nw.router(id)
	if !r.alive {
		return
	}
	var open []*link
	for _, l := range r.links {
		if nw.connected(l) {
			open = append(open, l)
		}
	}
	r.alive = false
	for _, l := range open {
		nw.disconnect(l)
	}
	nw.process()
}

// Stop shuts a router down gracefully: it floods its withdrawal, and its
// neighbours see the streams close after the withdrawal arrives.
func (nw *Network) Stop(id uint32) {
	r := nw.router(id)
	if !r.alive {
		return
	}
	r.node.Shutdown()
	nw.ready(r)
	r.alive = false
	for _, l := range r.links {
		if !l.cut && nw.routers[l.peer(id)].alive {
			nw.enqueue(id, l.peer(id), nil, l)
		}
	}
	nw.process()
}

// Restart boots a fresh incarnation of a dead router: an empty LSDB,
// sequence numbers from 1, no predicate. Its links reconnect.
func (nw *Network) Restart(id uint32) error {
	r := nw.router(id)
	if r.alive {
		return fmt.Errorf("sim: Restart(%d): router is running; Kill or Stop it first", id)
	}
	r.alive = true
	if err := nw.boot(r); err != nil {
		return err
	}
	r.node.Tick(nw.now)
	for _, l := range r.links {
		nw.connect(l)
	}
	nw.process()
	return nil
}

// Partition splits the routers into groups: messages between groups are
// lost without any stream closing, so adjacencies across the cut die by
// DeadInterval. Routers in no group form one more group together.
func (nw *Network) Partition(groups ...[]uint32) {
	for _, r := range nw.routers {
		r.group = 0
	}
	for i, g := range groups {
		for _, id := range g {
			nw.router(id).group = i + 1
		}
	}
}

// Merge undoes Partition.
func (nw *Network) Merge() { nw.Partition() }

// SetPredicate sets a router's encoded predicate.
func (nw *Network) SetPredicate(id uint32, filters []encoding.Bloom) error {
	r := nw.router(id)
	if !r.alive {
		return fmt.Errorf("sim: SetPredicate(%d): router is dead", id)
	}
	if err := r.node.SetLocalPredicate(filters); err != nil {
		return err
	}
	r.advertised = slices.Clone(filters)
	nw.dirty[id] = true
	nw.process()
	return nil
}

// RunFor advances virtual time by d, delivering messages and ticking
// routers on the way.
func (nw *Network) RunFor(d time.Duration) {
	end := nw.now + d
	for nw.step(end) {
	}
	nw.now = end
}

// step handles the next instant with something to do, if it is not after
// end: every delivery due then, or else a tick round.
func (nw *Network) step(end time.Duration) bool {
	next := nw.nextTick
	if nw.queue.Len() > 0 && nw.queue.Peek().at <= next {
		next = nw.queue.Peek().at
	}
	if next > end {
		return false
	}
	nw.now = next
	if nw.queue.Len() > 0 && nw.queue.Peek().at == next {
		// Everything due now is delivered before any router acts, so that
		// a burst of LSAs costs each router one SPF.
		for nw.queue.Len() > 0 && nw.queue.Peek().at == next {
			nw.deliver(nw.queue.Pop())
		}
	} else {
		nw.ticks++
		nw.nextTick += nw.opts.TickInterval
		for _, id := range nw.ids {
			if r := nw.routers[id]; r.alive {
				r.node.Tick(nw.now)
				nw.dirty[id] = true
			}
		}
	}
	nw.process()
	return true
}

// ErrNotConverged is returned by RunUntilConverged at its limit.
var ErrNotConverged = errors.New("sim: not converged")

// RunUntilConverged runs until Converged holds, checking after every
// instant at which something happened, and returns the virtual time it
// took, or ErrNotConverged with the first disagreement after limit.
func (nw *Network) RunUntilConverged(limit time.Duration) (time.Duration, error) {
	start := nw.now
	for {
		if why := nw.Disagreement(); why == "" {
			return nw.now - start, nil
		} else if !nw.step(start + limit) {
			nw.now = start + limit
			return limit, fmt.Errorf("%w after %v: %s", ErrNotConverged, limit, why)
		}
	}
}

// Converged reports whether the network is quiescent and its routers
// agree; see Disagreement.
func (nw *Network) Converged() bool { return nw.Disagreement() == "" }

// Disagreement returns "" when the network has converged — no control
// message other than hellos in flight, every adjacency up and advertised
// exactly where a link works, and every router of a connected component holding the same
// LSDB (so computing the same routes) — and otherwise the first reason it
// has not.
func (nw *Network) Disagreement() string {
	if nw.control > 0 {
		return fmt.Sprintf("%d control messages in flight", nw.control)
	}
	for _, id := range nw.ids {
		r := nw.routers[id]
		if !r.alive {
			continue
		}
		for _, nb := range r.node.Neighbors() {
			if want := nw.Working(id, nb.ID); want != (nb.State == linkstate.StateFull && nb.Advertised) {
				return fmt.Sprintf("router %d sees neighbour %d %s (advertised %v), link working=%v", id, nb.ID, nb.State, nb.Advertised, want)
			}
		}
	}
	for _, comp := range nw.Components() {
		d := nw.routers[comp[0]].node.Digest()
		for _, id := range comp[1:] {
			if nw.routers[id].node.Digest() != d {
				return fmt.Sprintf("routers %d and %d hold different LSDBs", comp[0], id)
			}
		}
	}
	return ""
}

// Components returns the live routers grouped by the working links that
// connect them, each group and the list sorted.
func (nw *Network) Components() [][]uint32 {
	seen := map[uint32]bool{}
	var out [][]uint32
	for _, id := range nw.ids {
		r := nw.routers[id]
		if seen[id] || !r.alive {
			continue
		}
		comp := []uint32{id}
		seen[id] = true
		for i := 0; i < len(comp); i++ {
			for _, l := range nw.routers[comp[i]].links {
				p := l.peer(comp[i])
				if !seen[p] && nw.Working(comp[i], p) {
					seen[p] = true
					comp = append(comp, p)
				}
			}
		}
		slices.Sort(comp)
		out = append(out, comp)
	}
	return out
}

// TrueLinks returns the links that work, as the routers should see them
// after convergence.
func (nw *Network) TrueLinks() []Link {
	var out []Link
	for k, l := range nw.links {
		if k[0] == l.a && nw.Working(l.a, l.b) {
			out = append(out, Link{A: l.a, B: l.b, Weight: l.weight, Delay: l.dir[0].delay})
		}
	}
	slices.SortFunc(out, func(x, y Link) int {
		return cmp.Or(cmp.Compare(x.A, y.A), cmp.Compare(x.B, y.B))
	})
	return out
}

// process drains the Ready of every router an input touched, in ID order.
func (nw *Network) process() {
	for len(nw.dirty) > 0 {
		ids := make([]uint32, 0, len(nw.dirty))
		for id := range nw.dirty {
			ids = append(ids, id)
		}
		clear(nw.dirty)
		slices.Sort(ids)
		for _, id := range ids {
			nw.ready(nw.routers[id])
		}
	}
}

func (nw *Network) ready(r *router) {
	for r.node.HasReady() {
		rd := r.node.Ready()
		if nw.opts.OnReady != nil {
			nw.opts.OnReady(r.id, rd)
		}
		if r.alive {
			for _, env := range rd.Messages {
				nw.enqueue(r.id, env.To, env.Msg, nw.links[[2]uint32{r.id, env.To}])
			}
		}
		for _, u := range rd.PredicateUpdates {
			if u.Removed {
				delete(r.table, u.Router)
			} else {
				r.table[u.Router] = u.Filters
			}
		}
		for _, e := range rd.Events {
			nw.events[e.Type]++
		}
		r.node.Advance()
	}
}

// enqueue puts a message (or, with msg nil, a stream close) on the link.
func (nw *Network) enqueue(from, to uint32, msg linkstate.Message, l *link) {
	if l == nil {
		nw.errs = append(nw.errs, fmt.Errorf("sim: router %d sent to %d without a link", from, to))
		return
	}
	d := l.out(from)
	if msg != nil {
		d.stats.count(msg)
		if !nw.routers[from].alive || !nw.connected(l) || nw.routers[from].group != nw.routers[to].group ||
			d.drop > 0 && nw.rng.Float64() < d.drop {
			d.stats.Dropped++
			return
		}
	}
	at := max(nw.now+d.delay, d.lastAt)
	d.lastAt = at
	nw.seq++
	nw.queue.Push(delivery{at: at, seq: nw.seq, from: from, to: to, msg: msg, l: l, epoch: l.epoch})
	if isControl(msg) {
		nw.control++
	}
}

func isControl(m linkstate.Message) bool {
	_, hello := m.(*linkstate.Hello)
	return m != nil && !hello
}

func (nw *Network) deliver(d delivery) {
	if isControl(d.msg) {
		nw.control--
	}
	from, to := nw.routers[d.from], nw.routers[d.to]
	if d.msg == nil { // the stream from a stopped router closes
		if to.alive && d.epoch == d.l.epoch {
			d.l.epoch++
			to.node.LinkDown(d.from, nw.now)
			nw.dirty[d.to] = true
		}
		return
	}
	// Lost with the connection, or with the partition that arose while it
	// was in flight.
	if d.epoch != d.l.epoch || !to.alive || from.group != to.group {
		d.l.out(d.from).stats.Dropped++
		return
	}
	err := to.node.Step(d.from, d.msg, nw.now)
	if err != nil && !errors.Is(err, linkstate.ErrUnknownPeer) && !errors.Is(err, linkstate.ErrShutdown) {
		nw.errs = append(nw.errs, fmt.Errorf("sim: router %d at %v: %w", d.to, nw.now, err))
	}
	nw.dirty[d.to] = true
}
