package encoding

import (
	"cmp"
	"math/bits"
	"slices"
)

// Advertise returns a broker's advertised predicate (docs/design.md §2, Carzaniga09
// §2.2) from the Blooms of all its local filters: duplicates removed and
// every Bloom dropped that another one covers (Bj ⊆ Bi makes Bi redundant:
// any message Bloom that contains Bi contains Bj). The result is sorted by
// Compare, so equal inputs give byte-identical advertisements; it is a new
// slice and filters is not modified.
//
// Covering never changes which messages match the advertisement, only its
// size. If the zero Bloom (a filter of only "exists" constraints) is among
// the filters, it covers everything and is the whole advertisement.
func Advertise(filters []Bloom) []Bloom {
	// Sort indexes, not the 256-byte Blooms themselves.
	type item struct {
		pop int
		b   *Bloom
	}
	items := make([]item, len(filters))
	for i := range filters {
		items[i] = item{filters[i].PopCount(), &filters[i]}
	}
	slices.SortFunc(items, func(x, y item) int {
		if c := cmp.Compare(x.pop, y.pop); c != 0 {
			return c
		}
		return compareWords(x.b, y.b)
	})
	// Sorted by popcount, a Bloom can be covered only by one kept before
	// it. A cover's lowest position is one of the candidate's positions, so
	// chaining the kept Blooms by their lowest position limits the search
	// to the chains of the candidate's (few) positions.
	var head [MaxBits]int32
	for i := range head {
		head[i] = -1
	}
	var next []int32
	var kept []Bloom
	for i, it := range items {
		if i > 0 && *it.b == *items[i-1].b {
			continue
		}
		if it.pop == 0 {
			// The zero Bloom covers everything, and sorts first.
			return []Bloom{{}}
		}
		if !coveredBy(*it.b, kept, &head, next) {
			low := it.b.lowest()
			next = append(next, head[low])
			head[low] = int32(len(kept))
			kept = append(kept, *it.b)
		}
	}
	return kept
}

func coveredBy(c Bloom, kept []Bloom, head *[MaxBits]int32, next []int32) bool {
	for i, w := range c.w {
		for w != 0 {
			p := i<<6 + bits.TrailingZeros64(w)
			w &= w - 1
			for k := head[p]; k >= 0; k = next[k] {
				if kept[k].SubsetOf(c) {
					return true
				}
			}
		}
	}
	return false
}

// lowest returns the lowest set position, or MaxBits for the zero Bloom.
func (b Bloom) lowest() int {
	for i, w := range b.w {
		if w != 0 {
			return i<<6 + bits.TrailingZeros64(w)
		}
	}
	return MaxBits
}

// Coarsen returns filters, in Advertise's order, reduced to at most max
// Blooms (max ≥ 1) by merging them in pairs: the intersection of two
// Blooms is contained in every message Bloom that contains either, so the
// merged one matches whatever they matched — a weaker necessary condition,
// with more false positives and never a miss. Pairs merge among
// neighbours in an order that keeps filters sharing their most common
// bits (an attribute's existence category, a frequent value) together,
// those that share the most bits first, and pairs that share none only
// when nothing else is left. It is how a broker keeps an advertisement
// within the bound its neighbours take (linkstate.Config.MaxFilters)
// however many subscriptions it holds. filters is not modified.
func Coarsen(filters []Bloom, max int) []Bloom {
	out := Advertise(filters)
	for max >= 1 && len(out) > max {
		// Each Bloom's positions, most frequent first: sorted by those,
		// Blooms that share frequent bits are neighbours.
		var freq [MaxBits]int
		for _, b := range out {
			for _, p := range b.AppendPositions(nil) {
				freq[p]++
			}
		}
		type ranked struct {
			key []int // −frequency·MaxBits + position, ascending
			b   Bloom
		}
		rs := make([]ranked, len(out))
		for i, b := range out {
			pos := b.AppendPositions(nil)
			for j, p := range pos {
				pos[j] = -freq[p]*MaxBits + p
			}
			slices.Sort(pos)
			rs[i] = ranked{pos, b}
		}
		slices.SortFunc(rs, func(x, y ranked) int { return slices.Compare(x.key, y.key) })
		type pair struct{ i, shared int }
		pairs := make([]pair, len(rs)-1)
		for i := range pairs {
			pairs[i] = pair{i, rs[i].b.And(rs[i+1].b).PopCount()}
		}
		slices.SortStableFunc(pairs, func(x, y pair) int { return cmp.Compare(y.shared, x.shared) })
		merged := make([]bool, len(rs))
		next := make([]Bloom, 0, len(rs))
		need := len(rs) - max
		disjoint := true // only pairs sharing no bit are left
		for _, p := range pairs {
			disjoint = disjoint && p.shared == 0
		}
		for _, p := range pairs {
			if need == 0 || p.shared == 0 && !disjoint {
				break
			}
			if merged[p.i] || merged[p.i+1] {
				continue
			}
			merged[p.i], merged[p.i+1] = true, true
			next = append(next, rs[p.i].b.And(rs[p.i+1].b))
			need--
		}
		for i, r := range rs {
			if !merged[i] {
				next = append(next, r.b)
			}
		}
		out = Advertise(next)
	}
	return out
}
