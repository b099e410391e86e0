package linkstate

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dripmesh/drip/internal/encoding"
)

// TestAdvertisementLimits: an advertisement of more filters than
// MaxFilters, or one that would take the database past
// MaxDatabaseFilters, is refused with a LimitError naming the limit,
// neither installed nor flooded; one within both is installed, and the
// database's count follows replacements. A decoder's stand-in
// for an advertisement it did not build (OversizedAd) is refused alike.
func TestAdvertisementLimits(t *testing.T) {
	limits := func(c *Config) { c.MaxFilters, c.MaxDatabaseFilters = 5, 12 }
	n := newNode(t, 1, limits)
	m := newMesh(t, n, newNode(t, 2, limits), newNode(t, 4, limits))
	m.link(1, 2, 1, 0)
	m.link(1, 4, 1, 0)
	drain(n)
	filters := func(k int) []encoding.Bloom {
		out := make([]encoding.Bloom, k)
		for i := range out {
			out[i] = bloom(i + 1)
		}
		return out
	}
	ad := func(origin uint32, seq uint64, k int) *PredAd {
		return &PredAd{Origin: origin, Seq: seq, Params: encoding.DefaultParams(), Filters: filters(k)}
	}
	for _, tc := range []struct {
		name    string
		msg     Message
		refused string // "": installed
		total   int    // the database's filters after it
	}{
		{"too many filters", ad(7, 1, 6), "over the limit of 5 per advertisement", 0},
		{"classes count", &PredAd{Origin: 7, Seq: 1, Params: encoding.DefaultParams(), Filters: filters(3),
			Classes: []QoSClass{{Deadline: time.Second, Filters: filters(3)}}}, "6 filters, over the limit of 5", 0},
		{"within", ad(7, 1, 5), "", 5},
		{"another within", ad(8, 1, 5), "", 10},
		{"past the database's limit", ad(9, 1, 3), "take the database's 10 past its limit of 12", 10},
		{"a replacement counts once", ad(8, 2, 2), "", 7},
		{"now it fits", ad(9, 1, 3), "", 10},
		{"a decoder's stand-in", &OversizedAd{Origin: 9, Seq: 2, Filters: 100000, Bytes: 2 << 20, Limit: "5 filters"}, "100000 filters", 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			digest := n.Digest()
			err := n.Step(2, tc.msg, time.Second)
			rd := drain(n)
			var le *LimitError
			if tc.refused != "" {
				require.True(t, errors.As(err, &le), "%v", err)
				assert.ErrorContains(t, err, tc.refused)
				assert.Equal(t, digest, n.Digest(), "a refused advertisement changed the database")
				assert.Empty(t, only[*PredAd](to(rd, 4)), "a refused advertisement was flooded")
			} else {
				require.NoError(t, err)
				assert.NotEmpty(t, only[*PredAd](to(rd, 4)), "flooded")
			}
			assert.Equal(t, tc.total, n.DatabaseFilters())
		})
	}
	require.ErrorContains(t, n.SetLocalPredicate(filters(6)), "over the limit of 5 per advertisement")
}
