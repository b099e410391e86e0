package linkstate

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dripmesh/drip/internal/encoding"
)

// randomLSAs returns the LSAs of a random connected graph of n routers with
// IDs spread over [0, idSpan), about deg links per router, costs in
// [1, maxCost] (a small range makes equal-cost paths common), and a
// fraction oneWay of links listed by one end only, which SPF must ignore.
func randomLSAs(rng *rand.Rand, n, deg int, maxCost uint32, idSpan uint32, oneWay float64) []*LSA {
	ids := make([]uint32, 0, n)
	seen := map[uint32]bool{}
	for len(ids) < n {
		id := rng.Uint32N(idSpan)
		if !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	links := map[uint32]map[uint32]uint32{}
	for _, id := range ids {
		links[id] = map[uint32]uint32{}
	}
	add := func(a, b uint32) {
		if a == b {
			return
		}
		switch {
		case rng.Float64() < oneWay:
			links[a][b] = 1 + rng.Uint32N(maxCost)
		default:
			links[a][b] = 1 + rng.Uint32N(maxCost)
			links[b][a] = 1 + rng.Uint32N(maxCost) // costs may differ per direction
		}
	}
	for i := 1; i < n; i++ { // a random spanning tree keeps most of it connected
		a, b := ids[i], ids[rng.IntN(i)]
		links[a][b] = 1 + rng.Uint32N(maxCost)
		links[b][a] = 1 + rng.Uint32N(maxCost)
	}
	for range max(0, n*deg/2-(n-1)) {
		add(ids[rng.IntN(n)], ids[rng.IntN(n)])
	}
	slices.Sort(ids)
	out := make([]*LSA, 0, n)
	for _, id := range ids {
		a := &LSA{Origin: id, Seq: 1}
		for nb, c := range links[id] {
			a.Links = append(a.Links, Link{Neighbor: nb, Cost: c})
		}
		slices.SortFunc(a.Links, func(x, y Link) int { return cmp.Compare(x.Neighbor, y.Neighbor) })
		out = append(out, a)
	}
	return out
}

// reference computes all-pairs shortest paths with the same lexicographic
// weight by Floyd–Warshall, straight from the LSAs: an independent check of
// the two-way test, Dijkstra and first-hop propagation.
type reference struct {
	ids  []uint32
	idx  map[uint32]int
	w    [][]weight // direct links, infinite if none
	dist [][]weight
}

func newReference(lsas []*LSA) *reference { return newReferenceWith(lsas, EdgeHash) }

func newReferenceWith(lsas []*LSA, hash func(u, v uint32) uint64) *reference {
	r := &reference{idx: map[uint32]int{}}
	byID := map[uint32]*LSA{}
	for _, a := range lsas {
		r.idx[a.Origin] = len(r.ids)
		r.ids = append(r.ids, a.Origin)
		byID[a.Origin] = a
	}
	n := len(r.ids)
	r.w = make([][]weight, n)
	r.dist = make([][]weight, n)
	for i := range n {
		r.w[i] = make([]weight, n)
		r.dist[i] = make([]weight, n)
		for j := range n {
			r.w[i][j], r.dist[i][j] = infinite, infinite
		}
		r.dist[i][i] = weight{}
	}
	for _, a := range lsas {
		for _, l := range a.Links {
			b, ok := byID[l.Neighbor]
			if !ok {
				continue
			}
			back := false
			for _, m := range b.Links {
				back = back || m.Neighbor == a.Origin
			}
			if back {
				w := weight{uint64(l.Cost), hash(a.Origin, l.Neighbor)}
				r.w[r.idx[a.Origin]][r.idx[l.Neighbor]] = w
				r.dist[r.idx[a.Origin]][r.idx[l.Neighbor]] = w
			}
		}
	}
	for k := range n {
		for i := range n {
			if r.dist[i][k] == infinite {
				continue
			}
			for j := range n {
				if r.dist[k][j] == infinite {
					continue
				}
				if w := add(r.dist[i][k], r.dist[k][j]); w.less(r.dist[i][j]) {
					r.dist[i][j] = w
				}
			}
		}
	}
	return r
}

func add(a, b weight) weight { return weight{a.cost + b.cost, a.hash + b.hash} }

// nextHop is the neighbour v of s minimising w(s,v) + dist(v,d).
func (r *reference) nextHop(s, d uint32) (uint32, bool) {
	i, j := r.idx[s], r.idx[d]
	if i == j || r.dist[i][j] == infinite {
		return 0, false
	}
	best, arg := infinite, -1
	for v := range r.ids {
		if r.w[i][v] == infinite || r.dist[v][j] == infinite {
			continue
		}
		if w := add(r.w[i][v], r.dist[v][j]); w.less(best) {
			best, arg = w, v
		}
	}
	return r.ids[arg], true
}

// parent is the predecessor of v on the shortest path from s.
func (r *reference) parent(s, v int) int {
	best, arg := infinite, -1
	for u := range r.ids {
		if r.dist[s][u] == infinite || r.w[u][v] == infinite {
			continue
		}
		if w := add(r.dist[s][u], r.w[u][v]); w.less(best) {
			best, arg = w, u
		}
	}
	return arg
}

func (r *reference) children(source, self uint32) []uint32 {
	s, me := r.idx[source], r.idx[self]
	if r.dist[me][s] == infinite {
		return nil
	}
	var out []uint32
	for v := range r.ids {
		if v != s && r.w[me][v] != infinite && r.dist[s][v] != infinite && r.parent(s, v) == me {
			out = append(out, r.ids[v])
		}
	}
	return out
}

func tableFor(self uint32, lsas []*LSA) *Table { return newTable(self, newGraph(self, lsas)) }

func TestDijkstraMatchesReference(t *testing.T) {
	// docs/design.md §3: SPF with deterministic tie-breaking; checked against
	// Floyd–Warshall with the same lexicographic weight on random graphs.
	for seed := range uint64(40) {
		rng := rand.New(rand.NewPCG(seed, 1))
		n := 2 + rng.IntN(40)
		lsas := randomLSAs(rng, n, 1+rng.IntN(5), 1+rng.Uint32N(4), []uint32{uint32(n), 1000, 1 << 31}[seed%3], 0.1)
		ref := newReference(lsas)
		for _, self := range ref.ids {
			tab := tableFor(self, lsas)
			known := 0
			for _, dst := range ref.ids {
				want, wok := ref.nextHop(self, dst)
				got, gok := tab.NextHop(dst)
				require.Equal(t, wok, gok, "seed %d: %d→%d reachable", seed, self, dst)
				require.Equal(t, want, got, "seed %d: next hop %d→%d", seed, self, dst)
				d := ref.dist[ref.idx[self]][ref.idx[dst]]
				if d != infinite {
					known++
				}
				cost, ok := tab.Distance(dst)
				require.Equal(t, d != infinite, ok)
				if ok {
					require.Equal(t, d.cost, cost)
				}
			}
			require.Equal(t, known, tab.Known())
			src := ref.ids[rng.IntN(n)]
			require.Equal(t, ref.children(src, self), tab.TreeChildren(src), "seed %d: children of %d under %d", seed, self, src)
			for _, src := range ref.ids {
				s, me := ref.idx[src], ref.idx[self]
				got, ok := tab.ReversePath(src)
				if src == self || ref.dist[s][me] == infinite {
					require.False(t, ok, "seed %d: reverse path of %d from %d", seed, self, src)
					continue
				}
				require.True(t, ok)
				require.Equal(t, ref.ids[ref.parent(s, me)], got, "seed %d: reverse path of %d from %d", seed, self, src)
			}
		}
	}
}

func TestHopByHopPathsFormTrees(t *testing.T) {
	// Carzaniga09 §2.2: DRP forwards hop by hop with each router's own table;
	// with consistent tie-breaking the links a message bundle takes from an
	// ingress to all destinations form a tree, so no link carries it twice.
	// Costs in {1, 2} make equal-cost paths the rule, not the exception.
	for seed := range uint64(10) {
		rng := rand.New(rand.NewPCG(seed, 2))
		n := 30 + rng.IntN(50)
		lsas := randomLSAs(rng, n, 4, 2, uint32(n), 0)
		tables := map[uint32]*Table{}
		for _, a := range lsas {
			tables[a.Origin] = tableFor(a.Origin, lsas)
		}
		for src := range tables {
			parent := map[uint32]uint32{} // the link each router is entered by
			for dst := range tables {
				at := src
				for hops := 0; at != dst; hops++ {
					require.Less(t, hops, n, "loop from %d to %d", src, dst)
					next, ok := tables[at].NextHop(dst)
					require.True(t, ok)
					if p, seen := parent[next]; seen {
						require.Equal(t, at, p, "seed %d: %d entered from %d and %d for source %d", seed, next, p, at, src)
					}
					parent[next] = at
					at = next
				}
			}
			// Every router is entered by its reverse path from src: the
			// neighbour it takes src's bundles from (Table.ReversePath).
			for id, p := range parent {
				got, ok := tables[id].ReversePath(src)
				require.True(t, ok)
				require.Equal(t, p, got, "seed %d: %d entered from %d for source %d", seed, id, p, src)
			}
			// The broadcast tree agrees with the unicast paths from src.
			for id, tab := range tables {
				for _, c := range tab.TreeChildren(src) {
					require.Equal(t, id, parent[c], "seed %d: broadcast child %d of %d under %d", seed, c, id, src)
				}
			}
			covered := 0
			for _, tab := range tables {
				covered += len(tab.TreeChildren(src))
			}
			require.Equal(t, n-1, covered, "the broadcast tree reaches every router once")
		}
	}
}

// treeViolation follows hop-by-hop paths from every source to every
// destination with the given next-hop function and returns a description
// of the first router entered over two different links, or "".
func treeViolation(ids []uint32, next func(at, dst uint32) uint32) string {
	for _, src := range ids {
		parent := map[uint32]uint32{}
		for _, dst := range ids {
			for at := src; at != dst; {
				nh := next(at, dst)
				if p, seen := parent[nh]; seen && p != at {
					return fmt.Sprintf("source %d: router %d entered from %d and %d", src, nh, p, at)
				}
				parent[nh] = at
				at = nh
			}
		}
	}
	return ""
}

func TestPositionDependentTieBreakBreaksTrees(t *testing.T) {
	// doc.go: a tie-break that depends on the router applying it (here
	// per-router ECMP hashing among equal-cost next hops, on costs only)
	// does not compose into trees. This is the failure unique shortest
	// paths prevent, and it shows the check above can fail.
	found := false
	for seed := uint64(0); seed < 20 && !found; seed++ {
		rng := rand.New(rand.NewPCG(seed, 2))
		n := 30 + rng.IntN(50)
		lsas := randomLSAs(rng, n, 4, 2, uint32(n), 0)
		ref := newReferenceWith(lsas, func(u, v uint32) uint64 { return 0 })
		ecmp := func(at, dst uint32) uint32 {
			i, j := ref.idx[at], ref.idx[dst]
			var equal []uint32
			for v := range ref.ids {
				if ref.w[i][v] != infinite && ref.dist[v][j] != infinite && add(ref.w[i][v], ref.dist[v][j]) == ref.dist[i][j] {
					equal = append(equal, ref.ids[v])
				}
			}
			return equal[mix64(uint64(at)<<32|uint64(dst))%uint64(len(equal))]
		}
		if v := treeViolation(ref.ids, ecmp); v != "" {
			t.Logf("seed %d: %s", seed, v)
			found = true
		}
	}
	assert.True(t, found, "per-router ECMP formed trees on every graph")
}

func TestTwoWayCheck(t *testing.T) {
	// docs/design.md §3: A→B is used only if B's LSA lists A.
	lsas := []*LSA{
		{Origin: 1, Seq: 1, Links: []Link{{2, 1}, {3, 1}}},
		{Origin: 2, Seq: 1, Links: []Link{{1, 1}}},
		{Origin: 3, Seq: 1}, // a stale or dead router's neighbours still list it
	}
	tab := tableFor(1, lsas)
	assert.True(t, tab.Reachable(2))
	assert.False(t, tab.Reachable(3))
	assert.Equal(t, []uint32{1, 2}, tab.Routers())
	_, ok := tab.NextHop(3)
	assert.False(t, ok)
	assert.Nil(t, tab.TreeChildren(3))
	assert.Equal(t, []uint32{2}, tab.TreeChildren(1))
	_, ok = tab.NextHop(99)
	assert.False(t, ok)
}

func TestTieBreakIsNotLowestID(t *testing.T) {
	// A square 1-2-4, 1-3-4 with equal costs: the hash decides, and both
	// ends agree on one path, in each direction.
	lsas := []*LSA{
		{Origin: 1, Seq: 1, Links: []Link{{2, 1}, {3, 1}}},
		{Origin: 2, Seq: 1, Links: []Link{{1, 1}, {4, 1}}},
		{Origin: 3, Seq: 1, Links: []Link{{1, 1}, {4, 1}}},
		{Origin: 4, Seq: 1, Links: []Link{{2, 1}, {3, 1}}},
	}
	via2 := EdgeHash(1, 2)+EdgeHash(2, 4) < EdgeHash(1, 3)+EdgeHash(3, 4)
	next, _ := tableFor(1, lsas).NextHop(4)
	if via2 {
		assert.Equal(t, uint32(2), next)
	} else {
		assert.Equal(t, uint32(3), next)
	}
}

func TestSparseIDs(t *testing.T) {
	lsas := []*LSA{
		{Origin: 5, Seq: 1, Links: []Link{{1 << 31, 3}}},
		{Origin: 1 << 31, Seq: 1, Links: []Link{{5, 3}}},
	}
	tab := tableFor(5, lsas)
	require.NotNil(t, tab.g.sparse)
	next, ok := tab.NextHop(1 << 31)
	require.True(t, ok)
	assert.Equal(t, uint32(1<<31), next)
	_, ok = tab.NextHop(6)
	assert.False(t, ok)
}

func TestHashGolden(t *testing.T) {
	// These values are computed alike by every broker: edge hashes break
	// SPF ties, checksums and digests travel in DBSummary and hellos. A
	// change splits a mixed-version mesh (hash.go).
	var b encoding.Bloom
	b.Set(0)
	b.Set(100)
	b.Set(255)
	lsa := &LSA{Origin: 3, Seq: 9, Links: []Link{{1, 10}, {7, 20000}}}
	ad := &PredAd{Origin: 3, Seq: 2, Params: encoding.Params{M: 256, K: 10}, Filters: []encoding.Bloom{b}}
	for _, g := range []struct {
		name      string
		got, want uint64
	}{
		{"edge 1→2", EdgeHash(1, 2), 0xf2c6924e7dfe},
		{"edge 2→1", EdgeHash(2, 1), 0xc72c0d73624b},
		{"edge max→0", EdgeHash(0xffffffff, 0), 0xb742092f23ab},
		{"LSA checksum", lsa.Checksum(), 0x15c58629abf4112e},
		{"PredAd checksum", ad.Checksum(), 0x93fe853e06f4e2c6},
		{"summary hash", summaryHash(Summary{KindRouter, 3, 9, lsa.Checksum()}), 0x8a326961e1ef378f},
	} {
		assert.Equal(t, fmt.Sprintf("%#x", g.want), fmt.Sprintf("%#x", g.got), g.name)
	}
	assert.Less(t, EdgeHash(0xffffffff, 0xffffffff), uint64(1)<<(64-edgeShift))
}

// The checksum covers the scheme and, beyond cat-v1, every bit of the
// wider filters: two advertisements that mean different things never
// share one.
func TestPredAdChecksumCoversScheme(t *testing.T) {
	var low, high encoding.Bloom
	low.Set(5)
	high.Set(5)
	high.Set(1500)
	v1 := encoding.Params{Scheme: encoding.SchemeCatV1, M: 512, K: 6}
	v2 := encoding.Params{Scheme: encoding.SchemeCatV2, M: 512, K: 6}
	wide := encoding.DefaultParams()
	sum := func(p encoding.Params, f encoding.Bloom) uint64 {
		return (&PredAd{Origin: 3, Seq: 2, Params: p, Filters: []encoding.Bloom{f}}).Checksum()
	}
	assert.NotEqual(t, sum(v1, low), sum(v2, low), "same M, K and bits, other scheme")
	assert.NotEqual(t, sum(wide, low), sum(wide, high), "a bit beyond 512")
	assert.Equal(t, sum(wide, high), sum(wide, high))
}

func benchLSAs(n int) []*LSA {
	return randomLSAs(rand.New(rand.NewPCG(uint64(n), 3)), n, 4, 1000, uint32(n), 0)
}

func BenchmarkSPF(b *testing.B) {
	for _, n := range []int{100, 1000} {
		lsas := benchLSAs(n)
		b.Run(fmt.Sprintf("routers=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				tableFor(lsas[0].Origin, lsas)
			}
		})
	}
}

