package transport

import (
	"sync"

	dripv1 "github.com/dripmesh/drip/api/proto/drip/v1"
)

// Queue is a link's send queue (docs/design.md §4). Control messages are never
// dropped and always leave before queued data; bundles are bounded by their
// encoded bytes and refused when the bound would be exceeded, so a slow link
// never grows memory or holds the routing protocol back; whether a refused
// bundle waits for room or is dropped is the Link's decision.
//
// Producers (the broker's goroutines) Push; the link's single writer
// goroutine calls Next in a loop and sends what it returns.
type Queue struct {
	mu        sync.Mutex
	wake      chan struct{} // holds a token while there is work or the queue is closed
	control   []*dripv1.Control
	bundles   [][]byte // encoded bundles
	head      int      // bundles[head:] are queued
	dataBytes int
	limit     int
	closed    bool
	room      chan struct{} // closed when bundles next leave or the queue closes; nil while nobody waits
}

// Batch is what one frame carries: every queued control message, then
// bundles in their wire form.
type Batch struct {
	Control []*dripv1.Control
	Bundles [][]byte
}

// NewQueue returns a queue that holds at most limitBytes of bundles.
func NewQueue(limitBytes int) *Queue {
	return &Queue{wake: make(chan struct{}, 1), limit: limitBytes}
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
// same origin: a receiver would discard the older once it has the newer,
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

// supersedeLocked replaces a queued advertisement that c supersedes and
// reports whether it did.
func (q *Queue) supersedeLocked(c *dripv1.Control) bool {
	kind, origin, seq, ok := advertisement(c)
	if !ok {
		return false
	}
	for i, old := range q.control {
		k, o, s, ok := advertisement(old)
		if ok && k == kind && o == origin && s <= seq {
			q.control[i] = c
			return true
		}
	}
	return false
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
	q.bundles = append(q.bundles, b)
	q.dataBytes += size
	q.mu.Unlock()
	q.signal()
	return true, nil
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
	for {
		q.mu.Lock()
		if len(q.control) > 0 || q.head < len(q.bundles) {
			f = q.takeLocked(maxFrameBytes)
			more := len(q.control) > 0 || q.head < len(q.bundles)
			q.mu.Unlock()
			if more {
				q.signal()
			}
			return f, true
		}
		closed := q.closed
		q.mu.Unlock()
		if closed {
			return Batch{}, false
		}
		select {
		case <-q.wake:
		case <-done:
			return Batch{}, false
		}
	}
}

func (q *Queue) takeLocked(maxFrameBytes int) Batch {
	f := Batch{Control: q.control}
	q.control = nil
	size, start := 0, q.head
	for q.head < len(q.bundles) {
		b := q.bundles[q.head]
		if q.head > start && size+len(b) > maxFrameBytes {
			break
		}
		q.head++
		size += len(b)
		q.dataBytes -= len(b)
	}
	if q.head > start {
		q.freeLocked()
	}
	// A copy: the queue's slice is compacted and reused below.
	f.Bundles = append([][]byte(nil), q.bundles[start:q.head]...)
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

// Close stops accepting pushes and wakes the writer; queued items can still
// be drained with Next. It returns the number of bundles that were queued.
func (q *Queue) Close() int {
	q.mu.Lock()
	q.closed = true
	q.freeLocked()
	n := len(q.bundles) - q.head
	q.mu.Unlock()
	q.signal()
	return n
}
