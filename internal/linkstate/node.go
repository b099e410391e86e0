package linkstate

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/dripmesh/drip/internal/encoding"
)

// ErrUnknownPeer is returned by Step for a message from a router that has
// no link (no LinkUp, or a LinkDown since). Messages still in flight when a
// link goes down produce it; drivers usually count and drop them.
var ErrUnknownPeer = errors.New("linkstate: message from a router without a link")

// ErrShutdown is returned by inputs after Shutdown.
var ErrShutdown = errors.New("linkstate: router is shut down")

// Ready is what the node asks its driver to do. The driver sends Messages
// (in order per neighbour), applies PredicateUpdates to its PREDICATES
// table, takes Routes() when RoutesChanged, logs or counts Events, and then
// calls Advance. The slices are the driver's after Ready; the messages and
// filters in them are shared and must not be modified.
type Ready struct {
	Messages []Envelope
	// RoutesChanged says Routes() returns a new table.
	RoutesChanged bool
	// PredicateUpdates change the published PREDICATES table, in ascending
	// router order: each replaces a router's row or removes it.
	PredicateUpdates []PredicateUpdate
	Events           []Event
}

// PredicateUpdate sets or removes one row of the PREDICATES table
// (Carzaniga09 §2.2). A row exists for every router that is reachable (or is
// this router), advertises a predicate, and shares this router's Bloom
// parameters. Filters may be empty: the router has no subscribers.
type PredicateUpdate struct {
	Router  uint32
	Filters []encoding.Bloom
	// Classes are the router's QoS classes (docs/design.md §11).
	Classes []QoSClass
	Removed bool
}

// published is the state of one published PREDICATES row.
type published struct {
	ad  *PredAd
	sum uint64
}

// Node is one router's link-state protocol: a deterministic state machine
// without goroutines, clock or I/O. The driver feeds it time (Tick), link
// events (LinkUp, LinkDown), messages (Step) and the local predicate, and
// after each input drains Ready and calls Advance. A Node is not safe for
// concurrent use; Tables it returns are.
type Node struct {
	cfg     Config
	now     time.Duration
	started bool
	// lastTick is the time of the previous Tick, which tells whether this
	// one comes on time (watchSilence).
	lastTick time.Duration
	stopped  bool

	nbrs   map[uint32]*neighbor
	nbrIDs []uint32 // ascending, so every output order is deterministic

	lsdb       map[Key]*entry
	dbFilters  int // of the predicate advertisements in lsdb (filters)
	digest     uint64
	nextExpiry time.Duration // earliest expiry of another router's entry; 0: none

	lsaDirty    bool // adjacencies or costs changed since the own LSA
	lsaForce    bool // originate even if unchanged (refresh, sequence jump)
	lsaMinSeq   uint64
	nextRefresh time.Duration
	// nextCostCheck is when CostInterval's periodic cost check is due.
	nextCostCheck time.Duration

	topoDirty bool
	predAll   bool
	predDirty map[uint32]bool
	table     *Table
	published map[uint32]published
	reported  map[uint32]uint64 // origin → seq of an ad already reported with other Params

	msgs          []Envelope
	events        []Event
	preds         []PredicateUpdate
	routesChanged bool
	handed        struct{ msgs, events, preds int } // given out by Ready
}

// New returns a router that knows only itself: it has originated an LSA
// without links and an empty predicate advertisement, and its routing
// table holds itself.
func New(cfg Config) (*Node, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	n := &Node{
		cfg:       cfg,
		nbrs:      make(map[uint32]*neighbor),
		lsdb:      make(map[Key]*entry),
		predDirty: make(map[uint32]bool),
		published: make(map[uint32]published),
		reported:  make(map[uint32]uint64),
	}
	n.table = newTable(cfg.ID, newGraph(cfg.ID, nil))
	n.lsaForce = true
	n.originateLSA()
	n.originatePred(nil, nil, 0)
	return n, nil
}

// ID returns the router's ID.
func (n *Node) ID() uint32 { return n.cfg.ID }

// Config returns the configuration the node runs with.
func (n *Node) Config() Config { return n.cfg }

