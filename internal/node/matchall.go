package node

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/bits-and-blooms/bitset"
	"go.uber.org/zap"
	"golang.org/x/time/rate"

	"github.com/dripmesh/drip/internal/encoding"
	"github.com/dripmesh/drip/internal/linkstate"
)

// Filters that match every message (docs/security.md). The empty Bloom
// filter is a subset of every message's filter, so a router that
// advertises one is a destination of every message published anywhere. A
// subscription to 'k exists' encodes to one legitimately; a peer may also
// advertise one to see everything — or, as well, many filters of a bit or
// two each, which together match (nearly) every message though none is
// empty. So a router's filters are judged by their density: a filter of b
// bits is contained in a message Bloom a quarter full (denser than most)
// with probability 4^−b, and filters that together make such a message
// match with probability at least a half match (nearly) every message.
// The fewest, most general filters whose removal leaves the rest below
// that are the router's match-all filters, the empty one first of all.
// What a broker does with other routers' match-all filters is its
// MatchAllPolicy.

// The MatchAllPolicy modes.
const (
	// MatchAllAllow routes every message to such a router (Carzaniga09's
	// semantics), counted and logged.
	MatchAllAllow = "allow"
	// MatchAllLimit routes to such a router, through its match-all
	// filters, at most Rate messages per second (Burst at once) of those
	// published at this broker; its other filters route as usual.
	MatchAllLimit = "limit"
	// MatchAllRefuse ignores such filters: the router gets what its
	// other filters match, nothing through these.
	MatchAllRefuse = "refuse"
)

// MatchAllPolicy says what a broker, as an ingress, does with other
// routers' filters that match every message. Messages it does not route
// through them are counted as drip_route_dropped_destinations_total
// {reason="match_all"}. Its own subscribers are never limited.
type MatchAllPolicy struct {
	Mode  string
	Rate  float64 // messages per second per router, for MatchAllLimit
	Burst int     // for MatchAllLimit; 0: one second of Rate (at least 1)
}

func (p MatchAllPolicy) validate() error {
	switch p.Mode {
	case MatchAllAllow, MatchAllRefuse:
		return nil
	case MatchAllLimit:
		if !(p.Rate > 0) || p.Burst < 0 {
			return fmt.Errorf("match-all policy %q: rate %v and burst %d: want a positive rate and a burst of zero or more", p.Mode, p.Rate, p.Burst)
		}
		return nil
	}
	return fmt.Errorf("match-all policy %q: want %s, %s or %s", p.Mode, MatchAllAllow, MatchAllLimit, MatchAllRefuse)
}

// ParseMatchAllPolicy parses "allow", "refuse" or "limit:<rate>" (messages
// per second per router, e.g. "limit:100").
func ParseMatchAllPolicy(s string) (MatchAllPolicy, error) {
	p := MatchAllPolicy{Mode: s}
	if r, ok := strings.CutPrefix(s, MatchAllLimit+":"); ok {
		p.Mode = MatchAllLimit
		if _, err := fmt.Sscanf(r, "%g", &p.Rate); err != nil {
			return p, fmt.Errorf("match-all policy %q: rate %q is not a number", s, r)
		}
	} else if s == MatchAllLimit {
		return p, fmt.Errorf("match-all policy %q: give the rate, as limit:<messages per second>", s)
	}
	return p, p.validate()
}

// matchAllRouters is the data plane's snapshot of the routers whose
// match-all filters are limited or refused, each with its limiter (shared
// between snapshots, so a rebuild does not refill it; refused: rate 0).
type matchAllRouters struct {
	routers  []uint32 // ascending
	limiters []*rate.Limiter
}

// add sets, for each limited router not in dest and whose limiter
// allows, its bit in dest, and returns how many it left out.
func (s *matchAllRouters) add(dest *bitset.BitSet, self uint32) (dropped int) {
	for i, r := range s.routers {
		if r == self || dest.Test(uint(r)) {
			continue
		}
		if s.limiters[i].Allow() {
			dest.Set(uint(r))
		} else {
			dropped++
		}
	}
	return dropped
}

// matchAll applies a MatchAllPolicy to the advertisements a node
// installs, and keeps what the data plane needs to apply it to messages.
// Its methods are control-plane calls; snap is the data plane's.
type matchAll struct {
	policy MatchAllPolicy
	self   uint32
	log    *zap.Logger
	m      *metrics
	// counts is, per other router, its advertised filters that match
	// every message; total their sum.
	counts map[uint32]int
	total  int
	// limiters is, per router whose match-all filters are limited or
	// refused, its limiter; snap is the data plane's copy (nil until a
	// router is limited or refused).
	limiters map[uint32]*rate.Limiter
	snap     atomic.Pointer[matchAllRouters]
}

