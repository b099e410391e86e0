package pq

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// Property: pops come out in sorted order for random interleavings of
// pushes and pops, against a sorted-slice reference.
func TestHeapAgainstSortedSlice(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		h := New(func(a, b int) bool { return a < b }, 0)
		var ref []int
		for range rng.IntN(200) {
			if rng.IntN(3) > 0 || len(ref) == 0 {
				x := rng.IntN(50)
				h.Push(x)
				ref = append(ref, x)
				slices.Sort(ref)
			} else {
				require.Equal(t, ref[0], h.Peek())
				require.Equal(t, ref[0], h.Pop())
				ref = ref[1:]
			}
			require.Equal(t, len(ref), h.Len())
		}
		for len(ref) > 0 {
			require.Equal(t, ref[0], h.Pop())
			ref = ref[1:]
		}
	}
}

func BenchmarkPushPop(b *testing.B) {
	h := New(func(a, b uint64) bool { return a < b }, 1024)
	rng := rand.New(rand.NewPCG(1, 2))
	b.ReportAllocs()
	for range b.N {
		h.Push(rng.Uint64())
		if h.Len() > 1000 {
			h.Pop()
		}
	}
}
