package sim

import (
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dripmesh/drip/internal/encoding"
	"github.com/dripmesh/drip/internal/linkstate"
)

// truth is the brute-force reference: all-pairs shortest paths by
// Floyd–Warshall over the links that really work, with linkstate's
// lexicographic weight (Σ cost, Σ EdgeHash), independent of anything the
// routers computed.
type truth struct {
	idx  map[uint32]int
	ids  []uint32
	w    [][]weight
	dist [][]weight
}

type weight struct{ cost, hash uint64 }

var inf = weight{math.MaxUint64, math.MaxUint64}

func (a weight) less(b weight) bool { return a.cost < b.cost || a.cost == b.cost && a.hash < b.hash }
func (a weight) plus(b weight) weight {
	return weight{a.cost + b.cost, a.hash + b.hash}
}

// newTruth takes each direction's cost from cost(from, to, link).
func newTruth(ids []uint32, links []Link, cost func(from, to uint32, l Link) uint64) *truth {
	tr := &truth{idx: map[uint32]int{}, ids: ids}
	n := len(ids)
	for i, id := range ids {
		tr.idx[id] = i
	}
	tr.w, tr.dist = make([][]weight, n), make([][]weight, n)
	for i := range n {
		tr.w[i], tr.dist[i] = make([]weight, n), make([]weight, n)
		for j := range n {
			tr.w[i][j], tr.dist[i][j] = inf, inf
		}
		tr.dist[i][i] = weight{}
	}
	for _, l := range links {
		for _, d := range [][2]uint32{{l.A, l.B}, {l.B, l.A}} {
			w := weight{cost(d[0], d[1], l), linkstate.EdgeHash(d[0], d[1])}
			tr.w[tr.idx[d[0]]][tr.idx[d[1]]], tr.dist[tr.idx[d[0]]][tr.idx[d[1]]] = w, w
		}
	}
	for k := range n {
		for i := range n {
			if tr.dist[i][k] == inf {
				continue
			}
			for j := range n {
				if tr.dist[k][j] != inf {
					if w := tr.dist[i][k].plus(tr.dist[k][j]); w.less(tr.dist[i][j]) {
						tr.dist[i][j] = w
					}
				}
			}
		}
	}
	return tr
}

func weightCost(_, _ uint32, l Link) uint64 { return uint64(l.Weight) }

func (tr *truth) nextHop(s, d uint32) (uint32, bool) {
	i, j := tr.idx[s], tr.idx[d]
	if i == j || tr.dist[i][j] == inf {
		return 0, false
	}
	best, arg := inf, -1
	for v := range tr.ids {
		if tr.w[i][v] != inf && tr.dist[v][j] != inf {
			if w := tr.w[i][v].plus(tr.dist[v][j]); w.less(best) {
				best, arg = w, v
			}
		}
	}
	return tr.ids[arg], true
}

// checkRoutes compares every live router's UNICAST table with the truth.
func checkRoutes(t *testing.T, nw *Network, cost func(from, to uint32, l Link) uint64) {
	t.Helper()
	tr := newTruth(nw.Routers(), nw.TrueLinks(), cost)
	for _, comp := range nw.Components() {
		for _, s := range comp {
			r := nw.Routes(s)
			require.Equal(t, len(comp), r.Known(), "router %d", s)
			for _, d := range nw.Routers() {
				want, wok := tr.nextHop(s, d)
				got, gok := r.NextHop(d)
				require.Equal(t, wok, gok, "router %d reaches %d", s, d)
				require.Equal(t, want, got, "next hop %d→%d", s, d)
			}
		}
	}
}

// checkPredicates compares every live router's PREDICATES table (both as
// published by the node and as rebuilt from its updates) with what the
// routers of its component advertised (Carzaniga09 §2.2).
func checkPredicates(t *testing.T, nw *Network) {
	t.Helper()
	for _, comp := range nw.Components() {
		want := map[uint32][]encoding.Bloom{}
		for _, id := range comp {
			want[id] = nw.Advertised(id)
		}
		for _, id := range comp {
			// maps.EqualFunc first: require's reflection over every
			// router's table of 256-byte Blooms, for each of 200 routers,
			// was a twentieth of the package's time under -race.
			if got := nw.PredicateTable(id); !sameTables(want, got) {
				require.Equal(t, normal(want), normal(got), "router %d, from updates", id)
			}
			if got := nw.Node(id).Predicates(); !sameTables(want, got) {
				require.Equal(t, normal(want), normal(got), "router %d, published", id)
			}
		}
	}
}

