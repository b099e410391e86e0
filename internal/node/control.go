package node

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/dripmesh/drip/internal/encoding"
	"github.com/dripmesh/drip/internal/linkstate"
)

// LinkUp tells the node that l is established. A second link to the same
// neighbour replaces the first. The link's cost is the configured
// neighbour's weight (Peer.Weight; 1 for a neighbour not configured here).
func (n *Node) LinkUp(l Link) {
	now := n.now()
	peer := l.Peer()
	if old := n.current[peer]; old != nil {
		n.ls.LinkDown(peer, now)
	}
	n.current[peer] = l
	n.heldSeq[peer] = 0
	if lsa, ok := n.ls.LSA(peer); ok {
		n.heldSeq[peer] = lsa.Seq
	}
	n.publishLinks()
	if !n.withdrawn {
		if err := n.ls.LinkUp(peer, n.weightOf(peer), now); err != nil {
			n.log.Warn("link-state refused link", zap.String("peer", l.Name()), zap.Error(err))
		}
	}
	n.flush()
}

// LinkDown tells the node that l has ended. A link that was already
// replaced is ignored.
func (n *Node) LinkDown(l Link) {
	peer := l.Peer()
	// After the routes have moved off the link, when it was current.
	defer n.resendUnsent(l)
	if n.current[peer] != l {
		return
	}
	delete(n.current, peer)
	delete(n.heldSeq, peer)
	// What the protocol measured of the link goes with it, unless another
	// link carries the name.
	if !slices.ContainsFunc(slices.Collect(maps.Values(n.current)), func(o Link) bool { return o.Name() == l.Name() }) {
		n.m.linkRTT.DeleteLabelValues(l.Name())
		n.m.linkCost.DeleteLabelValues(l.Name())
	}
	for r := range n.refusedLogged {
		if r.peer == peer {
			delete(n.refusedLogged, r)
		}
	}
	n.publishLinks()
	n.ls.LinkDown(peer, n.now())
	n.flush()
}

// weightOf is the configured cost of the link to a neighbour.
func (n *Node) weightOf(peer uint32) uint32 {
	for _, p := range n.cfg.Peers {
		if p.ID == peer && p.Weight > 0 {
			return p.Weight
		}
	}
	return 1
}

// publishLinks hands the data plane a fresh copy of the link set.
func (n *Node) publishLinks() {
	m := make(map[uint32]Link, len(n.current))
	for id, l := range n.current {
		m[id] = l
	}
	n.links.Store(&m)
}

// Control processes the control messages of one frame from l, which the
// link decoded.
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
			l.Finish()
		}
		err := n.ls.Step(l.Peer(), msg, now)
		var refused *linkstate.AuthError
		var limit *linkstate.LimitError
		switch {
		case errors.As(err, &refused):
			n.refused(l, refused.Reason, err)
		case errors.As(err, &limit):
			n.refused(l, refusedLimit, err)
		case err != nil && !errors.Is(err, linkstate.ErrShutdown):
			n.log.Debug("control message ignored", zap.String("peer", l.Name()), zap.Error(err))
		}
	}
	n.flush()
}

// refused counts an advertisement the link-state core refused (its
// signature, certificate or identity did not check out, or it had none;
// or it was over the limits of its size) and logs it once per neighbour,
// reason and refusedLogInterval.
func (n *Node) refused(l Link, reason string, err error) {
	n.m.adsRefused.WithLabelValues(reason).Inc()
	k, now := refusal{l.Peer(), reason}, n.clock.Now()
	if last, ok := n.refusedLogged[k]; ok && now.Sub(last) < refusedLogInterval {
		return
	}
	n.refusedLogged[k] = now
	msg := "advertisement refused: a neighbour sent one its origin did not sign (more of this reason from it are counted, not logged, for a minute)"
	if reason == refusedLimit {
		msg = "advertisement refused: a neighbour sent one over the limits of what a broker holds (more from it are counted, not logged, for a minute)"
	}
	n.log.Warn(msg, zap.String("peer", l.Name()), zap.String("reason", reason), zap.Error(err))
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
		if at := l.LastReceived(); at > 0 {
			age := max(0, time.Duration(l.Now()-at))
			n.ls.Alive(peer, now-age)
		}
	}
}

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
	n.advanceDrain()
	n.processReady(now)
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

