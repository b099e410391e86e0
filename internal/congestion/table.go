package congestion

import (
	"cmp"
	"slices"
	"time"

	"github.com/dripmesh/drip/internal/encoding"
)

// key names a request: one filter of one subscriber.
type key struct {
	sub    uint64
	filter uint32
}

func (k key) compare(o key) int {
	if c := cmp.Compare(k.sub, o.sub); c != 0 {
		return c
	}
	return cmp.Compare(k.filter, o.filter)
}

// request is one row of the publisher's table (Malekpour11 Fig. 4) and its
// token bucket.
type request struct {
	key   key
	bloom encoding.Bloom
	quota float64
	// at is when the subscriber last asked (feedback time); oneWay is that
	// feedback's travel time, δ_feedback.
	at     time.Time
	oneWay time.Duration
	// dominators counts the requests that cover this one with a lower
	// quota; the request is a flow when there are none.
	dominators int
	tokens     float64
	refilled   time.Time
	// held counts the messages held for this request; pass marks it
	// blocked in the current release pass.
	held int
	pass uint64
}

// less orders requests by quota, then key: a total order, so that
// domination (a covers b and a is less) is acyclic.
func less(a, b *request) bool {
	if a.quota != b.quota {
		return a.quota < b.quota
	}
	return a.key.compare(b.key) < 0
}

// dominates reports that a makes b redundant: every message of b's filter
// is one of a's, which is limited more (Algorithm 2, lines 10–13).
func dominates(a, b *request) bool {
	return a != b && a.bloom.Covers(b.bloom) && less(a, b)
}

// table is the publisher's requests and, derived from them, its flows:
// the requests no other dominates, least quota first.
type table struct {
	byKey  map[key]*request
	all    []*request
	active []*request
	// gen counts the rebuilds of active: a held message matched at one gen
	// matches the same flows while it lasts.
	gen uint64
}

func newTable() table { return table{byKey: map[key]*request{}} }

// insert adds r, which is not in the table, and counts dominations both
// ways: O(n) Bloom comparisons.
func (t *table) insert(r *request) {
	r.dominators = 0
	for _, x := range t.all {
		if dominates(x, r) {
			r.dominators++
		}
		if dominates(r, x) {
			x.dominators++
		}
	}
	t.all = append(t.all, r)
	t.byKey[r.key] = r
}

// remove takes r out and releases what it dominated.
func (t *table) remove(r *request) {
	i := slices.Index(t.all, r)
	if i < 0 {
		return
	}
	t.all = slices.Delete(t.all, i, i+1)
	delete(t.byKey, r.key)
	for _, x := range t.all {
		if dominates(r, x) {
			x.dominators--
		}
	}
}

// set makes the request of k be bloom at quota: Algorithm 2 for one flow.
// A request that only changes its quota keeps its bucket.
func (t *table) set(k key, bloom encoding.Bloom, quota float64, now time.Time) *request {
	r := t.byKey[k]
	switch {
	case r == nil:
		r = &request{key: k, bloom: bloom, quota: quota, tokens: 1, refilled: now}
	case r.quota == quota && r.bloom == bloom:
		r.at = now
		return r
	default:
		t.remove(r)
		r.bloom, r.quota = bloom, quota
	}
	r.at = now
	t.insert(r)
	t.reindex()
	return r
}

// drop removes the request of k, if any.
func (t *table) drop(k key) {
	if r := t.byKey[k]; r != nil {
		t.remove(r)
		t.reindex()
	}
}

// expire removes the requests not refreshed since before cutoff.
func (t *table) expire(cutoff time.Time) {
	n := len(t.all)
	for _, r := range slices.Clone(t.all) {
		if r.at.Before(cutoff) {
			t.remove(r)
		}
	}
	if len(t.all) != n {
		t.reindex()
	}
}

// reindex rebuilds the flows from the domination counts.
func (t *table) reindex() {
	t.gen++
	t.active = t.active[:0]
	for _, r := range t.all {
		if r.dominators == 0 {
			t.active = append(t.active, r)
		}
	}
	slices.SortFunc(t.active, func(a, b *request) int {
		if less(a, b) {
			return -1
		}
		return 1
	})
}

// match appends the flows m belongs to, least quota first.
func (t *table) match(dst []*request, m encoding.Bloom) []*request {
	for _, r := range t.active {
		if r.bloom.SubsetOf(m) {
			dst = append(dst, r)
		}
	}
	return dst
}

// matchesAny reports whether m belongs to a flow.
func (t *table) matchesAny(m encoding.Bloom) bool {
	for _, r := range t.active {
		if r.bloom.SubsetOf(m) {
			return true
		}
	}
	return false
}

// refill adds the tokens earned since the last refill; a bucket holds
// max(1, quota·depth).
func (r *request) refill(now time.Time, depth time.Duration) {
	if d := now.Sub(r.refilled); d > 0 {
		r.tokens = min(r.tokens+r.quota*d.Seconds(), max(1, r.quota*depth.Seconds()))
		r.refilled = now
	}
}