// sameTables is require.Equal(normal(a), normal(b)) without reflection.
func sameTables(a, b map[uint32][]encoding.Bloom) bool {
	return maps.EqualFunc(normal(a), normal(b), slices.Equal[[]encoding.Bloom])
}

func normal(m map[uint32][]encoding.Bloom) map[uint32][]encoding.Bloom {
	out := map[uint32][]encoding.Bloom{}
	for k, v := range m {
		if len(v) == 0 {
			v = nil
		}
		out[k] = v
	}
	return out
}

func randomFilters(rng *rand.Rand, n, m int) []encoding.Bloom {
	out := make([]encoding.Bloom, n)
	for i := range out {
		for range 10 {
			out[i].Set(rng.IntN(m))
		}
	}
	return out
}

func converge(t *testing.T, nw *Network, limit time.Duration) time.Duration {
	t.Helper()
	d, err := nw.RunUntilConverged(limit)
	require.NoError(t, err)
	require.Empty(t, nw.Errors())
	return d
}

func TestConvergesToShortestPaths(t *testing.T) {
	// Carzaniga09 §2.2 / docs/design.md §3: after convergence every router's UNICAST
	// next hop is the shortest-path next hop of the true topology (with
	// the tie-break), and its PREDICATES table holds every router's
	// advertisement. Weights in [1, 3] make equal-cost paths common.
	sizes := []int{10, 50, 200}
	if testing.Short() {
		sizes = sizes[:2]
	}
	for _, n := range sizes {
		seeds := uint64(2)
		if n > 100 {
			seeds = 1 // a few seconds under -race
		}
		for seed := range seeds {
			t.Run(fmt.Sprintf("n=%d/seed=%d", n, seed), func(t *testing.T) {
				topo := RandomConnected(n, 4, seed).RandomWeights(3, seed)
				nw, err := New(topo, Options{Seed: seed})
				require.NoError(t, err)
				rng := rand.New(rand.NewPCG(seed, 9))
				for _, id := range nw.Routers() {
					if rng.IntN(2) == 0 {
						require.NoError(t, nw.SetPredicate(id, randomFilters(rng, 1+rng.IntN(5), 192)))
					}
				}
				converge(t, nw, time.Minute)
				checkRoutes(t, nw, weightCost)
				checkPredicates(t, nw)
			})
		}
	}
}

func TestDeterministic(t *testing.T) {
	run := func() (LinkStats, []uint64) {
		nw, err := New(RandomConnected(30, 3, 7), Options{Seed: 7})
		require.NoError(t, err)
		for _, l := range nw.TrueLinks() {
			nw.SetDrop(l.A, l.B, 0.1)
		}
		nw.RunFor(20 * time.Second)
		var digests []uint64
		for _, id := range nw.Routers() {
			digests = append(digests, nw.Node(id).Digest())
		}
		return nw.TotalStats(), digests
	}
	s1, d1 := run()
	s2, d2 := run()
	assert.Equal(t, s1, s2)
	assert.Equal(t, d1, d2)
	assert.Positive(t, s1.Dropped)
}

func TestLinkCutAndHeal(t *testing.T) {
	nw, err := New(Ring(8), Options{})
	require.NoError(t, err)
	converge(t, nw, 10*time.Second)
	next, _ := nw.Routes(0).NextHop(1)
	require.Equal(t, uint32(1), next)

	nw.Cut(0, 1)
	d := converge(t, nw, 10*time.Second)
	assert.Less(t, d, nw.Node(0).Config().DeadInterval, "a closed stream needs no dead interval")
	next, _ = nw.Routes(0).NextHop(1)
	assert.Equal(t, uint32(7), next, "the long way round")
	checkRoutes(t, nw, weightCost)

	nw.Heal(0, 1)
	converge(t, nw, 10*time.Second)
	checkRoutes(t, nw, weightCost)
	next, _ = nw.Routes(0).NextHop(1)
	assert.Equal(t, uint32(1), next)
}

