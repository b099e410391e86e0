package transport

import "sync"

// sentRing keeps the bundles a link took to send lately, with when, up to
// a bound in bytes, so that the owner can send them again another way
// when the link turns out to have failed silently (Link.Recent): what a
// link that stops carrying anything took in its last moments is in TCP's
// buffers, or on a path that drops it, and is lost with the connection.
// The bundles are the ones pushed, which nobody changes once queued.
type sentRing struct {
	mu    sync.Mutex
	items []sentBundle // a ring: oldest at head
	head  int
	n     int
	bytes int
	max   int
}

type sentBundle struct {
	at int64 // Link.Now when the bundle was taken into a frame
	b  []byte
}

// sentRingSlots bounds the bundles a ring holds whatever their size.
const sentRingSlots = 4096

func newSentRing(maxBytes int) *sentRing {
	return &sentRing{max: maxBytes, items: make([]sentBundle, 0, 64)}
}

// record keeps bs, taken at at, dropping the oldest beyond the bounds.
func (r *sentRing) record(at int64, bs [][]byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, b := range bs {
		if len(b) > r.max {
			continue
		}
		for r.n > 0 && (r.bytes+len(b) > r.max || r.n == sentRingSlots) {
			r.pop()
		}
		if r.n == len(r.items) {
			r.grow()
		}
		r.items[(r.head+r.n)%len(r.items)] = sentBundle{at, b}
		r.n++
		r.bytes += len(b)
	}
}

func (r *sentRing) pop() {
	it := &r.items[r.head]
	r.bytes -= len(it.b)
	*it = sentBundle{}
	r.head = (r.head + 1) % len(r.items)
	r.n--
}

// grow doubles the ring, up to sentRingSlots, keeping the order.
func (r *sentRing) grow() {
	size := min(max(2*len(r.items), 64), sentRingSlots)
	items := make([]sentBundle, size)
	for i := range r.n {
		items[i] = r.items[(r.head+i)%len(r.items)]
	}
	r.items, r.head = items, 0
}

// since returns the bundles taken at or after at, oldest first.
func (r *sentRing) since(at int64) [][]byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out [][]byte
	for i := range r.n {
		if it := r.items[(r.head+i)%len(r.items)]; it.at >= at {
			out = append(out, it.b)
		}
	}
	return out
}
