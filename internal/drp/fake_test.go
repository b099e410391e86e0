package drp_test

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/bits-and-blooms/bitset"

	"github.com/dripmesh/drip/internal/drp"
)

// graph is an undirected weighted graph over router IDs 0..n-1; a node
// without edges is a router nobody can reach.
type graph struct {
	adj [][]edge
}

type edge struct {
	to int
	w  float64
}

func newGraph(n int) *graph { return &graph{adj: make([][]edge, n)} }

func (g *graph) link(a, b int, w float64) *graph {
	g.adj[a] = append(g.adj[a], edge{b, w})
	g.adj[b] = append(g.adj[b], edge{a, w})
	return g
}

func (g *graph) edges() int {
	n := 0
	for _, es := range g.adj {
		n += len(es)
	}
	return n / 2
}

// randomGraph returns a connected graph of n routers: a random spanning tree
// plus extra random links. With unit weights shortest paths tie; otherwise
// weights are random reals, so ties have probability zero (and are checked).
func randomGraph(rng *rand.Rand, n, extra int, unit bool) *graph {
	g := newGraph(n)
	weight := func() float64 {
		if unit {
			return 1
		}
		return 1 + 9*rng.Float64()
	}
	perm := rng.Perm(n)
	linked := map[[2]int]bool{}
	add := func(a, b int) {
		if a == b || linked[[2]int{a, b}] {
			return
		}
		linked[[2]int{a, b}], linked[[2]int{b, a}] = true, true
		g.link(a, b, weight())
	}
	for i := 1; i < n; i++ {
		add(perm[i], perm[rng.IntN(i)])
	}
	for range extra {
		add(rng.IntN(n), rng.IntN(n))
	}
	return g
}

// spt is one source's shortest-path tree, by brute-force O(n²) Dijkstra.
type spt struct {
	dist     []float64
	parent   []int      // -1 at the source and for unreachable routers
	first    []int      // first hop from the source, -1 likewise
	children [][]uint32 // ascending
	known    int        // reachable routers, source included
}

// fakeNet is the reference routing: every router's view is computed from
// the whole graph, so all views agree (converged link state).
type fakeNet struct {
	g     *graph
	trees []*spt
	// ties records whether any Dijkstra met two equal shortest paths, which
	// the tie-free property tests must rule out.
	ties bool
}

func newFakeNet(g *graph) *fakeNet {
	return &fakeNet{g: g, trees: make([]*spt, len(g.adj))}
}

func (n *fakeNet) tree(s int) *spt {
	if t := n.trees[s]; t != nil {
		return t
	}
	size := len(n.g.adj)
	t := &spt{
		dist:     make([]float64, size),
		parent:   make([]int, size),
		first:    make([]int, size),
		children: make([][]uint32, size),
	}
	done := make([]bool, size)
	for i := range t.dist {
		t.dist[i], t.parent[i], t.first[i] = math.Inf(1), -1, -1
	}
	t.dist[s] = 0
	for {
		u := -1
		for v := range size {
			if !done[v] && !math.IsInf(t.dist[v], 1) && (u < 0 || t.dist[v] < t.dist[u]) {
				u = v
			}
		}
		if u < 0 {
			break
		}
		done[u] = true
		t.known++
		for _, e := range n.g.adj[u] {
			d := t.dist[u] + e.w
			switch {
			case d < t.dist[e.to]-1e-9:
				t.dist[e.to], t.parent[e.to] = d, u
				if u == s {
					t.first[e.to] = e.to
				} else {
					t.first[e.to] = t.first[u]
				}
			case math.Abs(d-t.dist[e.to]) <= 1e-9 && t.parent[e.to] != u && e.to != s:
				n.ties = true
			}
		}
	}
	for v := range size {
		if p := t.parent[v]; p >= 0 {
			t.children[p] = append(t.children[p], uint32(v))
		}
	}
	n.trees[s] = t
	return t
}

func (n *fakeNet) at(self int) drp.Routing { return fakeRouting{net: n, self: self} }

// fakeRouting is one router's view of a fakeNet; it implements drp.Routing.
type fakeRouting struct {
	net  *fakeNet
	self int
}

var _ drp.Routing = fakeRouting{}

func (r fakeRouting) Self() uint32 { return uint32(r.self) }

func (r fakeRouting) NextHop(dst uint32) (uint32, bool) {
	if int(dst) >= len(r.net.g.adj) {
		return 0, false
	}
	f := r.net.tree(r.self).first[dst]
	return uint32(f), f >= 0
}