func TestRouterDeathAndRestart(t *testing.T) {
	// docs/design.md §3: aging and withdrawal of dead routers; a restarted router
	// begins again at sequence number 1 and jumps past its old entries.
	nw, err := New(Grid(4, 4), Options{Seed: 3})
	require.NoError(t, err)
	rng := rand.New(rand.NewPCG(3, 3))
	for _, id := range nw.Routers() {
		require.NoError(t, nw.SetPredicate(id, randomFilters(rng, 3, 192)))
	}
	converge(t, nw, 10*time.Second)
	// Some history, so the old incarnation's sequence numbers are high.
	for i := range 4 {
		require.NoError(t, nw.SetPredicate(5, randomFilters(rng, 1+i, 192)))
		nw.SetWeight(5, 6, uint32(2+i))
		nw.RunFor(time.Second)
	}
	converge(t, nw, 10*time.Second)
	oldLSA, _ := nw.Node(0).LSA(5)

	nw.Kill(5)
	converge(t, nw, 10*time.Second)
	checkRoutes(t, nw, weightCost)
	checkPredicates(t, nw)
	for _, id := range nw.Routers() {
		if id != 5 {
			assert.NotContains(t, nw.PredicateTable(id), uint32(5))
			assert.False(t, nw.Routes(id).Reachable(5))
		}
	}

	require.NoError(t, nw.Restart(5))
	converge(t, nw, 10*time.Second)
	checkRoutes(t, nw, weightCost)
	checkPredicates(t, nw)
	lsa, ok := nw.Node(0).LSA(5)
	require.True(t, ok)
	assert.Greater(t, lsa.Seq, oldLSA.Seq)
	assert.Positive(t, nw.EventCount(linkstate.EventSeqJump))
	// The new incarnation advertised nothing yet: its row is empty.
	assert.Empty(t, nw.PredicateTable(0)[5])
	assert.Contains(t, nw.PredicateTable(0), uint32(5))
}

func TestGracefulStopWithdrawsAtOnce(t *testing.T) {
	// docs/design.md §3: a leaving router's withdrawal removes it everywhere
	// within the flooding delay, not after DeadInterval.
	nw, err := New(Line(6), Options{})
	require.NoError(t, err)
	require.NoError(t, nw.SetPredicate(5, []encoding.Bloom{{}}))
	converge(t, nw, 10*time.Second)
	require.Contains(t, nw.PredicateTable(0), uint32(5))

	nw.Stop(5)
	nw.RunFor(50 * time.Millisecond) // 5 hops of 1 ms
	for _, id := range []uint32{0, 1, 2, 3, 4} {
		assert.NotContains(t, nw.PredicateTable(id), uint32(5), "router %d", id)
		assert.False(t, nw.Routes(id).Reachable(5))
	}
	converge(t, nw, 10*time.Second)
	checkRoutes(t, nw, weightCost)
	require.NoError(t, nw.Restart(5))
	converge(t, nw, 10*time.Second)
	checkRoutes(t, nw, weightCost)
	checkPredicates(t, nw)
}

func TestPartitionAndMerge(t *testing.T) {
	nw, err := New(RandomConnected(30, 3, 11), Options{Seed: 11})
	require.NoError(t, err)
	rng := rand.New(rand.NewPCG(11, 1))
	for _, id := range nw.Routers() {
		require.NoError(t, nw.SetPredicate(id, randomFilters(rng, 2, 192)))
	}
	converge(t, nw, 10*time.Second)

	var left []uint32
	for id := range uint32(12) {
		left = append(left, id)
	}
	nw.Partition(left)
	d := converge(t, nw, 30*time.Second)
	assert.GreaterOrEqual(t, d, nw.Node(0).Config().DeadInterval, "no stream closes: dead interval detects it")
	require.GreaterOrEqual(t, len(nw.Components()), 2)
	checkRoutes(t, nw, weightCost)
	checkPredicates(t, nw)
	// Unreachable routers' entries stay in the LSDB (until MaxAge) but
	// not in the published table.
	assert.Equal(t, 60, nw.Node(0).LSDBSize())

	// Predicates change on both sides while partitioned.
	require.NoError(t, nw.SetPredicate(0, randomFilters(rng, 4, 192)))
	require.NoError(t, nw.SetPredicate(29, randomFilters(rng, 4, 192)))
	converge(t, nw, 10*time.Second)
	checkPredicates(t, nw)

	nw.Merge()
	converge(t, nw, 30*time.Second)
	require.Len(t, nw.Components(), 1)
	checkRoutes(t, nw, weightCost)
	checkPredicates(t, nw)
}