func BenchmarkTreeChildrenUncached(b *testing.B) {
	for _, n := range []int{100, 1000} {
		lsas := benchLSAs(n)
		b.Run(fmt.Sprintf("routers=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			tab := tableFor(lsas[0].Origin, lsas)
			for b.Loop() {
				tab.children = nil
				tab.TreeChildren(lsas[n/2].Origin)
			}
		})
	}
}

func BenchmarkNextHop(b *testing.B) {
	lsas := benchLSAs(1000)
	tab := tableFor(lsas[0].Origin, lsas)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		tab.NextHop(lsas[i%len(lsas)].Origin)
		i++
	}
}

// TestTableIncarnations: a Table tells each router's incarnation as its
// LSA's sequence number carries it, and a router's restart with unchanged
// links still makes a new table (its graph's print differs), so that the
// data plane learns the new incarnation.
func TestTableIncarnations(t *testing.T) {
	lsas := []*LSA{
		{Origin: 1, Seq: 7<<IncarnationShift | 3, Links: []Link{{2, 1}}},
		{Origin: 2, Seq: 1, Links: []Link{{1, 1}}},
	}
	tab := tableFor(1, lsas)
	inc, ok := tab.Incarnation(1)
	assert.True(t, ok)
	assert.Equal(t, uint64(7), inc)
	_, ok = tab.Incarnation(2)
	assert.False(t, ok, "a router numbering from 1 tells no incarnation")
	_, ok = tab.Incarnation(3)
	assert.False(t, ok)

	refreshed := []*LSA{{Origin: 1, Seq: 7<<IncarnationShift | 9, Links: []Link{{2, 1}}}, lsas[1]}
	assert.Equal(t, newGraph(1, lsas).print, newGraph(1, refreshed).print, "a refresh changes nothing")
	restarted := []*LSA{{Origin: 1, Seq: 8<<IncarnationShift | 1, Links: []Link{{2, 1}}}, lsas[1]}
	assert.NotEqual(t, newGraph(1, lsas).print, newGraph(1, restarted).print, "a restart makes a new table")
}

