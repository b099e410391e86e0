package drp_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dripmesh/drip/internal/drp"
)

// propertyCase is one random connected network with a random message.
type propertyCase struct {
	name string
	net  *fakeNet
	n    int
	src  uint32
	rng  *rand.Rand
}

// propertyCases yields networks of 10 to 200 routers, each with a few
// sources and destination sets drawn by the caller from c.rng.
func propertyCases(t *testing.T, seed uint64, unit bool, each func(t *testing.T, c propertyCase)) {
	rng := rand.New(rand.NewPCG(seed, 0xd2b))
	for i := range 24 {
		n := 10 + rng.IntN(191)
		if i == 0 {
			n = 200
		}
		g := randomGraph(rng, n, rng.IntN(2*n), unit)
		net := newFakeNet(g)
		for j := range 4 {
			c := propertyCase{
				name: fmt.Sprintf("graph%d_n%d_e%d/src%d", i, n, g.edges(), j),
				net:  net, n: n, src: uint32(rng.IntN(n)), rng: rng,
			}
			t.Run(c.name, func(t *testing.T) { each(t, c) })
		}
	}
}

func view(net *fakeNet) func(uint32) drp.Routing {
	return func(r uint32) drp.Routing { return net.at(int(r)) }
}

// Carzaniga09 §2.2: with converged, tie-free routing, DRP reaches every
// destination exactly once, nobody else, over exactly the links of the
// shortest paths from the ingress to D — a tree, so no link carries the
// message twice.
func TestPropertyPartitionTieFree(t *testing.T) {
	f, err := drp.NewForwarder(drp.Config{BroadcastFraction: 0, HopLimit: 255})
	require.NoError(t, err)
	propertyCases(t, 1, false, func(t *testing.T, c propertyCase) {
		dest := randomDest(c.rng, c.n)
		tr := simulate(t, f, view(c.net), c.src, dest)
		require.False(t, c.net.ties, "random real weights produced a shortest-path tie")

		want := map[uint32]int{}
		union := map[[2]uint32]int{}
		for _, id := range members(dest) {
			if uint32(id) == c.src {
				continue
			}
			want[uint32(id)] = 1
			for _, l := range c.net.pathLinks(int(c.src), int(id)) {
				union[l] = 1
			}
		}
		assert.Equal(t, want, tr.delivered, "deliveries")
		assert.Equal(t, union, tr.links, "links used, with bundle counts")
		assert.LessOrEqual(t, tr.bundles, len(union))
		assert.Zero(t, tr.loops)
		assert.Equal(t, [drp.NumDropReasons]int{}, tr.dropped)
		for r, n := range tr.received {
			assert.Equal(t, 1, n, "router %d received the message %d times", r, n)
		}
	})
}

// Carzaniga09 §2.2 with equal-cost paths (unit weights, as with configured
// link costs): routers may pick next hops that are not one tree, so a link
// can carry two disjoint bundles, but every destination is still reached
// once, by a shortest path, and nothing loops.
func TestPropertyPartitionWithTies(t *testing.T) {
	f, err := drp.NewForwarder(drp.Config{BroadcastFraction: 0, HopLimit: 255})
	require.NoError(t, err)
	propertyCases(t, 2, true, func(t *testing.T, c propertyCase) {
		dest := randomDest(c.rng, c.n)
		tr := simulate(t, f, view(c.net), c.src, dest)

		want := map[uint32]int{}
		for _, id := range members(dest) {
			if uint32(id) != c.src {
				want[uint32(id)] = 1
			}
		}
		assert.Equal(t, want, tr.delivered, "deliveries")
		for r := range want {
			assert.Equal(t, int(c.net.tree(int(c.src)).dist[r]), tr.hops[r], "hops to %d", r)
		}
		assert.Zero(t, tr.loops)
		assert.Equal(t, [drp.NumDropReasons]int{}, tr.dropped)
	})
}