func TestPartitionOutlastingMaxAge(t *testing.T) {
	cfg := func(id uint32) linkstate.Config {
		c := linkstate.DefaultConfig(id, "")
		c.RefreshInterval, c.MaxAge = 20*time.Second, 60*time.Second
		return c
	}
	nw, err := New(Line(4), Options{Config: cfg})
	require.NoError(t, err)
	converge(t, nw, 10*time.Second)
	nw.Partition([]uint32{0, 1})
	nw.RunFor(90 * time.Second)
	converge(t, nw, 10*time.Second)
	assert.Equal(t, 4, nw.Node(0).LSDBSize(), "the other side's entries aged out")
	assert.Positive(t, nw.EventCount(linkstate.EventExpired))
	nw.Merge()
	converge(t, nw, 30*time.Second)
	assert.Equal(t, 8, nw.Node(0).LSDBSize())
	checkRoutes(t, nw, weightCost)
	checkPredicates(t, nw)
}

func TestPredicateChange(t *testing.T) {
	// Carzaniga09 §2.2: PREDICATES follows every router's advertisement.
	nw, err := New(Grid(3, 3), Options{})
	require.NoError(t, err)
	converge(t, nw, 10*time.Second)
	rng := rand.New(rand.NewPCG(1, 1))
	for i := range 5 {
		id := uint32(rng.IntN(9))
		require.NoError(t, nw.SetPredicate(id, randomFilters(rng, i, 192)))
		converge(t, nw, 10*time.Second)
		checkPredicates(t, nw)
	}
}

func TestMeasuredCostHysteresis(t *testing.T) {
	// Kim10 §2.1 / docs/design.md §3: in RTT mode links cost their smoothed RTT,
	// re-advertised only when it moves more than 20%. Router 0 reaches 3
	// via 1 (RTT costs 20 ms + 2 ms) or via 2 (20 ms + 3 ms).
	topo := Topology{Routers: []uint32{0, 1, 2, 3}, Links: []Link{
		{A: 0, B: 1, Weight: 1, Delay: 10 * time.Millisecond},
		{A: 1, B: 3, Weight: 1, Delay: time.Millisecond},
		{A: 0, B: 2, Weight: 1, Delay: 10 * time.Millisecond},
		{A: 2, B: 3, Weight: 1, Delay: 1500 * time.Microsecond},
	}}
	cfg := func(id uint32) linkstate.Config {
		c := linkstate.DefaultConfig(id, "")
		c.CostMode = linkstate.CostRTT
		return c
	}
	nw, err := New(topo, Options{Config: cfg})
	require.NoError(t, err)
	nw.RunFor(10 * time.Second)
	converge(t, nw, 10*time.Second)
	rttCost := func(from, to uint32, l Link) uint64 { return uint64(2 * l.Delay / time.Microsecond) }
	checkRoutes(t, nw, rttCost)
	next, _ := nw.Routes(0).NextHop(3)
	require.Equal(t, uint32(1), next)
	lsa0, _ := nw.Node(3).LSA(0)
	changes := nw.EventCount(linkstate.EventCostChanged)

	// +15%: the path via 1 is now the longer one (23 + 2 > 20 + 3), but the
	// change is within the hysteresis, so nothing is re-advertised.
	nw.SetDelay(0, 1, 11500*time.Microsecond)
	nw.RunFor(30 * time.Second)
	converge(t, nw, 10*time.Second)
	now, _ := nw.Node(3).LSA(0)
	assert.Equal(t, lsa0.Seq, now.Seq)
	assert.Equal(t, changes, nw.EventCount(linkstate.EventCostChanged))
	next, _ = nw.Routes(0).NextHop(3)
	assert.Equal(t, uint32(1), next, "routes do not flap for a small change")

	// +30%: re-advertised, and the route moves.
	nw.SetDelay(0, 1, 13*time.Millisecond)
	nw.RunFor(10 * time.Second)
	converge(t, nw, 10*time.Second)
	now, _ = nw.Node(3).LSA(0)
	assert.Greater(t, now.Seq, lsa0.Seq)
	assert.Greater(t, nw.EventCount(linkstate.EventCostChanged), changes)
	next, _ = nw.Routes(0).NextHop(3)
	assert.Equal(t, uint32(2), next)
	for _, nb := range nw.Node(0).Neighbors() {
		if nb.ID == 1 {
			assert.InDelta(t, 26000, float64(nb.Cost), 26000*0.2)
		}
	}
}

