package node

import (
	"math"
	"sync"
	"time"

	"github.com/bits-and-blooms/bitset"

	"github.com/dripmesh/drip/internal/drp"
	"github.com/dripmesh/drip/internal/encoding"
	"github.com/dripmesh/drip/internal/linkstate"
	"github.com/dripmesh/drip/internal/qos"
	"github.com/dripmesh/drip/internal/wire"
)

// Deadlines and two paths in the data plane (Kim10 §2.2–2.3,
// docs/design.md §11). The ingress looks up what each destination's
// subscribers ask (qos.Table, from the QoS classes of their routers'
// advertisements), gives each bundle the tightest deadline among its
// destinations and the message's own, and queues it by urgency: the least
// share of the latency margin among its destinations. Transit brokers do
// the same with the budget the bundle arrived with. Destinations that ask
// for two paths get a second copy along their second paths
// (linkstate.Table.Second), which every broker on the way follows; the
// delivering broker passes the first copy on by stamp.

// saneQoS bounds what a neighbour says of a bundle's deadline, so that no
// value can overflow the arithmetic of budgets and urgencies: a deadline
// is at most MaxDeadline, and the budget lies between −MaxDeadline (long
// late) and the deadline (nothing spent).
func saneQoS(q wire.BundleQoS) wire.BundleQoS {
	q.Deadline = min(q.Deadline, int64(MaxDeadline))
	q.Budget = min(max(q.Budget, -int64(MaxDeadline)), q.Deadline)
	return q
}

// qosPlan is the QoS of one message at one broker: the flow of each of its
// destinations that asks for something, and the message's budget here.
type qosPlan struct {
	table *qos.Table
	// bloom is the message's Bloom filter at the ingress (unused in
	// transit). A copy, not a pointer: a pointer into this heap scratch
	// would move every message's filter to the heap, deadline or not.
	bloom encoding.Bloom
	// deadline is the message's deadline (the publisher's at the ingress,
	// the bundle's in transit) and budget the time left of it now; 0: none.
	deadline, budget time.Duration
	flows            map[uint32]qos.Flow
	two              bitset.BitSet // destinations that asked for two paths
	// What push reports to: the node's metrics and the delay budgets the
	// control plane hands the routing protocol, and whether link costs are
	// measured delays.
	m        *metrics
	budgets  *delayBudgets
	measured bool
}

// lookup fills the plan's flows for the destinations in dest.
func (p *qosPlan) lookup(dest *bitset.BitSet) {
	for _, r := range p.table.Routers() {
		if !dest.Test(uint(r)) {
			continue
		}
		if f := p.table.Lookup(r, &p.bloom); f != (qos.Flow{}) {
			p.flows[r] = f
			if f.TwoPaths {
				p.two.Set(uint(r))
			}
		}
	}
}

// bundleDeadline is the tightest deadline among dest's destinations and
// the message's own (0: none), and whether any destination asked for two
// paths.
func (p *qosPlan) bundleDeadline(dest *bitset.BitSet) (time.Duration, bool) {
	d, two := p.deadline, false
	for r, f := range p.flows {
		if dest.Test(uint(r)) {
			d = qos.Tighter(d, f.Deadline)
			two = two || f.TwoPaths
		}
	}
	return d, two
}

// share is the least share of the latency margin among dest's destinations
// (qos.Share), with budget left, on routes; ok is false when none is
// reachable. Without measured costs the path's delay is unknown and taken
// as zero: the margin is then the whole budget.
func share(routes *linkstate.Table, dest *bitset.BitSet, budget time.Duration, measured bool) (time.Duration, bool) {
	best, ok := time.Duration(math.MaxInt64), false
	for r, more := dest.NextSet(0); more; r, more = dest.NextSet(r + 1) {
		cost, hops, reachable := routes.Path(uint32(r))
		if !reachable || hops == 0 {
			continue
		}
		var delay time.Duration
		if measured {
			delay = qos.OneWay(cost)
		}
		best, ok = min(best, qos.Share(budget, delay, hops)), true
	}
	return best, ok
}

// linkDelay is the one-way delay the link to the neighbour advertises
// (0 without measured costs).
func linkDelay(routes *linkstate.Table, next uint32, measured bool) time.Duration {
	if !measured {
		return 0
	}
	cost, ok := routes.Distance(next)
	if !ok {
		return 0
	}
	return qos.OneWay(cost)
}

// delayBudgets collects the least delay budget per neighbour that the data
// plane's deadline bundles ask of the link (Kim10 §2.2: its advertised
// delay plus its share of the margin); the control plane takes them every
// DelayBudgetInterval and hands them to the routing protocol, whose RTT
// samples then detect a link that breaks them.
type delayBudgets struct {
	mu  sync.Mutex
	min map[uint32]time.Duration
}

func (b *delayBudgets) note(peer uint32, budget time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.min == nil {
		b.min = map[uint32]time.Duration{}
	}
	if old, ok := b.min[peer]; !ok || budget < old {
		b.min[peer] = budget
	}
}

// take returns the budgets noted since the last take and starts afresh.
func (b *delayBudgets) take() map[uint32]time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	m := b.min
	b.min = nil
	return m
}

// push queues one bundle of a message with a plan (qosPlan): it carries
// the tightest deadline of its destinations and the budget left of it, or
// marks a copy that travels on a first or second path (path:
// wire.PathFirst, wire.PathSecond or 0), and is queued with its urgency;
// the link's delay budget is noted for reactive rerouting.
func (p *qosPlan) push(l Link, fw drp.Forward, routes *linkstate.Table, path uint32, raw []byte, h bundleHeader) bool {
	deadline, two := p.bundleDeadline(fw.Bundle.Dest)
	q := wire.BundleQoS{Path: path, Marked: h.marked}
	if path == 0 && two {
		q.Path = wire.PathFirst
	}
	var u qos.Urgency
	if deadline != 0 {
		// The bundle's deadline is the tightest of its destinations,
		// and the message has travelled as long for each.
		budget := deadline - (p.deadline - p.budget)
		q.Deadline, q.Budget = int64(deadline), int64(budget)
		now := l.Now()
		u.Deadline = now + int64(budget)
		if s, ok := share(routes, fw.Bundle.Dest, budget, p.measured); ok && s >= 0 {
			// A share below zero cannot be kept: the bundle keeps its
			// place rather than push ahead of bundles that can.
			u.SendBy = now + int64(s)
			p.budgets.note(fw.Next, linkDelay(routes, fw.Next, p.measured)+s)
		}
	}
	size := wire.BundleSizeBound(len(raw), len(fw.Bundle.Dest.Words()))
	b := wire.AppendBundleQoS(make([]byte, 0, size), fw.Bundle, h.stamp, h.publishedAt, h.hops, raw, q)
	if path == wire.PathSecond {
		p.m.secondPathBytes.Add(float64(len(b)))
	}
	if q.Deadline != 0 {
		p.m.deadlineBundles.Inc()
		return l.PushUrgent(b, u)
	}
	return l.PushBundle(b)
}
