package transport

import (
	"sync"

	dripv1 "github.com/dripmesh/drip/api/proto/drip/v1"
)

// Queue is a link's send queue (docs/design.md §4). Control messages are never
// dropped and always leave before queued data; bundles are bounded by their
// encoded bytes and refused when the bound would be exceeded, so a slow link
// sheds data instead of growing memory or slowing the routing protocol.
//
// Producers (the broker's goroutines) Push; the link's single writer
// goroutine calls Next in a loop and sends what it returns.
type Queue struct {
	mu        sync.Mutex
	wake      chan struct{} // holds a token while there is work or the queue is closed
	control   []*dripv1.Control
	bundles   []sizedBundle
	head      int // bundles[head:] are queued
	dataBytes int
	limit     int
	closed    bool
}

type sizedBundle struct {
	b    *dripv1.Bundle
	size int
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

// PushBundle queues a bundle of the given encoded size (proto.Size), which
// the queue trusts for its byte accounting. It returns false,
// queuing nothing, when the bundle would take the queue over its limit or
// the queue is closed; the caller counts the drop. A bundle larger than the
// whole limit is still accepted into an empty queue, so no message is
// unsendable merely for its size.
func (q *Queue) PushBundle(b *dripv1.Bundle, size int) bool {
	q.mu.Lock()
	if q.closed || (q.dataBytes > 0 && q.dataBytes+size > q.limit) {
		q.mu.Unlock()
		return false
	}
	q.bundles = append(q.bundles, sizedBundle{b, size})
	q.dataBytes += size
	q.mu.Unlock()
	q.signal()
	return true
}

// Bytes is the encoded size of the queued bundles.
func (q *Queue) Bytes() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.dataBytes
}

// Next blocks until there is something to send or done is closed, and
// returns one frame: every queued control message, then bundles up to
// maxFrameBytes (at least one). ok is false once the queue is closed and
// drained, or done is closed.
func (q *Queue) Next(done <-chan struct{}, maxFrameBytes int) (f *dripv1.Frame, ok bool) {
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
			return nil, false
		}
		select {
		case <-q.wake:
		case <-done:
			return nil, false
		}
	}
}

func (q *Queue) takeLocked(maxFrameBytes int) *dripv1.Frame {
	f := &dripv1.Frame{Control: q.control}
	q.control = nil
	size := 0
	for q.head < len(q.bundles) {
		sb := q.bundles[q.head]
		if len(f.Bundles) > 0 && size+sb.size > maxFrameBytes {
			break
		}
		f.Bundles = append(f.Bundles, sb.b)
		q.bundles[q.head] = sizedBundle{}
		q.head++
		size += sb.size
		q.dataBytes -= sb.size
	}
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
	n := len(q.bundles) - q.head
	q.mu.Unlock()
	q.signal()
	return n
}
