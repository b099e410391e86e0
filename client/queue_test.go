package client

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDeliveryQueueMatchesASlice: pushes and pops in random runs keep the
// order a plain slice keeps, and the space stays within twice the most
// ever queued (it moves down instead of growing while half is free).
func TestDeliveryQueueMatchesASlice(t *testing.T) {
	for seed := range uint64(50) {
		rng := rand.New(rand.NewPCG(seed, 1))
		var q deliveryQueue
		var ref []Delivery
		next, most := uint64(1), 0
		for range 2000 {
			if rng.IntN(3) > 0 || len(ref) == 0 { // grow more often than shrink
				for range rng.IntN(40) {
					d := Delivery{Seq: next}
					next++
					q.push(d)
					ref = append(ref, d)
				}
			} else {
				for k := rng.IntN(len(ref) + 1); k > 0; k-- {
					require.Equal(t, ref[0].Seq, q.front().Seq, "seed %d", seed)
					q.pop()
					ref = ref[1:]
				}
			}
			most = max(most, len(ref))
			require.Equal(t, len(ref), q.len(), "seed %d", seed)
			if len(ref) > 0 {
				require.Equal(t, ref[0].Seq, q.all()[0].Seq, "seed %d", seed)
				require.Equal(t, ref[len(ref)-1].Seq, q.all()[q.len()-1].Seq, "seed %d", seed)
			}
		}
		require.LessOrEqual(t, cap(q.buf), 4*max(most, 8), "seed %d: space bounded by what was queued", seed)
	}
}
