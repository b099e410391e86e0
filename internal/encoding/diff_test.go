package encoding

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDiffIsTheSetDifference is a property test against the definition:
// Diff's removed indexes are base's filters next lacks, its added
// positions next's filters base lacks.
func TestDiffIsTheSetDifference(t *testing.T) {
	for seed := range uint64(300) {
		rng := rand.New(rand.NewPCG(seed, 23))
		draw := func(n int) []Bloom {
			out := make([]Bloom, n)
			for i := range out {
				for range 1 + rng.IntN(4) {
					out[i].Set(rng.IntN(24)) // few positions: many shared filters
				}
			}
			return Advertise(out)
		}
		base, next := draw(rng.IntN(40)), draw(rng.IntN(40))
		removed, addedAt, ok := Diff(base, next)
		require.True(t, ok)
		var wantRemoved, wantAdded []uint32
		for i, f := range base {
			if !slices.Contains(next, f) {
				wantRemoved = append(wantRemoved, uint32(i))
			}
		}
		for j, f := range next {
			if !slices.Contains(base, f) {
				wantAdded = append(wantAdded, uint32(j))
			}
		}
		assert.Equal(t, wantRemoved, removed, "seed %d", seed)
		assert.Equal(t, wantAdded, addedAt, "seed %d", seed)
	}
}

// TestDiffNeedsAdvertiseOrder: lists out of order or with a duplicate
// cannot be diffed in one merge.
func TestDiffNeedsAdvertiseOrder(t *testing.T) {
	var a, b, c Bloom
	a.Set(1)
	b.Set(2)
	c.Set(1)
	c.Set(2)
	sorted := []Bloom{a, b, c} // by bit count, then by words from the highest bit
	for name, l := range map[string][]Bloom{
		"reversed":  {b, a},
		"duplicate": {a, a},
		"by count":  {c, a},
	} {
		_, _, ok := Diff(sorted, l)
		assert.False(t, ok, name)
		_, _, ok = Diff(l, sorted)
		assert.False(t, ok, name)
	}
	_, _, ok := Diff(sorted, sorted[1:])
	assert.True(t, ok)
}