func TestPathFromFollowsNextHops(t *testing.T) {
	// Any router's view of the shortest path from s to d (PathFrom,
	// OnPath) is the path that hop-by-hop forwarding from s takes, each
	// router using its own table.
	for seed := range uint64(8) {
		rng := rand.New(rand.NewPCG(seed, 21))
		n := 8 + rng.IntN(20)
		lsas := randomLSAs(rng, n, 2+rng.IntN(3), 1+rng.Uint32N(5), uint32(n), 0)
		tables := allTables(lsas)
		for s := range tables {
			for d := range tables {
				if !tables[s].Reachable(d) {
					continue
				}
				route := hopByHop(t, s, d, n, func(at uint32) (uint32, bool) { return tables[at].NextHop(d) })
				observer := uint32(rng.IntN(n))
				if tables[observer] == nil {
					continue
				}
				got := tables[observer].PathFrom(s, d)
				slices.Reverse(got)
				require.Equal(t, route, got, "seed %d: %d→%d seen from %d", seed, s, d, observer)
				for v := range uint32(n) {
					require.Equal(t, slices.Contains(route, v), tables[observer].OnPath(s, v, d), "seed %d: %d on %d→%d", seed, v, s, d)
					next, ok := tables[observer].After(s, d, v)
					if i := slices.Index(route, v); i >= 0 && i < len(route)-1 {
						require.True(t, ok)
						require.Equal(t, route[i+1], next, "seed %d: after %d on %d→%d", seed, v, s, d)
					} else {
						require.False(t, ok, "seed %d: after %d on %d→%d", seed, v, s, d)
					}
				}
			}
		}
	}
}
