package encoding

import "cmp"

// Diff returns the edit from advertisement base to next: the indexes of
// base's filters that next drops and the positions in next of the filters
// base lacks, both ascending. Both must be in Advertise's order (ascending
// by Compare, no duplicates), as brokers advertise them, so that one merge
// finds the edit; ok is false when either is not. It is how a changed
// advertisement travels as a delta (docs/design.md §2).
func Diff(base, next []Bloom) (removed, addedAt []uint32, ok bool) {
	// Compare counts the bits of both Blooms each time: count each once.
	pb, pn := popCounts(base), popCounts(next)
	if !ascending(base, pb) || !ascending(next, pn) {
		return nil, nil, false
	}
	i, j := 0, 0
	for i < len(base) || j < len(next) {
		c := 0
		switch {
		case i == len(base):
			c = 1
		case j == len(next):
			c = -1
		default:
			c = compareCounted(&base[i], &next[j], pb[i], pn[j])
		}
		switch {
		case c < 0:
			removed = append(removed, uint32(i))
			i++
		case c > 0:
			addedAt = append(addedAt, uint32(j))
			j++
		default:
			i++
			j++
		}
	}
	return removed, addedAt, true
}

func popCounts(fs []Bloom) []int {
	out := make([]int, len(fs))
	for i := range fs {
		out[i] = fs[i].PopCount()
	}
	return out
}

// compareCounted is Compare given both Blooms' bit counts.
func compareCounted(a, b *Bloom, pa, pb int) int {
	if pa != pb {
		return cmp.Compare(pa, pb)
	}
	return compareWords(a, b)
}

func ascending(fs []Bloom, pops []int) bool {
	for i := 1; i < len(fs); i++ {
		if compareCounted(&fs[i-1], &fs[i], pops[i-1], pops[i]) >= 0 {
			return false
		}
	}
	return true
}
