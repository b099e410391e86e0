package node

import (
	"bytes"
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/dripmesh/drip/internal/dedup"
	"github.com/dripmesh/drip/internal/linkstate"
	"github.com/dripmesh/drip/internal/wire"
)

// Bundles cannot lie about where they come from (docs/security.md). B-DRP
// forwards a message along the shortest paths from its ingress broker, and
// every broker computes the same unique paths (linkstate's doc), so a
// neighbour may send this broker a bundle of its own messages, or one of
// another source's only if it is this broker's reverse path from that
// source: the check of unicast reverse-path forwarding, made against the
// link-state database. Without it a neighbour with a valid certificate
// could inject messages in another broker's name — past that broker's
// authorization of its publishers — or stamps that poison the duplicate
// filter. What a compromised broker still can is publish as itself, and,
// on the paths that run through it, drop or delay what it forwards and
// speak for those paths' sources.
//
// While link state floods, routers disagree, and a neighbour routes on
// what has not reached this broker yet, or on what it left behind: a
// bundle is also taken in on the routes this broker replaced within
// retiredRoutesFor, and one that none of them confirms waits a little for
// the routes to change (unverified.go). Only then is it dropped. A
// neighbour that was on a source's path lately may therefore still send
// that source's bundles for as long.
//
// The stamp's boot epoch is held to the source's incarnation as its LSA
// numbers it (linkstate.Config.Incarnation, signed with the LSA where
// advertisements are signed): a later epoch is one the source has not
// booted with yet, which would evict the windows of its real epochs from
// the duplicate filter and have its messages dropped as stale.

// admitSource says whether bundle b, received from the neighbour from in
// its wire form raw, may be taken in now. A bundle the routes do not
// confirm waits for them to change (unverified.go) until until, or
// unverifiedHoldFor when until is zero (it has not waited yet), and is
// then counted and dropped.
func (n *Node) admitSource(from Link, raw []byte, b *wire.Bundle, routes *linkstate.Table, until time.Time) bool {
	peer, s := from.Peer(), b.Stamp
	reason := refusedReversePath
	if s.Origin != n.cfg.ID {
		if reason = sourceRefusal(peer, b, routes); reason == "" {
			return true
		}
	}
	if n.sent.sent(s, b.Message) {
		return true // back from a neighbour whose routes disagree (own.go)
	}
	if s.Origin == n.cfg.ID {
		return n.refuseSource(from, s, reason)
	}
	now := n.clock.Now()
	recent := n.recentRoutes(routes, now)
	for _, t := range recent[1:] {
		if sourceRefusal(peer, b, t) == "" {
			return true
		}
	}
	if n.rerouted(peer, b, recent[:min(len(recent), reroutedTables)]) {
		return true
	}
	if until.IsZero() {
		until = now.Add(unverifiedHoldFor)
	}
	// A copy: what aliases the frame would keep all of it alive.
	if now.Before(until) && n.unverified.add(unverifiedBundle{from: from, raw: bytes.Clone(raw), routes: routes, until: until}) {
		return false
	}
	return n.refuseSource(from, s, reason)
}

// refuseSource counts and logs a refused bundle; it returns false.
func (n *Node) refuseSource(from Link, s dedup.Stamp, reason string) bool {
	n.m.bundlesRefused.WithLabelValues(reason).Inc()
	n.refusedBundleLog.Do(func() {
		n.log.Warn("bundle refused: it cannot have come from this neighbour (more are counted, not logged)",
			zap.String("peer", from.Name()), zap.String("reason", reason), zap.Uint32("source", s.Origin),
			zap.Uint64("epoch", s.Epoch), zap.Uint64("seq", s.Seq))
	})
	return false
}

// sourceRefusal is why routes say bundle b cannot come from the
// neighbour peer ("": it can).
func sourceRefusal(peer uint32, b *wire.Bundle, routes *linkstate.Table) string {
	s := b.Stamp
	if s.Origin != peer && !onReversePath(peer, b, routes) {
		return refusedReversePath
	}
	if inc, ok := routes.Incarnation(s.Origin); ok && s.Epoch > inc*uint64(linkstate.IncarnationUnit) {
		return refusedEpoch
	}
	return ""
}

