package node

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

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
// advertise one to see everything. What a broker does with other routers'
// match-all filters is its MatchAllPolicy.

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

// routeDropMatchAll is the drip_route_dropped_destinations_total reason of
// destinations the match-all policy left out.
const routeDropMatchAll = "match_all"

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

// applyMatchAll returns the filters of u to install under the policy
// (u.Filters itself when nothing changes) and keeps the count, the log
// and, with MatchAllLimit, the limited routers.
func (n *Node) applyMatchAll(u linkstate.PredicateUpdate) []encoding.Bloom {
	n.countMatchAll(u)
	if u.Router == n.cfg.ID || n.cfg.MatchAll.Mode == MatchAllAllow || n.cfg.MatchAll.Mode == "" {
		return u.Filters
	}
	// countMatchAll has just counted the update's match-all filters.
	all := n.matchAll[u.Router] > 0
	n.limitMatchAll(u.Router, all)
	if !all {
		return u.Filters
	}
	var kept []encoding.Bloom
	for _, f := range u.Filters {
		if !f.IsZero() {
			kept = append(kept, f)
		}
	}
	return kept
}

// limitMatchAll adds router to or removes it from the limited (or
// refused) routers and publishes the data plane's snapshot when that
// changes.
func (n *Node) limitMatchAll(router uint32, on bool) {
	if _, ok := n.matchAllLimiters[router]; ok == on {
		return
	}
	if on {
		// Refusing is a limit of zero: each message left out is counted
		// the same way.
		var l *rate.Limiter
		if p := n.cfg.MatchAll; p.Mode == MatchAllLimit {
			l = rate.NewLimiter(rate.Limit(p.Rate), cmp.Or(p.Burst, max(1, int(p.Rate))))
		} else {
			l = rate.NewLimiter(0, 0)
		}
		n.matchAllLimiters[router] = l
	} else {
		delete(n.matchAllLimiters, router)
	}
	s := &matchAllRouters{}
	for r := range n.matchAllLimiters {
		s.routers = append(s.routers, r)
	}
	slices.Sort(s.routers)
	for _, r := range s.routers {
		s.limiters = append(s.limiters, n.matchAllLimiters[r])
	}
	n.matchAllSnap.Store(s)
}

// countMatchAll keeps drip_match_all_filters: the filters of other
// routers that match every message, counted whatever the policy, and logs
// a router that starts to advertise one.
func (n *Node) countMatchAll(u linkstate.PredicateUpdate) {
	if u.Router == n.cfg.ID {
		return
	}
	k := 0
	if !u.Removed {
		for _, f := range u.Filters {
			if f.IsZero() {
				k++
			}
		}
	}
	old := n.matchAll[u.Router]
	if k == old {
		return
	}
	if k == 0 {
		delete(n.matchAll, u.Router)
	} else {
		n.matchAll[u.Router] = k
	}
	n.matchAllTotal += k - old
	n.m.matchAll.Set(float64(n.matchAllTotal))
	if old == 0 {
		n.log.Info("router advertises filters that match every message",
			zap.Uint32("router", u.Router), zap.Int("filters", k), zap.String("policy", n.cfg.MatchAll.Mode))
	}
}
