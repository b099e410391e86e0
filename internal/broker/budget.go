package broker

import "sync/atomic"

// budget is the broker-wide bound on the bytes its queues hold: every
// subscriber queue and every link send queue (docs/design.md §14). Each
// queue adds what it takes in and subtracts what leaves it, with one
// atomic add each way, so the hot path takes no lock for it. Only a
// delivery that would take the total over the limit pays more: the
// subscriptions shed from the subscriber holding the most (shedLocked).
//
// Link queues are counted but never shed for the budget: a link carries
// every subscriber's traffic beyond it, and its own bound
// (Config.LinkQueueBytes) already limits it. When links hold more than
// the budget leaves, it is subscriber deliveries that are refused.
//
// It also counts the deliveries client connections hold for their
// Subscribe streams until they reach the socket (connMeter): those
// cannot be shed, so the queues shed in their place.
type budget struct {
	limit int64 // 0: no budget
	used  atomic.Int64
	// inGRPC is the part of used that client connections hold.
	inGRPC atomic.Int64
	// streams is the part of used that open client streams stand for
	// (holdStream).
	streams atomic.Int64
}

// add accounts delta bytes (negative when they leave) and returns the new
// total.
func (b *budget) add(delta int64) int64 { return b.used.Add(delta) }

// over says by how much a total exceeds the limit (≤ 0: within it).
func (b *budget) over(total int64) int64 {
	if b.limit <= 0 {
		return 0
	}
	return total - b.limit
}

// Used is the bytes the broker's queues hold now.
func (b *budget) Used() int64 { return b.used.Load() }

// sending accounts delta bytes held by client connections (connMeter).
func (b *budget) sending(delta int64) {
	b.inGRPC.Add(delta)
	b.used.Add(delta)
}

// account is the transport.LinkConfig.Account of the broker's links.
func (b *budget) account(delta int64) { b.used.Add(delta) }

// holdStream accounts what an open client stream costs at rest (its
// goroutines' stacks, gRPC's state, and for a publisher the requests its
// flow-control window lets wait unread): memory that grows with the
// streams, not the traffic, and that no queue can shed. It refuses the
// stream when the streams would take more than three quarters of the
// limit, which would leave the queues too little to deliver anything.
// The release returned gives the bytes back when the stream ends.
func (b *budget) holdStream(cost int64) (release func(), ok bool) {
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
