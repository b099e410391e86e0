package encoding

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// advertiseReference is docs/design.md §2's definition, O(n²): keep Bi unless some
// other Bj ⊆ Bi, keeping the first of identical ones.
func advertiseReference(filters []Bloom) []Bloom {
	var out []Bloom
	for i, bi := range filters {
		covered := false
		for j, bj := range filters {
			if j != i && bj.SubsetOf(bi) && (bj != bi || j < i) {
				covered = true
				break
			}
		}
		if !covered {
			out = append(out, bi)
		}
	}
	slices.SortFunc(out, Bloom.Compare)
	return out
}

func TestAdvertiseExamples(t *testing.T) {
	a, ab, abc, c, d := bloomOf(1), bloomOf(1, 2), bloomOf(1, 2, 3), bloomOf(3), bloomOf(4, 5)
	for _, tc := range []struct {
		name     string
		in, want []Bloom
	}{
		{"empty", nil, nil},
		{"duplicates", []Bloom{d, d, d}, []Bloom{d}},
		{"chain keeps the sparsest", []Bloom{abc, ab, a}, []Bloom{a}},
		{"incomparable kept", []Bloom{d, ab, c}, []Bloom{c, ab, d}},
		{"covered by one of two", []Bloom{abc, c, d}, []Bloom{c, d}},
		{"zero covers all", []Bloom{d, {}, abc}, []Bloom{{}}},
	} {
		got := Advertise(tc.in)
		assert.True(t, slices.Equal(tc.want, got), "%s: got %v, want %v", tc.name, got, tc.want)
	}
	in := []Bloom{abc, a}
	Advertise(in)
	assert.Equal(t, []Bloom{abc, a}, in, "the input is not modified")
}

// docs/design.md §2: covering removal against the quadratic reference, on random
// filters dense enough that covering is frequent.
func TestAdvertiseMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	for range 300 {
		m := 8 << r.IntN(7) // 8 .. 512
		n := r.IntN(120)
		filters := make([]Bloom, n)
		for i := range filters {
			filters[i] = randomBloom(r, m, r.IntN(6))
		}
		for i := range filters { // duplicates
			if r.IntN(4) == 0 && i > 0 {
				filters[i] = filters[r.IntN(i)]
			}
		}
		want := advertiseReference(filters)
		got := Advertise(filters)
		require.True(t, slices.Equal(want, got), "M=%d n=%d: got %v, want %v", m, n, got, want)
		r.Shuffle(len(filters), func(i, j int) { filters[i], filters[j] = filters[j], filters[i] })
		require.Equal(t, got, Advertise(filters), "the order of the input does not matter")
	}
}

// TestCoarsenNeverMisses: coarsened to at most max Blooms, an
// advertisement still covers every filter it had — each original Bloom
// contains one of the result, so every message an original matched, the
// result matches — and it is in Advertise's order. Filters of shared
// categories merge before unrelated ones: the merged Blooms keep bits.
func TestCoarsenNeverMisses(t *testing.T) {
	p := DefaultParams()
	rng := rand.New(rand.NewPCG(5, 5))
	for trial := range 50 {
		n, max := 1+rng.IntN(300), 1+rng.IntN(40)
		var in []Bloom
		for range n {
			// A filter of an attribute's existence category and one of a
			// few values, as equality subscriptions encode.
			var b Bloom
			p.add(&b, []byte(fmt.Sprintf("∃$attr%d", rng.IntN(4))))
			p.add(&b, []byte(fmt.Sprintf("$attr=%d", rng.IntN(1000))))
			in = append(in, b)
		}
		out := Coarsen(in, max)
		require.LessOrEqual(t, len(out), max, "trial %d", trial)
		require.Equal(t, Advertise(out), out, "in Advertise's order")
		for _, f := range in {
			covered := false
			for _, g := range out {
				covered = covered || g.SubsetOf(f)
			}
			require.True(t, covered, "trial %d: a filter is no longer matched", trial)
		}
		if max >= 4 {
			for _, g := range out {
				assert.Positive(t, g.PopCount(), "trial %d: filters of four attributes merged into one matching everything", trial)
			}
		}
	}
	assert.Len(t, Coarsen(make([]Bloom, 3), 1), 1)
}
