package node

import "sync/atomic"

// Budget is the broker-wide bound on the bytes its queues hold: every
// subscriber queue and every link send queue (docs/design.md §14). Each
// queue adds what it takes in and subtracts what leaves it, with one
// atomic add each way, so the hot path takes no lock for it. Only a
// delivery that would take the total over the limit pays more: the
// subscriptions shed from the subscriber holding the most (shed).
//
// Link queues are counted but never shed for the budget: a link carries
// every subscriber's traffic beyond it, and its own bound already limits
// it. When links hold more than the budget leaves, it is subscriber
// deliveries that are refused.
//
// It also counts what the driver holds for clients and cannot shed: the
// deliveries client connections hold until they reach the socket
// (Sending), and what open client streams cost at rest (HoldStream); and
// what the predicate advertisements of other routers take, in the
// link-state database and the PREDICATES index (holdTables). The queues
// shed in their place.
type Budget struct {
	limit int64 // 0: no budget
	used  atomic.Int64
	// inClients is the part of used that client connections hold.
	inClients atomic.Int64
	// streams is the part of used that open client streams stand for
	// (HoldStream).
	streams atomic.Int64
	// tables is the part of used that predicate advertisements stand
	// for (holdTables), written by the control plane.
	tables atomic.Int64
}

// add accounts delta bytes (negative when they leave) and returns the new
// total.
func (b *Budget) add(delta int64) int64 { return b.used.Add(delta) }

// over says by how much a total exceeds the limit (≤ 0: within it).
func (b *Budget) over(total int64) int64 {
	if b.limit <= 0 {
		return 0
	}
	return total - b.limit
}

// Limit is the bytes the queues may hold together (0: no bound).
func (b *Budget) Limit() int64 { return b.limit }

// Used is the bytes the broker's queues and clients hold now.
func (b *Budget) Used() int64 { return b.used.Load() }

// InClients is the part of Used that client connections hold (Sending).
func (b *Budget) InClients() int64 { return b.inClients.Load() }

// Streams is the part of Used that open client streams stand for.
func (b *Budget) Streams() int64 { return b.streams.Load() }

// Account accounts delta bytes of a queue outside the node (a link's:
// transport.LinkConfig.Account, or a stream's send buffer), negative as
// they leave.
func (b *Budget) Account(delta int64) { b.used.Add(delta) }

// Sending accounts delta bytes held by client connections: deliveries
// handed to them and not yet written to their sockets.
func (b *Budget) Sending(delta int64) {
	b.inClients.Add(delta)
	b.used.Add(delta)
}

// HoldStream accounts what an open client stream costs at rest (its
// goroutines' stacks, the RPC library's state, and for a publisher the
// requests its flow-control window lets wait unread): memory that grows
// with the streams, not the traffic, and that no queue can shed. It
// refuses the stream when the streams would take more than three quarters
// of the limit, which would leave the queues too little to deliver
// anything. The release returned gives the bytes back when the stream
// ends.
func (b *Budget) HoldStream(cost int64) (release func(), ok bool) {
	if n := b.streams.Add(cost); b.limit > 0 && n > b.limit/4*3 {
		b.streams.Add(-cost)
		return nil, false
	}
	b.used.Add(cost)
	return func() {
		b.streams.Add(-cost)
		b.used.Add(-cost)
	}, true
}

// Tables is the part of Used that predicate advertisements stand for.
func (b *Budget) Tables() int64 { return b.tables.Load() }

// holdTables sets what the advertisements in the database take now: n
// bytes (a control-plane call).
func (b *Budget) holdTables(n int64) {
	old := b.tables.Swap(n)
	b.used.Add(n - old)
}

// filterCost is what one filter of a predicate advertisement is charged
// to the budget: its Bloom in the link-state database, its part of the
// PREDICATES index and of the links' delta decoders, and the collector's
// headroom over them.
const filterCost = 1 << 10

// maxTableFilters is how many filters the advertisements in the database
// may hold together under a budget of limit bytes for the queues: three
// quarters of it, as for open streams (linkstate.Config.MaxDatabaseFilters;
// 0: no budget, no bound).
func maxTableFilters(limit int64) int { return int(limit / 4 * 3 / filterCost) }