// onReversePath says whether routes have bundle b reach this broker from
// peer. A first copy comes over the shortest path from its source. The
// second copy of a two-path message follows the second path to each of
// its destinations (linkstate's second.go), so it may also come from this
// broker's predecessor on the second path to itself or to any destination
// it carries on: its first copy, stalled on a failed link, may be the only
// other one.
func onReversePath(peer uint32, b *wire.Bundle, routes *linkstate.Table) bool {
	src := b.Stamp.Origin
	if rp, ok := routes.ReversePath(src); ok && rp == peer {
		return true
	}
	if b.QoS.Path != wire.PathSecond {
		return false
	}
	if rp, ok := routes.SecondReversePath(src, routes.Self()); ok && rp == peer {
		return true
	}
	if b.Dest == nil {
		return false
	}
	for d, ok := b.Dest.NextSet(0); ok; d, ok = b.Dest.NextSet(d + 1) {
		if rp, ok := routes.SecondReversePath(src, uint32(d)); ok && rp == peer {
			return true
		}
	}
	return false
}

// rerouted says whether bundle b may come from the neighbour peer off its
// source's tree: whether a router on the source's path to one of its
// destinations routes that destination through peer and then this
// broker, by the current routes or ones replaced lately. So comes a
// bundle that a broker sent on around a link that failed silently, or
// again (replay.go), or that took a detour while routes changed. In a mesh
// whose routes have not changed for retiredRoutesFor this is the
// reverse-path check again: a path from a router on a shortest path runs
// along it. A neighbour may thus send another source's bundles only where
// a router that had them would send them through it, to the next router on
// the way (docs/security.md). Only bundles the reverse-path checks refuse
// get here, which is rare: it walks the paths towards each destination.
//
// tables are the current routes and those replaced lately, newest first
// (recentRoutes).
func (n *Node) rerouted(peer uint32, b *wire.Bundle, tables []*linkstate.Table) bool {
	src, self := b.Stamp.Origin, n.cfg.ID
	// The source's boot epoch, as the latest routes that know the source
	// tell it (a source they do not know has sent nothing to take in).
	i := slices.IndexFunc(tables, func(t *linkstate.Table) bool { _, ok := t.Incarnation(src); return ok })
	if i < 0 {
		return false
	}
	if inc, _ := tables[i].Incarnation(src); b.Stamp.Epoch > inc*uint64(linkstate.IncarnationUnit) {
		return false
	}
	// viaPeer says whether some table has the path from r to d run
	// through peer and on to this broker next.
	viaPeer := func(r, d uint32) bool {
		for _, t := range tables {
			if next, ok := t.After(r, d, peer); ok && next == self {
				return true
			}
		}
		return false
	}
	check := func(d uint32) bool {
		for _, t := range tables {
			path := t.PathFrom(src, d)
			if b.QoS.Path == wire.PathSecond {
				if p, _, ok := t.SecondPath(src, d); ok {
					path = append(path, p...)
				}
			}
			for _, r := range path {
				if viaPeer(r, d) {
					return true
				}
			}
		}
		return false
	}
	if check(self) {
		return true
	}
	if b.Dest == nil {
		return false
	}
	checked := 0
	for d, ok := b.Dest.NextSet(0); ok && checked < reroutedDests; d, ok = b.Dest.NextSet(d + 1) {
		if uint32(d) == self {
			continue
		}
		if check(uint32(d)) {
			return true
		}
		checked++
	}
	return false
}

// A bundle that the reverse-path checks refuse costs rerouted a walk of
// every path from its source's path to its destinations, in every table:
// reroutedTables (the current and the newest retired, of those
// recentRoutes returns) and reroutedDests
// bound what one bundle, from a neighbour that sends them on purpose, can
// cost. A correct bundle leaves its source's tree for its first
// destinations as much as for its others.
const (
	reroutedTables = 5
	reroutedDests  = 4
)

// recentRoutes returns routes and the routes it replaced that bundles may
// still follow at now (retiredRoutesFor), newest first.
func (n *Node) recentRoutes(routes *linkstate.Table, now time.Time) []*linkstate.Table {
	out := []*linkstate.Table{routes}
	if rs := n.retired.Load(); rs != nil {
		for _, r := range *rs {
			if now.Before(r.until) {
				out = append(out, r.routes)
			}
		}
	}
	return out
}

// retire keeps t, the routes replaced at now, for the data plane's checks
// for retiredRoutesFor (a control-plane call).
func (n *Node) retire(t *linkstate.Table, now time.Time) {
	keep := []retiredRoutes{{routes: t, until: now.Add(retiredRoutesFor)}}
	if rs := n.retired.Load(); rs != nil {
		for _, r := range *rs {
			if now.Before(r.until) && len(keep) < maxRetiredRoutes {
				keep = append(keep, r)
			}
		}
	}
	n.retired.Store(&keep)
}