// clock moves the node's time forward. Time never goes back: an older now
// is taken as the latest one seen, so a driver's jittery clock cannot
// reorder timers.
func (n *Node) clock(now time.Duration) {
	if !n.started {
		n.started = true
		n.now = now
		// Own entries were created before time was known; they are born now.
		for _, e := range n.lsdb {
			e.bornAt = now
		}
		// Routers started together would refresh together and send their
		// floods in one burst; a fixed per-ID offset of up to a quarter
		// interval spreads them and stays reproducible.
		jitter := time.Duration(mix64(uint64(n.cfg.ID)) % uint64(n.cfg.RefreshInterval/4+1))
		n.nextRefresh = now + n.cfg.RefreshInterval - jitter
		if n.cfg.CostInterval > 0 {
			// Periodic checks of different routers are not synchronised
			// either (Kim10 §3: each broker probes on its own).
			n.nextCostCheck = now + n.cfg.CostInterval - time.Duration(mix64(uint64(n.cfg.ID)+1)%uint64(n.cfg.CostInterval))
		}
		return
	}
	if now > n.now {
		n.now = now
	}
}

// Tick advances time: it sends due hellos, suspects links silent for a few
// keepalives (Config.SuspectMultiplier), drops neighbours silent for
// DeadInterval, refreshes the own advertisements and ages out entries of
// routers that stopped refreshing theirs. Call it often relative to
// HelloInterval (every 100 ms, say); timers fire at the first Tick after
// they are due.
func (n *Node) Tick(now time.Duration) {
	if n.stopped {
		return
	}
	n.clock(now)
	since := n.now - n.lastTick
	if n.lastTick == 0 {
		since = 0
	}
	n.lastTick = n.now
	for _, id := range n.nbrIDs {
		nb := n.nbrs[id]
		n.watchSilence(nb, since)
		if nb.state != StateDown && (n.now-nb.lastHeard >= n.cfg.DeadInterval || n.now-nb.lastHello >= helloSilence*n.cfg.DeadInterval) {
			n.neighborDead(nb)
		}
		if n.now >= nb.nextHello {
			n.sendHello(nb)
		}
	}
	n.checkCosts()
	if n.now >= n.nextRefresh {
		n.nextRefresh = n.now + n.cfg.RefreshInterval
		n.lsaForce = true
		own := n.lsdb[Key{KindPredicate, n.cfg.ID}]
		n.originatePred(own.pred.Filters, own.pred.Classes, 0)
	}
	if n.nextExpiry != 0 && n.now >= n.nextExpiry {
		n.expire()
	}
	n.flush()
}

// helloSilence is how many dead intervals frames alone (Alive) keep an
// adjacency up without a hello: a neighbour whose routing has stopped while
// its links still carry data is dead to routing, however busy.
const helloSilence = 3

// Alive tells the protocol that a frame of any kind arrived from the
// neighbour peer at time at, which need not be the latest time seen. It
// keeps an adjacency that is not down from dying while the neighbour's
// hellos are late — queued behind other frames, or behind the driver's own
// backlog — for up to helloSilence dead intervals since the last hello
// (docs/design.md §3). It never brings an adjacency up: that takes hellos
// both ways. Unknown peers and stopped nodes are ignored.
func (n *Node) Alive(peer uint32, at time.Duration) {
	nb := n.nbrs[peer]
	if n.stopped || nb == nil || nb.state == StateDown {
		return
	}
	n.clock(at)
	nb.lastHeard = max(nb.lastHeard, min(at, n.now))
}

// Step processes a message received from the neighbour from. It returns
// ErrUnknownPeer for a router without a link, and an error naming the
// problem for a malformed message, which it ignores.
func (n *Node) Step(from uint32, msg Message, now time.Duration) error {
	if n.stopped {
		return ErrShutdown
	}
	n.clock(now)
	nb := n.nbrs[from]
	if nb == nil {
		return fmt.Errorf("%w: router %d", ErrUnknownPeer, from)
	}
	var err error
	switch m := msg.(type) {
	case *Hello:
		err = n.stepHello(nb, m)
	case *LSA:
		if err = validateLSA(m); err == nil {
			err = n.admitLSA(m)
		}
		if err == nil {
			err = n.receive(nb, newLSAEntry(m, n.now))
		}
	case *PredAd:
		if err = validatePredAd(m); err == nil {
			err = n.admitID("predicate advertisement", m.Origin)
		}
		if err == nil {
			err = n.receive(nb, newPredEntry(m, n.now))
		}
	case *SummedPredAd:
		if err = validatePredAd(m.Ad); err == nil {
			err = n.admitID("predicate advertisement", m.Ad.Origin)
		}
		if err == nil {
			err = n.receive(nb, newPredEntrySum(m.Ad, m.Sum, n.now))
		}
	case *OversizedAd:
		err = &LimitError{Origin: m.Origin, Seq: m.Seq, Err: fmt.Errorf("%d filters in %d bytes, over the limit of %s", m.Filters, m.Bytes, m.Limit)}
	case *DBSummary:
		n.stepSummary(nb, n.admitSummary(m))
	case *DBRequest:
		n.stepRequest(nb, m)
	default:
		err = fmt.Errorf("linkstate: unknown message type %T from router %d", msg, from)
	}
	n.flush()
	if err != nil {
		return fmt.Errorf("linkstate: from router %d: %w", from, err)
	}
	return nil
}