func newMatchAll(policy MatchAllPolicy, self uint32, log *zap.Logger, m *metrics) *matchAll {
	return &matchAll{policy: policy, self: self, log: log, m: m, counts: map[uint32]int{}, limiters: map[uint32]*rate.Limiter{}}
}

// apply returns the filters of u to install under the policy (u.Filters
// itself when nothing changes) and keeps the count, the log and, with
// MatchAllLimit, the limited routers.
func (a *matchAll) apply(u linkstate.PredicateUpdate) []encoding.Bloom {
	if u.Router == a.self {
		return u.Filters
	}
	var all []int
	if !u.Removed {
		all = matchAllIndexes(u.Filters)
	}
	a.count(u.Router, len(all))
	if a.policy.Mode == MatchAllAllow || a.policy.Mode == "" {
		return u.Filters
	}
	a.limit(u.Router, len(all) > 0)
	if len(all) == 0 {
		return u.Filters
	}
	kept := make([]encoding.Bloom, 0, len(u.Filters)-len(all))
	for i, f := range u.Filters {
		if _, found := slices.BinarySearch(all, i); !found {
			kept = append(kept, f)
		}
	}
	return kept
}

// referenceDensity is how full the message Bloom is that a router's
// filters are judged against (a quarter: denser than most messages make),
// and matchAllChance the chance of matching it from which they match
// (nearly) every message.
const (
	referenceDensity = 0.25
	matchAllChance   = 0.5
)

// matchAllIndexes returns the indexes, ascending, of the filters among
// filters that make a router match (nearly) every message: none if all of
// them together match a message Bloom of referenceDensity with a chance
// below matchAllChance, else the fewest, most general ones (fewest bits)
// whose removal leaves the others below it.
func matchAllIndexes(filters []encoding.Bloom) []int {
	// The chance that none matches is the product of each one's chance
	// not to: summed as logarithms, −log(1 − d^bits) per filter.
	// The empty filter matches for sure: it is always one of them.
	type filter struct{ i, bits int }
	fs := make([]filter, len(filters))
	miss := make([]float64, len(filters))
	total, empty := 0.0, 0
	for i, f := range filters {
		fs[i] = filter{i, f.PopCount()}
		if fs[i].bits == 0 {
			empty++
			continue
		}
		miss[i] = -math.Log1p(-math.Pow(referenceDensity, float64(fs[i].bits)))
		total += miss[i]
	}
	limit := -math.Log1p(-matchAllChance)
	if empty == 0 && total < limit {
		return nil
	}
	slices.SortStableFunc(fs, func(x, y filter) int { return cmp.Compare(x.bits, y.bits) })
	var all []int
	for _, f := range fs {
		if f.bits > 0 && total < limit {
			break
		}
		all = append(all, f.i)
		total -= miss[f.i]
	}
	slices.Sort(all)
	return all
}

// limit adds router to or removes it from the limited (or refused)
// routers and publishes the data plane's snapshot when that changes.
func (a *matchAll) limit(router uint32, on bool) {
	if _, ok := a.limiters[router]; ok == on {
		return
	}
	if on {
		// Refusing is a limit of zero: each message left out is counted
		// the same way.
		var l *rate.Limiter
		if p := a.policy; p.Mode == MatchAllLimit {
			l = rate.NewLimiter(rate.Limit(p.Rate), cmp.Or(p.Burst, max(1, int(p.Rate))))
		} else {
			l = rate.NewLimiter(0, 0)
		}
		a.limiters[router] = l
	} else {
		delete(a.limiters, router)
	}
	s := &matchAllRouters{}
	for r := range a.limiters {
		s.routers = append(s.routers, r)
	}
	slices.Sort(s.routers)
	for _, r := range s.routers {
		s.limiters = append(s.limiters, a.limiters[r])
	}
	a.snap.Store(s)
}

// count keeps drip_match_all_filters: the filters of other routers that
// match (nearly) every message, k of router's, counted whatever the
// policy, and logs a router that starts to advertise them.
func (a *matchAll) count(router uint32, k int) {
	old := a.counts[router]
	if k == old {
		return
	}
	if k == 0 {
		delete(a.counts, router)
	} else {
		a.counts[router] = k
	}
	a.total += k - old
	a.m.matchAllFilters.Set(float64(a.total))
	if old == 0 {
		a.log.Warn("router advertises filters that match (nearly) every message: it draws every message published here unless --match-all says otherwise",
			zap.Uint32("router", router), zap.Int("filters", k), zap.String("policy", a.policy.Mode))
	}
}
