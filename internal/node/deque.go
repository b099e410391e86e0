package node

import (
	"sync"

	"github.com/dripmesh/drip/internal/wire"
)

// Queued is one delivery waiting for its subscriber: the message's wire
// form and its header, encoded into the subscriber's stream as it leaves.
// Every subscriber a message goes to shares one Published, so that a
// queue slot is a pointer: a fanned-out message is pushed into each of
// its subscribers' queues, where a copy of the header in every slot
// would be copied again as the queue grows and is taken from.
type Queued struct {
	*wire.Published
}

// queuedOverhead is what a queued delivery costs beyond its message's
// bytes, for the queue's byte bound: its slot and the shared header,
// charged to each subscriber in full.
const queuedOverhead = 96

func (q Queued) size() int { return len(q.Msg) + queuedOverhead }

// deque is a subscription's queue: a slice that grows with what is queued
// and is let go when it empties, so that an idle subscription costs no
// memory for the bound it might use (a channel of SubscriberQueue slots
// would be allocated whole, and touched whole as its ring turns).
type deque struct {
	mu     sync.Mutex
	items  []Queued // items[head:] are queued
	head   int
	closed bool
	ready  chan struct{} // capacity 1: something may be queued
}

// push queues q unless the deque holds max items or is closed.
func (d *deque) push(q Queued, max int) bool {
	d.mu.Lock()
	if d.closed || len(d.items)-d.head >= max {
		d.mu.Unlock()
		return false
	}
	d.items = append(d.items, q)
	d.mu.Unlock()
	select {
	case d.ready <- struct{}{}:
	default:
	}
	return true
}

// take takes the oldest item; while more remain, ready stays signalled.
func (d *deque) take() (Queued, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.head == len(d.items) {
		return Queued{}, false
	}
	q := d.items[d.head]
	d.items[d.head] = Queued{}
	d.head++
	switch {
	case d.head == len(d.items):
		// Empty: a large backing array goes back to the collector.
		if cap(d.items) > 64 {
			d.items = nil
		} else {
			d.items = d.items[:0]
		}
		d.head = 0
	case d.head > len(d.items)/2 && d.head > 32:
		n := copy(d.items, d.items[d.head:])
		clear(d.items[n:])
		d.items, d.head = d.items[:n], 0
	}
	if d.head < len(d.items) {
		select {
		case d.ready <- struct{}{}:
		default:
		}
	}
	return q, true
}

func (d *deque) isClosed() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.closed
}

func (d *deque) len() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.items) - d.head
}

// close refuses further pushes and returns what was queued.
func (d *deque) close() []Queued {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.closed = true
	rest := d.items[d.head:]
	d.items, d.head = nil, 0
	return rest
}