// beyond reports whether id is past Config.MaxRouterID.
func (n *Node) beyond(id uint32) bool { return n.cfg.MaxRouterID != 0 && id > n.cfg.MaxRouterID }

// admitID refuses a router ID beyond Config.MaxRouterID.
func (n *Node) admitID(what string, id uint32) error {
	if n.beyond(id) {
		return fmt.Errorf("%s of router %d: router ID beyond the largest admitted, %d", what, id, n.cfg.MaxRouterID)
	}
	return nil
}

// admitLSA refuses an LSA whose origin or a link's far end is beyond
// Config.MaxRouterID.
func (n *Node) admitLSA(a *LSA) error {
	if err := n.admitID("LSA", a.Origin); err != nil {
		return err
	}
	for _, l := range a.Links {
		if n.beyond(l.Neighbor) {
			return fmt.Errorf("LSA of router %d lists a link to router %d, beyond the largest admitted, %d", a.Origin, l.Neighbor, n.cfg.MaxRouterID)
		}
	}
	return nil
}

// admitSummary leaves out of a database summary the entries of routers
// beyond Config.MaxRouterID, which would be refused when they came.
func (n *Node) admitSummary(m *DBSummary) *DBSummary {
	beyond := func(e Summary) bool { return n.beyond(e.Origin) }
	if !slices.ContainsFunc(m.Entries, beyond) {
		return m
	}
	return &DBSummary{Entries: slices.DeleteFunc(slices.Clone(m.Entries), beyond)}
}

// LinkUp tells the node a link to peer is established (the peer stream is
// connected). The node starts sending hellos; the adjacency comes up when
// hellos flow both ways. weight is the link's cost in CostWeight mode and
// its initial cost in CostRTT mode until the first RTT sample. Calling
// LinkUp again for a live link changes its weight.
func (n *Node) LinkUp(peer uint32, weight uint32, now time.Duration) error {
	if n.stopped {
		return ErrShutdown
	}
	if peer == n.cfg.ID {
		return fmt.Errorf("linkstate: LinkUp(%d): a router cannot link to itself", peer)
	}
	if weight == 0 {
		return fmt.Errorf("linkstate: LinkUp(%d): weight 0, want at least 1", peer)
	}
	if err := n.admitID("link", peer); err != nil {
		return fmt.Errorf("linkstate: LinkUp(%d): %w", peer, err)
	}
	n.clock(now)
	if nb := n.nbrs[peer]; nb != nil {
		nb.weight = weight
		if n.cfg.CostMode == CostWeight {
			n.setCost(nb, weight)
		}
		n.flush()
		return nil
	}
	nb := &neighbor{id: peer, weight: weight, cost: weight}
	n.nbrs[peer] = nb
	i, _ := slices.BinarySearch(n.nbrIDs, peer)
	n.nbrIDs = slices.Insert(n.nbrIDs, i, peer)
	n.sendHello(nb)
	n.flush()
	return nil
}

// LinkDown tells the node the link to peer is gone (the stream closed). The
// adjacency drops at once, without waiting for DeadInterval.
func (n *Node) LinkDown(peer uint32, now time.Duration) {
	if n.stopped {
		return
	}
	n.clock(now)
	nb := n.nbrs[peer]
	if nb == nil {
		return
	}
	if nb.state == StateFull {
		n.adjacencyDown(nb, DownLink)
	}
	delete(n.nbrs, peer)
	i, _ := slices.BinarySearch(n.nbrIDs, peer)
	n.nbrIDs = slices.Delete(n.nbrIDs, i, i+1)
	n.flush()
}

