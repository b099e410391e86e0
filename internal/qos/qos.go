package qos

import (
	"math"
	"slices"
	"time"

	"github.com/dripmesh/drip/internal/encoding"
	"github.com/dripmesh/drip/internal/linkstate"
)

// Share is one link's share of the latency margin (Kim10 §2.2): budget is
// the time left until the deadline, pathDelay the advertised delay of the
// hops links still ahead. With no links ahead the whole margin is left.
func Share(budget, pathDelay time.Duration, hops int) time.Duration {
	margin := budget - pathDelay
	if hops <= 1 {
		return margin
	}
	return margin / time.Duration(hops)
}

// OneWay is the one-way delay a measured link cost advertises: costs are
// round-trip times in microseconds (linkstate.CostRTT).
func OneWay(cost uint64) time.Duration {
	if cost > math.MaxInt64/uint64(time.Microsecond) {
		return math.MaxInt64
	}
	return time.Duration(cost) * time.Microsecond / 2
}

// Flow is what a destination router's subscribers ask of a message.
type Flow struct {
	// Deadline is the tightest deadline; 0: none.
	Deadline time.Duration
	// TwoPaths asks for a second copy over a second path.
	TwoPaths bool
}

// Tighter returns the tighter of two deadlines, where 0 means none.
func Tighter(a, b time.Duration) time.Duration {
	switch {
	case a == 0:
		return b
	case b == 0:
		return a
	}
	return min(a, b)
}

// Table holds every router's QoS classes for lookups at the ingress. It is
// immutable once built; the control plane builds a new one when an
// advertisement changes.
type Table struct {
	routers []uint32 // ascending
	classes [][]linkstate.QoSClass
}

// NewTable builds a table from router → classes. Routers without classes
// are left out.
func NewTable(byRouter map[uint32][]linkstate.QoSClass) *Table {
	t := &Table{}
	for r, cs := range byRouter {
		if len(cs) > 0 {
			t.routers = append(t.routers, r)
		}
	}
	slices.Sort(t.routers)
	for _, r := range t.routers {
		t.classes = append(t.classes, byRouter[r])
	}
	return t
}

// Empty reports whether no router has classes, so that an ingress can skip
// the lookup.
func (t *Table) Empty() bool { return t == nil || len(t.routers) == 0 }

// Routers lists the routers that have classes, ascending. The slice must
// not be modified.
func (t *Table) Routers() []uint32 {
	if t == nil {
		return nil
	}
	return t.routers
}

// Lookup returns what router's subscribers ask of a message whose Bloom
// filter is m: the tightest deadline of a class with a filter m contains,
// and whether such a class asks for two paths.
func (t *Table) Lookup(router uint32, m *encoding.Bloom) Flow {
	if t == nil {
		return Flow{}
	}
	i, ok := slices.BinarySearch(t.routers, router)
	if !ok {
		return Flow{}
	}
	var f Flow
	for _, c := range t.classes[i] {
		tighter := c.Deadline != 0 && (f.Deadline == 0 || c.Deadline < f.Deadline)
		if !tighter && (f.TwoPaths || !c.TwoPaths) {
			continue // cannot change the answer
		}
		for j := range c.Filters {
			if c.Filters[j].SubsetOf(*m) {
				f.Deadline = Tighter(f.Deadline, c.Deadline)
				f.TwoPaths = f.TwoPaths || c.TwoPaths
				break
			}
		}
	}
	return f
}

// Urgency places a bundle of a deadline flow in a link queue. Times are on
// the clock of the link it is queued on (transport.Backpressure.Now).
type Urgency struct {
	// SendBy is when the bundle should leave at the latest to keep its
	// share of the latency margin (Share); 0: not urgent, first come
	// first served.
	SendBy int64
	// Deadline is when the message's deadline falls due; 0: none. A
	// bundle with a deadline ends with its budget field (wire.SetBudget),
	// which the link sets as the bundle leaves.
	Deadline int64
}
