package client

import "sync/atomic"

// readAhead is what a Client's subscriptions may read from their streams
// ahead of Next, together (WithReadAhead): each takes its share, the
// bound divided among the subscriptions running, so that a client of
// thousands of subscriptions that do not read holds the bound, not
// thousands of times it. A subscription under its share reads on; at or
// over it, it holds its stream back and then drops, as over the whole
// bound before (Subscription.hold). Each may exceed its share by the one
// event it read last, which it cannot read in part.
type readAhead struct {
	limit int64
	subs  atomic.Int64 // subscriptions running
	used  atomic.Int64 // what their backlogs hold, at Delivery.cost
}

// share is each running subscription's part of the bound.
func (r *readAhead) share() int { return int(r.limit / max(1, r.subs.Load())) }

// add accounts n bytes read ahead (negative as they leave the backlog).
func (r *readAhead) add(n int) {
	if r != nil {
		r.used.Add(int64(n))
	}
}
