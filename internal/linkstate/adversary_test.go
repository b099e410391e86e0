package linkstate

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dripmesh/drip/internal/encoding"
)

// forge is an advertisement a hostile neighbour sends in another router's
// name.
func forge(origin uint32, kind Kind, seq uint64, age time.Duration) Message {
	if kind == KindRouter {
		return &LSA{Origin: origin, Seq: seq, Age: age}
	}
	return &PredAd{Origin: origin, Seq: seq, Age: age, Params: encoding.DefaultParams(), Filters: []encoding.Bloom{{}}}
}

// requireGenuine checks that the mesh has settled on what its routers say
// themselves: every node holds each router's own entries, and reaches
// every router.
func requireGenuine(t *testing.T, m *mesh) {
	t.Helper()
	requireSynced(t, m)
	for _, id := range m.ids() {
		own, ok := m.nodes[id].LSA(id)
		require.True(t, ok)
		for _, other := range m.ids() {
			held, ok := m.nodes[other].LSA(id)
			require.True(t, ok, "router %d holds no LSA of %d", other, id)
			require.Equal(t, own.Links, held.Links, "router %d's LSA as router %d holds it", id, other)
			require.Equal(t, len(m.ids()), m.nodes[other].Routes().Known())
		}
	}
}

// TestForgedMaxSequenceNumber: an advertisement forged in a router's name
// with the largest sequence numbers cannot take the router's place for
// good nor set off a storm: the router flushes it (OSPF's premature aging,
// RFC 2328 §14.1) and starts its sequence again, so the mesh settles on
// the genuine entries once the forger stops.
func TestForgedMaxSequenceNumber(t *testing.T) {
	for _, seq := range []uint64{math.MaxUint64, math.MaxUint64 - 1, math.MaxUint64 - 2, 1 << 63} {
		for _, kind := range []Kind{KindRouter, KindPredicate} {
			t.Run(fmt.Sprintf("%s seq %d", kind, seq), func(t *testing.T) {
				m := line(t, 3)
				for round := range 3 { // the forger repeats itself
					now := time.Duration(round+1) * time.Second
					m.tick(now)
					require.NoError(t, m.nodes[2].Step(3, forge(1, kind, seq, 0), now))
					m.pump(now)
					requireGenuine(t, m)
				}
				// Quiet afterwards: only hellos and refreshes flow.
				m.reset()
				for s := 4; s <= 30; s++ {
					m.tick(time.Duration(s) * time.Second)
				}
				for _, id := range m.ids() {
					require.Empty(t, events(*m.log[id], EventSeqJump), "router %d jumped after the forger left", id)
					require.Empty(t, events(*m.log[id], EventSeqFlush), "router %d flushed after the forger left", id)
				}
				requireGenuine(t, m)
				// Router 1 still originates: a link that fails and
				// comes back is in every database.
				m.nodes[1].LinkDown(2, 31*time.Second)
				m.nodes[2].LinkDown(1, 31*time.Second)
				m.pump(31 * time.Second)
				m.link(1, 2, 1, 32*time.Second)
				requireGenuine(t, m)
			})
		}
	}
}

// TestAdversarialAdvertisements is a property test: a neighbour injects
// advertisements in the names of the other routers with sequence numbers
// from the edges of their range and ages up to and past MaxAge; once it
// stops, the mesh settles on the genuine entries without a message storm.
// A failure names the seed; rerun it alone with -run
// 'TestAdversarialAdvertisements/seed_N'.
func TestAdversarialAdvertisements(t *testing.T) {
	seqs := []uint64{1, 2, 1 << 32, 1 << 63, math.MaxUint64 - 2, math.MaxUint64 - 1, math.MaxUint64}
	for seed := uint64(1); seed <= 200; seed++ {
		t.Run(fmt.Sprintf("seed %d", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 17))
			m := line(t, 4)
			maxAge := m.nodes[1].Config().MaxAge
			now := time.Second
			for range 1 + rng.IntN(8) {
				origin := uint32(1 + rng.IntN(3)) // routers 1-3; router 4 forges
				at := uint32(3)                   // its neighbour
				kind := Kind(KindRouter + Kind(rng.IntN(2)))
				age := []time.Duration{0, time.Second, maxAge - time.Second, maxAge, maxAge + time.Hour}[rng.IntN(5)]
				_ = m.nodes[at].Step(4, forge(origin, kind, seqs[rng.IntN(len(seqs))], age), now)
				m.pump(now)
				now += time.Duration(rng.IntN(3000)) * time.Millisecond
			}
			for range 30 {
				now += time.Second
				m.tick(now)
			}
			requireGenuine(t, m)
		})
	}
}

// TestMaxRouterID: with a bound, router IDs beyond it enter no table,
// whoever names them: a link, an LSA's origin or far end, a predicate
// advertisement, a database summary.
func TestMaxRouterID(t *testing.T) {
	bounded := func(c *Config) { c.MaxRouterID = 10 }
	n := newNode(t, 1, bounded)
	require.ErrorContains(t, n.LinkUp(11, 1, 0), "router ID beyond the largest admitted, 10")
	require.NoError(t, n.LinkUp(2, 1, 0))
	for _, tc := range []struct {
		msg  Message
		want string
	}{
		{&LSA{Origin: 11, Seq: 1}, "LSA of router 11: router ID beyond"},
		{&LSA{Origin: 3, Seq: 1, Links: []Link{{Neighbor: 1 << 26, Cost: 1}}}, "lists a link to router 67108864, beyond the largest admitted, 10"},
		{forge(1<<26, KindPredicate, 1, 0), "predicate advertisement of router 67108864: router ID beyond"},
	} {
		require.ErrorContains(t, n.Step(2, tc.msg, time.Second), tc.want)
	}
	for _, id := range []uint32{11, 1 << 26} {
		_, ok := n.LSA(id)
		require.False(t, ok)
	}
	drain(n)
	// A summary listing routers beyond the bound asks only for the others.
	require.NoError(t, n.Step(2, &DBSummary{Entries: []Summary{
		{Kind: KindRouter, Origin: 3, Seq: 1}, {Kind: KindRouter, Origin: 11, Seq: 1}, {Kind: KindRouter, Origin: 4, Seq: 1},
	}}, time.Second))
	var asked []uint32
	for _, req := range only[*DBRequest](to(drain(n), 2)) {
		for _, k := range req.Keys {
			asked = append(asked, k.Origin)
		}
	}
	require.Equal(t, []uint32{3, 4}, asked)
	// Unbounded by default.
	require.NoError(t, newNode(t, 1).LinkUp(1<<26, 1, 0))
}