func TestDropHealedByAntiEntropy(t *testing.T) {
	// docs/design.md §3: without acknowledgements, a lost flood is healed by the
	// LSDB digests in hellos and a database exchange.
	nw, err := New(Line(3), Options{})
	require.NoError(t, err)
	converge(t, nw, 10*time.Second)
	nw.RunFor(50 * time.Millisecond)

	nw.SetDrop(1, 2, 1)
	f := []encoding.Bloom{{}}
	f[0].Set(42)
	require.NoError(t, nw.SetPredicate(0, f))
	nw.RunFor(100 * time.Millisecond)
	nw.SetDrop(1, 2, 0)
	require.NotContains(t, nw.PredicateTable(1), uint32(0)+100)
	require.Empty(t, nw.PredicateTable(2)[0], "the flood to 2 was lost")
	require.Equal(t, f, nw.PredicateTable(1)[0])

	converge(t, nw, 10*time.Second)
	assert.Equal(t, f, nw.PredicateTable(2)[0])
	assert.Positive(t, nw.EventCount(linkstate.EventAntiEntropy))
	checkPredicates(t, nw)
}

func TestLossyNetworkConverges(t *testing.T) {
	// Floods, database exchanges and hellos lost at random on every link;
	// once the loss stops, anti-entropy brings everything back.
	nw, err := New(RandomConnected(40, 3, 5).RandomWeights(4, 5), Options{Seed: 5})
	require.NoError(t, err)
	links := nw.TrueLinks()
	for _, l := range links {
		nw.SetDrop(l.A, l.B, 0.2)
		nw.SetDrop(l.B, l.A, 0.2)
	}
	rng := rand.New(rand.NewPCG(5, 5))
	for range 20 {
		id := uint32(rng.IntN(40))
		require.NoError(t, nw.SetPredicate(id, randomFilters(rng, 1+rng.IntN(3), 192)))
		nw.RunFor(500 * time.Millisecond)
	}
	for _, l := range links {
		nw.SetDrop(l.A, l.B, 0)
		nw.SetDrop(l.B, l.A, 0)
	}
	converge(t, nw, time.Minute)
	checkRoutes(t, nw, weightCost)
	checkPredicates(t, nw)
}

func TestRestartRequiresDeadRouter(t *testing.T) {
	nw, err := New(Line(2), Options{})
	require.NoError(t, err)
	require.ErrorContains(t, nw.Restart(0), "router is running")
	nw.Kill(0)
	require.ErrorContains(t, nw.SetPredicate(0, nil), "router is dead")
	require.NoError(t, nw.Restart(0))
}

func TestStatsCountControlTraffic(t *testing.T) {
	nw, err := New(Line(2), Options{})
	require.NoError(t, err)
	converge(t, nw, 10*time.Second)
	s := nw.Stats(0, 1)
	assert.Positive(t, s.ByKind[KindHello].Messages)
	assert.Positive(t, s.ByKind[KindLSA].Messages)
	assert.Equal(t, int64(1), s.ByKind[KindSummary].Messages, "each side sends one summary")
	assert.Equal(t, int64(1), nw.Stats(1, 0).ByKind[KindSummary].Messages)
	var sum int64
	for _, k := range s.ByKind {
		sum += k.Bytes
	}
	assert.Equal(t, s.Bytes, sum)
	total := nw.TotalStats()
	assert.Equal(t, s.Bytes+nw.Stats(1, 0).Bytes, total.Bytes)
	nw.ResetStats()
	assert.Zero(t, nw.TotalStats().Messages)
}