// Carzaniga09 §2.3: above the threshold the message follows the source's
// shortest-path tree: each router receives it at most once, over a tree
// link, and only the destinations deliver. Each router strips itself from
// the set and an empty set is not forwarded, so a router receives the
// message exactly when some destination is off the tree path from the
// source to its parent.
func TestPropertyBroadcast(t *testing.T) {
	f, err := drp.NewForwarder(drp.Config{BroadcastFraction: 1e-9, HopLimit: 255})
	require.NoError(t, err)
	var everyone int
	propertyCases(t, 3, false, func(t *testing.T, c propertyCase) {
		dest := randomDest(c.rng, c.n)
		if c.rng.IntN(2) == 0 { // small sets, where the pruning shows
			dest = set(uint(c.rng.IntN(c.n)), uint(c.rng.IntN(c.n)))
		}
		tr := simulate(t, f, view(c.net), c.src, dest)

		want := map[uint32]int{}
		for _, id := range members(dest) {
			if uint32(id) != c.src {
				want[uint32(id)] = 1
			}
		}
		assert.Equal(t, want, tr.delivered, "deliveries")
		spt := c.net.tree(int(c.src))
		receivers, tree := map[uint32]int{}, map[[2]uint32]int{}
		for v, p := range spt.parent {
			if p < 0 {
				continue
			}
			left := dest.Clone()
			for a := p; a >= 0; a = spt.parent[a] {
				left.Clear(uint(a))
			}
			if left.Any() {
				receivers[uint32(v)] = 1
				tree[[2]uint32{uint32(p), uint32(v)}] = 1
			}
		}
		assert.Equal(t, receivers, tr.received, "routers reached, each once")
		assert.Equal(t, tree, tr.links, "links used")
		assert.Zero(t, tr.loops)
		assert.Equal(t, [drp.NumDropReasons]int{}, tr.dropped)
		if len(tr.received) == c.n-1 {
			everyone++
		}
	})
	assert.Positive(t, everyone, "no broadcast reached every router")
}

// Carzaniga09 §2.2–2.3: the hop limit bounds a message exactly at the limit,
// in both modes: on a line, the router HopLimit links away still gets it,
// the next one is dropped and counted.
func TestHopLimitBoundary(t *testing.T) {
	const n = 12
	g := newGraph(n)
	for i := 1; i < n; i++ {
		g.link(i-1, i, 1)
	}
	net := newFakeNet(g)
	for _, limit := range []uint8{1, 2, 5, 10} {
		for _, fraction := range []float64{0, 1e-9} {
			t.Run(fmt.Sprintf("limit%d_fraction%g", limit, fraction), func(t *testing.T) {
				f, err := drp.NewForwarder(drp.Config{BroadcastFraction: fraction, HopLimit: limit})
				require.NoError(t, err)
				reach := uint(limit)
				tr := simulate(t, f, view(net), 0, set(reach, reach+1))
				assert.Equal(t, map[uint32]int{uint32(reach): 1}, tr.delivered)
				assert.Equal(t, 1, tr.dropped[drp.DropHopLimit])
				assert.Equal(t, int(limit), tr.bundles, "links crossed")
			})
		}
	}
}

// reweighted returns g with fresh random weights and without one random
// link: the network after a change that link state has not yet flooded
// everywhere.
func reweighted(rng *rand.Rand, g *graph) *graph {
	type link struct{ a, b int }
	var links []link
	for a, es := range g.adj {
		for _, e := range es {
			if a < e.to {
				links = append(links, link{a, e.to})
			}
		}
	}
	cut := rng.IntN(len(links))
	h := newGraph(len(g.adj))
	for i, l := range links {
		if i != cut {
			h.link(l.a, l.b, 1+9*rng.Float64())
		}
	}
	return h
}

// Carzaniga09 §2.2 during reconvergence: routers disagree (each uses the old
// or the new tables), so bundles can loop. Partitioning keeps the sets
// disjoint whatever the tables say, so each destination is delivered at
// most once and exactly one of delivered or dropped; the hop limit bounds
// every lineage.
func TestPropertyStaleTables(t *testing.T) {
	const limit = 12
	f, err := drp.NewForwarder(drp.Config{BroadcastFraction: 0, HopLimit: limit})
	require.NoError(t, err)
	var loops, hopDrops int
	propertyCases(t, 4, false, func(t *testing.T, c propertyCase) {
		next := newFakeNet(reweighted(c.rng, c.net.g))
		stale := make([]bool, c.n)
		for i := range stale {
			stale[i] = c.rng.IntN(2) == 0
		}
		mixed := func(r uint32) drp.Routing {
			if stale[r] {
				return c.net.at(int(r))
			}
			return next.at(int(r))
		}
		dest := randomDest(c.rng, c.n)
		tr := simulate(t, f, mixed, c.src, dest)

		want := int(dest.Count())
		if dest.Test(uint(c.src)) {
			want--
		}
		delivered := 0
		for r, n := range tr.delivered {
			require.Equal(t, 1, n, "router %d delivered %d times", r, n)
			require.True(t, dest.Test(uint(r)), "router %d is not a destination", r)
			delivered++
		}
		dropped := tr.dropped[drp.DropNoRoute] + tr.dropped[drp.DropHopLimit]
		assert.Equal(t, want, delivered+dropped, "delivered %d + dropped %v", delivered, tr.dropped)
		assert.LessOrEqual(t, tr.bundles, want*limit, "bundles")
		loops += tr.loops
		hopDrops += tr.dropped[drp.DropHopLimit]
	})
	// The scenario must actually exercise loops and the hop limit.
	assert.Positive(t, loops, "no bundle ever looped")
	assert.Positive(t, hopDrops, "the hop limit never fired")
}
