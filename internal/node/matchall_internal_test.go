package node

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/dripmesh/drip/internal/encoding"
)

// TestMatchAllByDensity: a router's match-all filters are the empty one,
// and filters of so few bits that together they match a message Bloom a
// quarter full with a chance of a half — the fewest, most general of
// them; filters of whole categories (K bits each) are not, even by the
// thousand.
func TestMatchAllByDensity(t *testing.T) {
	bits := func(n, from int) encoding.Bloom {
		var b encoding.Bloom
		for i := range n {
			b.Set((from + 97*i) % 2048)
		}
		return b
	}
	many := func(k, n int) []encoding.Bloom {
		out := make([]encoding.Bloom, k)
		for i := range out {
			out[i] = bits(n, i)
		}
		return out
	}
	for _, tc := range []struct {
		name    string
		filters []encoding.Bloom
		want    int // match-all filters
	}{
		{"none", nil, 0},
		{"the empty filter", []encoding.Bloom{{}}, 1},
		{"the empty filter among others", append(many(10, 12), encoding.Bloom{}), 1},
		{"a one-bit filter", many(1, 1), 0},
		{"three one-bit filters", many(3, 1), 1},
		{"2,048 one-bit filters", many(2048, 1), 2046},
		{"200 two-bit filters", many(200, 2), 190},
		{"1,000 filters of one category (6 bits)", many(1000, 6), 0},
		{"10,000 filters of two categories (12 bits)", many(10000, 12), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := matchAllIndexes(tc.filters)
			assert.Len(t, got, tc.want)
			for _, i := range got {
				assert.Less(t, i, len(tc.filters))
			}
		})
	}
}