// SetLocalPredicate replaces the router's encoded predicate, the Bloom
// filters of its local subscribers (Carzaniga09 §2.2), and its QoS classes,
// the filters of subscribers with a deadline or two paths (docs/design.md
// §11), and floods them if they changed. The filters must be encoded with
// Config.Encoding; the node keeps a copy. Classes may come in any order;
// empty ones are dropped, and at most 16 may remain. It takes effect at
// the time of the latest input.
func (n *Node) SetLocalPredicate(filters []encoding.Bloom, classes ...QoSClass) error {
	if n.stopped {
		return ErrShutdown
	}
	var pos []int
	for i, f := range filters {
		pos = f.AppendPositions(pos[:0])
		if len(pos) > 0 && pos[len(pos)-1] >= n.cfg.Encoding.M {
			return fmt.Errorf("linkstate: SetLocalPredicate: filter %d has bit %d set, beyond M=%d of Config.Encoding",
				i, pos[len(pos)-1], n.cfg.Encoding.M)
		}
	}
	cs, err := normalizeClasses(classes, n.cfg.Encoding.M)
	if err != nil {
		return err
	}
	ad := &PredAd{Origin: n.cfg.ID, Params: n.cfg.Encoding, Filters: slices.Clone(filters), Classes: cs, Seq: 1}
	if err := validateClasses(ad); err != nil {
		return fmt.Errorf("linkstate: SetLocalPredicate: %w", err)
	}
	if k := (&entry{pred: ad}).filters(); n.cfg.MaxFilters > 0 && k > n.cfg.MaxFilters {
		return fmt.Errorf("linkstate: SetLocalPredicate: %d filters, over the limit of %d per advertisement, which other routers would refuse", k, n.cfg.MaxFilters)
	}
	if ad.Checksum() == n.lsdb[Key{KindPredicate, n.cfg.ID}].sum {
		return nil
	}
	n.originatePred(ad.Filters, ad.Classes, 0)
	return nil
}

// Shutdown floods a withdrawn LSA and predicate advertisement so the mesh
// forgets this router at once instead of after DeadInterval, and stops the
// node: later inputs are ignored or fail with ErrShutdown. Drain Ready
// once more to send the withdrawals.
func (n *Node) Shutdown() {
	if n.stopped {
		return
	}
	for _, id := range n.nbrIDs {
		if nb := n.nbrs[id]; nb.state == StateFull {
			n.events = append(n.events, Event{Type: EventAdjacencyDown, Peer: id, Reason: DownShutdown})
		}
	}
	n.stopped = true
	n.lsaForce = true
	n.originateLSA()
	n.originatePred(nil, nil, 0)
	for _, nb := range n.nbrs {
		nb.state = StateDown
	}
}

// HasReady reports whether Ready has anything for the driver. It runs a
// pending SPF to know whether routes changed.
func (n *Node) HasReady() bool {
	n.compute()
	return len(n.msgs) > n.handed.msgs || len(n.events) > n.handed.events ||
		len(n.preds) > n.handed.preds || n.routesChanged
}

// Ready returns the pending outputs, running SPF first if the topology
// changed since the last Ready: however many LSAs one input brought, SPF
// runs once.
func (n *Node) Ready() Ready {
	n.compute()
	n.handed.msgs, n.handed.events, n.handed.preds = len(n.msgs), len(n.events), len(n.preds)
	return Ready{
		Messages:         n.msgs[:len(n.msgs):len(n.msgs)],
		RoutesChanged:    n.routesChanged,
		PredicateUpdates: n.preds[:len(n.preds):len(n.preds)],
		Events:           n.events[:len(n.events):len(n.events)],
	}
}

// Advance acknowledges the last Ready: its outputs are done.
func (n *Node) Advance() {
	n.msgs = rest(n.msgs, n.handed.msgs)
	n.events = rest(n.events, n.handed.events)
	n.preds = rest(n.preds, n.handed.preds)
	n.routesChanged = false
	n.handed.msgs, n.handed.events, n.handed.preds = 0, 0, 0
}

// rest drops the first k items. It never reuses the backing array, which
// the driver still holds through the Ready it was given.
func rest[T any](s []T, k int) []T {
	if k >= len(s) {
		return nil
	}
	return slices.Clone(s[k:])
}