func (n *Node) processReady(now time.Time) {
	for n.ls.HasReady() {
		rd := n.ls.Ready()
		n.sendControl(rd.Messages)
		// Once withdrawn, the protocol's tables shrink to this router alone;
		// the data plane keeps the last real ones for the bundles still on
		// their way.
		if rd.RoutesChanged && !n.withdrawn {
			t := n.ls.Routes()
			n.retire(n.routes.Load(), now)
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
			filters := n.matchAll.apply(u)
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
		n.budget.holdTables(int64(n.ls.DatabaseFilters()) * filterCost)
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
		lsa, ok := n.ls.LSA(peer)
		if !ok || lsa.Seq <= n.heldSeq[peer] {
			continue
		}
		n.heldSeq[peer] = lsa.Seq
		switch {
		case lsa.Withdrawn && !l.Finishing():
			l.Finish()
		case !lsa.Withdrawn && l.Finishing():
			l.Close(errors.New("neighbour advertised itself again after withdrawing"))
		}
	}
}

func (n *Node) sendControl(envs []linkstate.Envelope) {
	for _, env := range envs {
		l := n.current[env.To]
		if l == nil {
			continue
		}
		if err := l.SendControl(env.Msg); err != nil {
			n.log.Error("cannot encode control message", zap.Error(err))
		}
	}
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
		// From 0, so that the first suspicion shows in a rate; 0 is
		// "never" for the time.
		n.m.linkSuspected.WithLabelValues(name)
		n.m.linkSuspectedAt.WithLabelValues(name)
	case linkstate.EventAdjacencyDown:
		n.log.Info("adjacency down", zap.String("peer", name), zap.Stringer("reason", ev.Reason))
	case linkstate.EventLinkSuspect:
		n.log.Info("link silent: routed around until the peer is heard again",
			zap.String("peer", name), zap.Duration("silence", ev.RTT))
		n.m.linkSuspected.WithLabelValues(name).Inc()
		n.m.linkSuspectedAt.WithLabelValues(name).Set(float64(n.clock.Now().UnixNano()) / 1e9)
		n.replayLink(ev.Peer, ev.RTT)
	case linkstate.EventLinkRestored:
		n.log.Info("link heard again: back in routes", zap.String("peer", name), zap.Duration("after", ev.RTT))
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
	filters, classes := n.withinLimit(encoding.Advertise(all), classes)
	n.m.advertised.Set(float64(len(filters)))
	n.m.advertisements.Inc()
	if err := n.ls.SetLocalPredicate(filters, classes...); err != nil {
		n.log.Error("cannot advertise local predicate", zap.Error(err))
	}
}

// setDelayBudgets gives every link the delay budget its deadline traffic
// asked for since the last call, or none when it carried none.
func (n *Node) setDelayBudgets() {
	got := n.budgets.take()
	for peer := range n.current {
		// A budget at or below zero cannot be kept by any delay: leave
		// the link to the periodic best path rather than flap it.
		n.ls.SetDelayBudget(peer, max(got[peer], 0))
	}
}

// withinLimit coarsens the node's own advertisement to what its
// neighbours take (linkstate.Config.MaxFilters), merging filters
// (encoding.Coarsen): its subscribers keep every message they matched and
// their broker takes some more, which the exact match at delivery drops.
// The QoS classes keep at most half of the bound between them.
func (n *Node) withinLimit(filters []encoding.Bloom, classes []linkstate.QoSClass) ([]encoding.Bloom, []linkstate.QoSClass) {
	limit := n.cfg.LinkState.MaxFilters
	inClasses := 0
	for _, c := range classes {
		inClasses += len(c.Filters)
	}
	if limit <= 0 || len(filters)+inClasses <= limit {
		return filters, classes
	}
	had := len(filters) + inClasses
	if inClasses > limit/2 {
		per := max(1, limit/2/len(classes))
		coarse := make([]linkstate.QoSClass, len(classes))
		inClasses = 0
		for i, c := range classes {
			c.Filters = encoding.Coarsen(c.Filters, per)
			coarse[i] = c
			inClasses += len(c.Filters)
		}
		classes = coarse
	}
	filters = encoding.Coarsen(filters, max(1, limit-inClasses))
	n.coarsenLog.Do(func() {
		n.log.Warn("local subscriptions encode to more filters than an advertisement may carry; advertising them merged, which draws this broker some messages its subscribers do not match",
			zap.Int("filters", had), zap.Int("advertised", len(filters)+inClasses), zap.Int("limit", limit))
	})
	return filters, classes
}
