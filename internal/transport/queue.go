package transport

import (
	"sync"
	"time"

	dripv1 "github.com/dripmesh/drip/api/proto/drip/v1"
	"github.com/dripmesh/drip/internal/pq"
	"github.com/dripmesh/drip/internal/qos"
)

// Queue is a link's send queue (docs/design.md §4). Control messages are never
// dropped and always leave before queued data; bundles are bounded by their
// encoded bytes and refused when the bound would be exceeded, so a slow link
// never grows memory or holds the routing protocol back; whether a refused
// bundle waits for room or is dropped is the Link's decision.
//
// Urgent bundles — those of deadline flows with time to spare — leave
// before the others, the one that must leave soonest first (Kim10 §2.2:
// topics are scheduled by urgency; docs/design.md §11); the others leave
// in the order they came.
//
// Producers (the broker's goroutines) Push; the link's single writer
// goroutine calls Next in a loop and sends what it returns.
type Queue struct {
	mu        sync.Mutex
	wake      chan struct{} // holds a token while there is work or the queue is closed
	control   []*dripv1.Control
	bundles   []queued // encoded bundles, first come first served
	head      int      // bundles[head:] are queued
	urgent    pq.Heap[queued]
	seq       uint64 // orders urgent bundles of equal SendBy by arrival
	dataBytes int
	limit     int
	closed    bool
	room      chan struct{}     // closed when bundles next leave or the queue closes; nil while nobody waits
	account   func(delta int64) // LinkConfig.Account, or nil
}

type queued struct {
	b   []byte
	u   qos.Urgency
	seq uint64
}

func (a queued) sooner(b queued) bool {
	return a.u.SendBy < b.u.SendBy || a.u.SendBy == b.u.SendBy && a.seq < b.seq
}

// Batch is what one frame carries: every queued control message, then
// bundles in their wire form.
type Batch struct {
	Control []*dripv1.Control
	Bundles [][]byte
	// Deadlines are the bundles' deadlines (qos.Urgency.Deadline), index for
	// index, or nil when none has one.
	Deadlines []int64
}

// NewQueue returns a queue that holds at most limitBytes of bundles.
func NewQueue(limitBytes int) *Queue {
	return &Queue{wake: make(chan struct{}, 1), limit: limitBytes, urgent: pq.New(queued.sooner, 0)}
}

func (q *Queue) signal() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// PushControl queues a control message; it never fails while the queue is
// open (control traffic must not be lost). An advertisement (LSA or
// predicate advertisement) takes the place of a queued older one from the
// same origin (unless it is a delta, see supersedeLocked): a receiver
// would discard the older once it has the newer,
// and while a slow link holds the writer back a burst of re-advertisements
// would otherwise queue every superseded copy.
func (q *Queue) PushControl(c *dripv1.Control) {
	q.mu.Lock()
	if !q.closed && !q.supersedeLocked(c) {
		q.control = append(q.control, c)
	}
	q.mu.Unlock()
	q.signal()
}

// supersedeLocked replaces the queued advertisements that c supersedes and
// reports whether it did: c takes the place of the last of them, and the
// others go. A delta supersedes nothing, since it is taken against the
// advertisement of its origin queued before it, which the receiver must
// therefore get; nor does anything queued behind a newer one of its
// origin, which may be a delta taken against what it would replace.
func (q *Queue) supersedeLocked(c *dripv1.Control) bool {
	kind, origin, seq, ok := advertisement(c)
	if !ok || c.GetPredicateAd().GetDeltaBase() != 0 {
		return false
	}
	same := func(old *dripv1.Control) (uint64, bool) {
		k, o, s, ok := advertisement(old)
		return s, ok && k == kind && o == origin
	}
	at := -1
	for i, old := range q.control {
		if s, ok := same(old); ok {
			if s > seq {
				return false
			}
			at = i
		}
	}
	if at < 0 {
		return false
	}
	q.control[at] = c
	n := 0
	for i, old := range q.control {
		if _, ok := same(old); ok && i < at {
			continue
		}
		q.control[n] = old
		n++
	}
	clear(q.control[n:])
	q.control = q.control[:n]
	return true
}

// advertisement identifies an LSA (kind 1) or predicate advertisement
// (kind 2) by origin and sequence number.
func advertisement(c *dripv1.Control) (kind int, origin uint32, seq uint64, ok bool) {
	if a := c.GetLsa(); a != nil {
		return 1, a.GetOrigin(), a.GetSeq(), true
	}
	if a := c.GetPredicateAd(); a != nil {
		return 2, a.GetOrigin(), a.GetSeq(), true
	}
	return 0, 0, 0, false
}

// PushBundle queues a bundle in its wire form. It returns false, queuing
// nothing, when the bundle would take the queue over its limit or the
// queue is closed; the caller counts the drop. A bundle larger than the
// whole limit is still accepted into an empty queue, so no message is
// unsendable merely for its size.
func (q *Queue) PushBundle(b []byte) bool {
	ok, _ := q.TryPushBundle(b)
	return ok
}

// TryPushBundle queues a bundle in its wire form like PushBundle; when the
// queue is full it returns a channel that is closed once bundles leave it
// (or it closes), for a producer that would rather wait than drop. A
// closed queue returns neither.
func (q *Queue) TryPushBundle(b []byte) (ok bool, room <-chan struct{}) {
	return q.TryPushUrgent(b, qos.Urgency{})
}

