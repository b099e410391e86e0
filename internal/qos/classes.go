package qos

import (
	"slices"

	"github.com/dripmesh/drip/internal/encoding"
	"github.com/dripmesh/drip/internal/linkstate"
)

// Request is what one local subscription asks of the messages it matches:
// its flow and its predicate's Bloom filters.
type Request struct {
	Flow    Flow
	Filters []encoding.Bloom
}

// Classes groups the requests that ask for something (a deadline, two
// paths or both) into the QoS classes of the router's predicate
// advertisement: one class per distinct flow, its filters deduplicated
// with covered ones removed (encoding.Advertise: a class matches a message
// when any of its filters does, so a covered filter changes nothing).
//
// An advertisement holds at most linkstate.MaxQoSClasses classes. Beyond
// that, Classes merges the two neighbouring classes (in deadline order)
// whose deadlines are closest in ratio, keeping the tighter deadline and
// two paths if either asked: a merge may only make messages more urgent or
// more redundant than asked, never less.
func Classes(reqs []Request) []linkstate.QoSClass {
	var out []linkstate.QoSClass
	for _, r := range reqs {
		if r.Flow == (Flow{}) || len(r.Filters) == 0 {
			continue
		}
		i := slices.IndexFunc(out, func(c linkstate.QoSClass) bool {
			return c.Deadline == r.Flow.Deadline && c.TwoPaths == r.Flow.TwoPaths
		})
		if i < 0 {
			i = len(out)
			out = append(out, linkstate.QoSClass{Deadline: r.Flow.Deadline, TwoPaths: r.Flow.TwoPaths})
		}
		out[i].Filters = append(out[i].Filters, r.Filters...)
	}
	slices.SortFunc(out, linkstate.CompareQoS)
	for len(out) > linkstate.MaxQoSClasses {
		i := closest(out)
		a, b := out[i], out[i+1]
		a.Deadline = Tighter(a.Deadline, b.Deadline)
		a.TwoPaths = a.TwoPaths || b.TwoPaths
		a.Filters = append(a.Filters, b.Filters...)
		out[i] = a
		out = slices.Delete(out, i+1, i+2)
		// The merged class may now equal a neighbour; sorting keeps the
		// order the advertisement requires, and the next round merges
		// equals first (ratio 1).
		slices.SortStableFunc(out, linkstate.CompareQoS)
	}
	for i := range out {
		out[i].Filters = encoding.Advertise(out[i].Filters)
	}
	return out
}

// closest returns i such that classes i and i+1 are the cheapest to merge:
// equal flows first, then the smallest deadline ratio; a class without a
// deadline sorts last and merges only with its neighbour when nothing
// else is left.
func closest(cs []linkstate.QoSClass) int {
	best, bestRatio := 0, -1.0
	for i := 0; i+1 < len(cs); i++ {
		a, b := cs[i].Deadline, cs[i+1].Deadline
		var ratio float64
		switch {
		case a == b:
			ratio = 1
		case a == 0 || b == 0:
			ratio = 1e18
		default:
			ratio = float64(max(a, b)) / float64(min(a, b))
		}
		if cs[i].TwoPaths != cs[i+1].TwoPaths {
			ratio *= 1.0001 // prefer merging flows that agree on paths
		}
		if bestRatio < 0 || ratio < bestRatio {
			best, bestRatio = i, ratio
		}
	}
	return best
}
