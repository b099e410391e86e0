package congestion

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/dripmesh/drip/internal/encoding"
	"github.com/stretchr/testify/require"
)

// subsetBloom is the Bloom filter whose bits are those of mask (6 bits):
// 64 filters and messages whose covering relation is rich.
func subsetBloom(mask uint) encoding.Bloom {
	var b encoding.Bloom
	for i := range 6 {
		if mask&(1<<i) != 0 {
			b.Set(i)
		}
	}
	return b
}

// refRequest is the brute-force reference: every request as it was last
// asked for.
type refRequest struct {
	bloom encoding.Bloom
	quota float64
}

// TestTableLimitMatchesEveryRequest checks the flow table against a
// brute-force reference over random feedback sequences: for every message,
// the least quota among the flows it matches is the least among all the
// requests it matches (no covering merge loses or invents a limit, whatever
// the order of the feedback, Malekpour11 Algorithm 2), the flows are
// exactly the requests no other dominates, and they are sorted least quota
// first.
func TestTableLimitMatchesEveryRequest(t *testing.T) {
	quotas := []float64{1, 2, 2, 5, 10} // ties on purpose
	for seed := range uint64(300) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 9))
			tb := newTable()
			ref := map[key]refRequest{}
			now := epoch
			for step := range 60 {
				k := key{sub: rng.Uint64N(4), filter: uint32(rng.IntN(3))}
				switch op := rng.IntN(10); {
				case op == 0:
					tb.drop(k)
					delete(ref, k)
				default:
					b, q := subsetBloom(uint(rng.IntN(64))), quotas[rng.IntN(len(quotas))]
					tb.set(k, b, q, now)
					ref[k] = refRequest{b, q}
				}
				for mask := range uint(64) {
					m := subsetBloom(mask)
					want := math.Inf(1)
					for _, r := range ref {
						if r.bloom.SubsetOf(m) {
							want = min(want, r.quota)
						}
					}
					got := math.Inf(1)
					if fs := tb.match(nil, m); len(fs) > 0 {
						got = fs[0].quota
					}
					// Compared before require: its reflection on each of
					// 1.1 million answers was half the test's time.
					if got != want {
						require.Equal(t, want, got, "step %d, message %06b", step, mask)
					}
				}
				var wantActive []key
				for k := range ref {
					r := tb.byKey[k]
					if !slices.ContainsFunc(tb.all, func(x *request) bool { return dominates(x, r) }) {
						wantActive = append(wantActive, k)
					}
				}
				var gotActive []key
				for i, r := range tb.active {
					gotActive = append(gotActive, r.key)
					if i > 0 {
						require.True(t, less(tb.active[i-1], r), "flows out of order at step %d", step)
					}
				}
				require.ElementsMatch(t, wantActive, gotActive, "step %d", step)
				require.Len(t, tb.all, len(ref))
			}
		})
	}
}

// TestAlgorithm2Cases walks the three cases of Malekpour11 Algorithm 2.
func TestAlgorithm2Cases(t *testing.T) {
	general, narrow := bits(1), bits(1, 2) // general covers narrow
	tb := newTable()
	tb.set(key{1, 1}, general, 10, epoch)
	// (2) a flow covered by one with a lower quota adds nothing.
	tb.set(key{2, 1}, narrow, 20, epoch)
	require.Len(t, tb.active, 1)
	require.Equal(t, key{1, 1}, tb.active[0].key)
	// (1) the CLR changes its own quota; the narrow flow now limits more.
	tb.set(key{1, 1}, general, 30, epoch)
	require.Len(t, tb.active, 2)
	require.Equal(t, key{2, 1}, tb.active[0].key, "least quota first")
	// (3) a request covering a flow of higher quota replaces it.
	tb.set(key{3, 1}, general, 5, epoch)
	require.Len(t, tb.active, 1)
	require.Equal(t, key{3, 1}, tb.active[0].key)
	// Expiry of the limiting request lets the others limit again.
	tb.set(key{1, 1}, general, 30, epoch.Add(time.Second))
	tb.set(key{2, 1}, narrow, 20, epoch.Add(time.Second))
	tb.expire(epoch.Add(time.Millisecond))
	require.Len(t, tb.active, 2)
}