// TryPushUrgent is TryPushBundle for a bundle of a deadline flow: with a
// SendBy it leaves before every bundle without one and after those due
// sooner.
func (q *Queue) TryPushUrgent(b []byte, u qos.Urgency) (ok bool, room <-chan struct{}) {
	size := len(b)
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return false, nil
	}
	if q.dataBytes > 0 && q.dataBytes+size > q.limit {
		if q.room == nil {
			q.room = make(chan struct{})
		}
		room := q.room
		q.mu.Unlock()
		return false, room
	}
	if u.SendBy != 0 {
		q.seq++
		q.urgent.Push(queued{b: b, u: u, seq: q.seq})
	} else {
		q.bundles = append(q.bundles, queued{b: b, u: u})
	}
	q.dataBytes += size
	q.accountLocked(int64(size))
	q.mu.Unlock()
	q.signal()
	return true, nil
}

func (q *Queue) pendingLocked() bool {
	return len(q.control) > 0 || q.head < len(q.bundles) || q.urgent.Len() > 0
}

func (q *Queue) accountLocked(delta int64) {
	if q.account != nil && delta != 0 {
		q.account(delta)
	}
}

// freeLocked wakes the producers waiting for room.
func (q *Queue) freeLocked() {
	if q.room != nil {
		close(q.room)
		q.room = nil
	}
}

// Bytes is the encoded size of the queued bundles.
func (q *Queue) Bytes() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.dataBytes
}

// Next blocks until there is something to send or done is closed, and
// returns one frame's worth: every queued control message, then bundles up
// to maxFrameBytes (at least one). ok is false once the queue is closed and
// drained, or done is closed.
func (q *Queue) Next(done <-chan struct{}, maxFrameBytes int) (f Batch, ok bool) {
	f, ok, _ = q.NextWithin(done, nil, maxFrameBytes)
	return f, ok
}

// NextWithin is Next that also gives up when idle fires (nil: never),
// with an empty batch and idle true: the link has had nothing to send for
// its keepalive interval (LinkConfig.Keepalive).
func (q *Queue) NextWithin(done <-chan struct{}, idle <-chan time.Time, maxFrameBytes int) (f Batch, ok, isIdle bool) {
	for {
		q.mu.Lock()
		if q.pendingLocked() {
			f = q.takeLocked(maxFrameBytes)
			more := q.pendingLocked()
			q.mu.Unlock()
			if more {
				q.signal()
			}
			return f, true, false
		}
		closed := q.closed
		q.mu.Unlock()
		if closed {
			return Batch{}, false, false
		}
		select {
		case <-q.wake:
		case <-done:
			return Batch{}, false, false
		case <-idle:
			return Batch{}, true, true
		}
	}
}

func (q *Queue) takeLocked(maxFrameBytes int) Batch {
	f := Batch{Control: q.control}
	q.control = nil
	if carriesAdvertisement(f.Control) {
		// The frame goes uncompressed (Link.prepare); the bundles follow
		// in the next one, which compresses well.
		return f
	}
	size := 0
	take := func(it queued) {
		size += len(it.b)
		q.dataBytes -= len(it.b)
		f.Bundles = append(f.Bundles, it.b)
		if it.u.Deadline != 0 && f.Deadlines == nil {
			f.Deadlines = make([]int64, len(f.Bundles)-1, cap(f.Bundles))
		}
		if f.Deadlines != nil {
			f.Deadlines = append(f.Deadlines, it.u.Deadline)
		}
	}
	for q.urgent.Len() > 0 {
		if len(f.Bundles) > 0 && size+len(q.urgent.Peek().b) > maxFrameBytes {
			break
		}
		take(q.urgent.Pop())
	}
	start := q.head
	for q.head < len(q.bundles) {
		it := q.bundles[q.head]
		if len(f.Bundles) > 0 && size+len(it.b) > maxFrameBytes {
			break
		}
		q.head++
		take(it)
	}
	if len(f.Bundles) > 0 {
		q.accountLocked(-int64(size))
		q.freeLocked()
	}
	clear(q.bundles[start:q.head])
	if q.head == len(q.bundles) {
		q.bundles, q.head = q.bundles[:0], 0
	} else if q.head > len(q.bundles)/2 {
		// Compact so the backing array does not grow with total traffic.
		n := copy(q.bundles, q.bundles[q.head:])
		clear(q.bundles[n:])
		q.bundles, q.head = q.bundles[:n], 0
	}
	return f
}

// Closed reports whether Close has been called.
func (q *Queue) Closed() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.closed
}

// Close stops accepting pushes and wakes the writer; queued items can still
// be drained with Next. It returns the number of bundles that were queued.
func (q *Queue) Close() int {
	q.mu.Lock()
	q.closed = true
	q.freeLocked()
	n := len(q.bundles) - q.head + q.urgent.Len()
	q.mu.Unlock()
	q.signal()
	return n
}

// Discard takes every queued bundle out of a closed queue that nobody will
// send (the link ended), so that their bytes leave the account at once,
// and returns them: those with deadlines in the order they would have
// left, then the others oldest first. An open queue keeps its bundles.
func (q *Queue) Discard() [][]byte {
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.closed {
		return nil
	}
	var out [][]byte
	if n := len(q.bundles) - q.head + q.urgent.Len(); n > 0 {
		out = make([][]byte, 0, n)
	}
	for q.urgent.Len() > 0 {
		out = append(out, q.urgent.Pop().b)
	}
	for _, it := range q.bundles[q.head:] {
		out = append(out, it.b)
	}
	q.accountLocked(-int64(q.dataBytes))
	clear(q.bundles)
	q.bundles, q.head, q.dataBytes = q.bundles[:0], 0, 0
	q.urgent = pq.New(queued.sooner, 0)
	return out
}