func (r fakeRouting) TreeChildren(source uint32) []uint32 {
	if int(source) >= len(r.net.g.adj) {
		return nil
	}
	return r.net.tree(int(source)).children[r.self]
}

func (r fakeRouting) Known() int { return r.net.tree(r.self).known }

// pathLinks returns the directed links of the shortest path from s to d.
func (n *fakeNet) pathLinks(s, d int) [][2]uint32 {
	t := n.tree(s)
	var links [][2]uint32
	for v := d; v != s; v = t.parent[v] {
		links = append(links, [2]uint32{uint32(t.parent[v]), uint32(v)})
	}
	return links
}

func set(ids ...uint) *bitset.BitSet {
	b := bitset.New(0)
	for _, id := range ids {
		b.Set(id)
	}
	return b
}

func members(b *bitset.BitSet) []uint {
	if b == nil {
		return nil
	}
	return b.AppendTo(nil)
}

// randomDest draws a non-empty destination set over n routers.
func randomDest(rng *rand.Rand, n int) *bitset.BitSet {
	k := 1 + rng.IntN(n)
	d := bitset.New(uint(n))
	for _, id := range rng.Perm(n)[:k] {
		d.Set(uint(id))
	}
	return d
}

// trace is what a message did in the network.
type trace struct {
	delivered map[uint32]int
	received  map[uint32]int
	links     map[[2]uint32]int
	dropped   [drp.NumDropReasons]int
	bundles   int
	// loops counts bundles that reached a router their lineage had
	// already visited.
	loops int
	// bounced counts destinations sent back to the router they came from.
	bounced int
	// hops is, per delivered router, the links its lineage crossed.
	hops map[uint32]int
}

type inFlight struct {
	at, from uint32
	b        drp.Bundle
	path     []uint32 // routers visited, ingress first
}

// simulate publishes a message with destination set dest at router src and
// applies Transit at every router a bundle reaches until none is in flight.
// view gives each router's routing, so tests can give routers stale views.
// It also checks that no decision modified the bundle it was given.
func simulate(tb testing.TB, f *drp.Forwarder, view func(router uint32) drp.Routing, src uint32, dest *bitset.BitSet) trace {
	tb.Helper()
	tr := trace{
		delivered: map[uint32]int{},
		received:  map[uint32]int{},
		links:     map[[2]uint32]int{},
		hops:      map[uint32]int{},
	}
	before := dest.Clone()
	dec := f.Ingress(view(src), dest)
	if !dest.Equal(before) {
		tb.Fatalf("Ingress at %d modified its destination set", src)
	}
	if dec.Deliver {
		tb.Fatalf("Ingress at %d asked for local delivery", src)
	}
	var queue []inFlight
	emit := func(from uint32, path []uint32, d drp.Decision) {
		for i := range d.Dropped {
			tr.dropped[i] += d.Dropped[i]
		}
		for _, fw := range d.Forwards {
			if fw.Bundle.Dest.None() {
				tb.Fatalf("router %d forwarded an empty bundle to %d", from, fw.Next)
			}
			tr.links[[2]uint32{from, fw.Next}]++
			tr.bundles++
			queue = append(queue, inFlight{at: fw.Next, from: from, b: fw.Bundle, path: path})
		}
	}
	emit(src, []uint32{src}, dec)
	for len(queue) > 0 {
		h := queue[0]
		queue = queue[1:]
		tr.received[h.at]++
		if slices.Contains(h.path, h.at) {
			tr.loops++
		}
		path := append(slices.Clip(h.path), h.at)
		before := h.b.Dest.Clone()
		d := f.Transit(view(h.at), h.from, h.b)
		if !h.b.Dest.Equal(before) {
			tb.Fatalf("Transit at %d modified the bundle it received", h.at)
		}
		if d.Deliver {
			tr.delivered[h.at]++
			tr.hops[h.at] = len(path) - 1
		}
		emit(h.at, path, d)
		if d.Bounced != nil {
			// What a router does that does not hold bounces: send them
			// back at once.
			tr.bounced += int(d.Bounced.Count())
			emit(h.at, path, sendBack(f, view(h.at), h.b, d.Bounced))
		}
	}
	return tr
}

// sendBack decides again, as if published here, the destinations a Transit
// bounced: they go back to the neighbour the bundle came from, with the
// hops it had left less one, as Transit would have sent them.
func sendBack(f *drp.Forwarder, r drp.Routing, b drp.Bundle, bounced *bitset.BitSet) drp.Decision {
	return f.Transit(r, r.Self(), drp.Bundle{Source: b.Source, Dest: bounced, HopsLeft: b.HopsLeft})
}