// Routes returns the current UNICAST table. It changes only in Ready.
func (n *Node) Routes() *Table { return n.table }

// Predicates returns a copy of the published PREDICATES table: router →
// filters. The filter slices are shared and must not be modified.
func (n *Node) Predicates() map[uint32][]encoding.Bloom {
	out := make(map[uint32][]encoding.Bloom, len(n.published))
	for id, p := range n.published {
		out[id] = p.ad.Filters
	}
	return out
}

// compute runs SPF when the topology changed and republishes predicates
// whose advertisement or reachability changed.
func (n *Node) compute() {
	if n.topoDirty {
		n.topoDirty = false
		g := newGraph(n.cfg.ID, n.liveLSAs())
		if g.print != n.table.g.print || !slices.Equal(g.ids, n.table.g.ids) {
			n.table = newTable(n.cfg.ID, g)
			n.routesChanged = true
			n.predAll = true
			n.events = append(n.events, Event{Type: EventSPF, Routers: n.table.Known()})
		}
	}
	if n.predAll || len(n.predDirty) > 0 {
		n.publish()
	}
}

// liveLSAs returns the LSAs SPF uses, in no particular order.
func (n *Node) liveLSAs() []*LSA {
	out := make([]*LSA, 0, len(n.lsdb)/2+1)
	for k, e := range n.lsdb {
		if k.Kind == KindRouter && !e.lsa.Withdrawn {
			out = append(out, e.lsa)
		}
	}
	return out
}

// publish brings the published PREDICATES rows up to date for the routers
// whose advertisement changed, or for all after a topology change: routers
// that became unreachable leave the table at once (their entries stay in
// the LSDB until MaxAge, and come back if they become reachable again).
func (n *Node) publish() {
	var ids []uint32
	if n.predAll {
		for k := range n.lsdb {
			if k.Kind == KindPredicate {
				ids = append(ids, k.Origin)
			}
		}
		for id := range n.published {
			if n.lsdb[Key{KindPredicate, id}] == nil {
				ids = append(ids, id)
			}
		}
	} else {
		for id := range n.predDirty {
			ids = append(ids, id)
		}
	}
	n.predAll = false
	clear(n.predDirty)
	slices.Sort(ids)
	for _, id := range ids {
		var e *entry
		if c := n.lsdb[Key{KindPredicate, id}]; c != nil && !c.pred.Withdrawn &&
			(id == n.cfg.ID || n.table.Reachable(id)) {
			e = c
		}
		if e != nil && e.pred.Params != n.cfg.Encoding {
			if n.reported[id] != e.seq {
				n.reported[id] = e.seq
				n.events = append(n.events, Event{Type: EventParamsMismatch, Peer: id, Seq: e.seq})
			}
			e = nil
		}
		old, had := n.published[id]
		switch {
		case e != nil:
			n.published[id] = published{ad: e.pred, sum: e.sum}
			// A refresh (same contents, new seq) is not an update.
			if !had || old.sum != e.sum {
				n.preds = append(n.preds, PredicateUpdate{Router: id, Filters: e.pred.Filters, Classes: e.pred.Classes})
			}
		case had:
			delete(n.published, id)
			n.preds = append(n.preds, PredicateUpdate{Router: id, Removed: true})
		}
	}
}

// LSDBSize returns the number of entries in the link-state database (two
// per known router: its LSA and its predicate advertisement).
func (n *Node) LSDBSize() int { return len(n.lsdb) }

// Digest returns the LSDB digest carried in hellos: the sum of a hash of
// (kind, origin, seq, checksum) over all entries. Equal databases have
// equal digests.
func (n *Node) Digest() uint64 { return n.digest }

// Summaries lists the LSDB entries in (kind, origin) order.
func (n *Node) Summaries() []Summary {
	out := make([]Summary, 0, len(n.lsdb))
	for _, e := range n.sortedEntries() {
		out = append(out, e.summary())
	}
	return out
}

// LSA returns the stored LSA of origin, if any. It must not be modified.
func (n *Node) LSA(origin uint32) (*LSA, bool) {
	e := n.lsdb[Key{KindRouter, origin}]
	if e == nil {
		return nil, false
	}
	return e.lsa, true
}
