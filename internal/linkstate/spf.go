package linkstate

import (
	"github.com/dripmesh/drip/internal/pq"
	"math"
	"slices"
	"sync"
	"sync/atomic"
)

// graph is the topology of one LSDB state with routers renumbered 0..n−1 in
// ascending ID order, in compressed sparse rows: the links out of router i
// are to[off[i]:off[i+1]]. Only links both ends advertise are present.
type graph struct {
	ids []uint32 // index → router ID, ascending
	// dense maps a router ID to its index+1 when IDs are small (StatefulSet
	// ordinals), sparse otherwise; 0 / absent means not in the graph.
	dense  []int32
	sparse map[uint32]int32
	off    []int32
	to     []int32
	cost   []uint32
	hash   []uint64 // EdgeHash of each link
	// inc is each router's incarnation, as its LSA's sequence number
	// says (IncarnationOf; 0: none known).
	inc []uint64
	// print identifies the graph: equal prints mean equal routes and
	// incarnations, so a refresh that changed nothing keeps the old table
	// and its caches, and a router's restart makes a new one.
	print uint64
}

func (g *graph) index(id uint32) int32 {
	if g.dense != nil {
		if uint64(id) < uint64(len(g.dense)) {
			return g.dense[id] - 1
		}
		return -1
	}
	if i, ok := g.sparse[id]; ok {
		return i
	}
	return -1
}

// linkTo reports whether a sorted link list has a link to id.
func linkTo(links []Link, id uint32) bool {
	lo, hi := 0, len(links)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if links[m].Neighbor < id {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo < len(links) && links[lo].Neighbor == id
}

// newGraph builds the graph of the live (not withdrawn) LSAs, in any order,
// whose links must be sorted, and self, which is always a node even
// before its own LSA exists.
func newGraph(self uint32, lsas []*LSA) *graph {
	g := &graph{}
	g.ids = make([]uint32, 0, len(lsas)+1)
	hasSelf := false
	for _, a := range lsas {
		if a.Origin == self {
			hasSelf = true
		}
		g.ids = append(g.ids, a.Origin)
	}
	if !hasSelf {
		g.ids = append(g.ids, self)
	}
	// Sorting IDs rather than LSA pointers spares the write barriers of
	// moving pointers, a third of SPF's time at 1000 routers.
	slices.Sort(g.ids)
	n := len(g.ids)
	if maxID := g.ids[n-1]; uint64(maxID) < uint64(8*n+1024) {
		g.dense = make([]int32, maxID+1)
		for i, id := range g.ids {
			g.dense[id] = int32(i) + 1
		}
	} else {
		g.sparse = make(map[uint32]int32, n)
		for i, id := range g.ids {
			g.sparse[id] = int32(i)
		}
	}
	byIndex := make([]*LSA, n)
	g.inc = make([]uint64, n)
	links := 0
	for _, a := range lsas {
		i := g.index(a.Origin)
		byIndex[i] = a
		links += len(a.Links)
		if inc := IncarnationOf(a.Seq); inc != 0 {
			g.inc[i] = inc
			g.print += mix64(uint64(a.Origin)<<32 ^ inc)
		}
	}
	g.to = make([]int32, 0, links)
	g.cost = make([]uint32, 0, links)
	g.hash = make([]uint64, 0, links)
	g.off = make([]int32, n+1)
	for i, a := range byIndex {
		g.off[i] = int32(len(g.to))
		if a == nil {
			continue
		}
		for _, l := range a.Links {
			j := g.index(l.Neighbor)
			// Two-way check: u→v counts only if v's LSA lists u, so a
			// dead router's stale LSA cannot attract traffic.
			if j < 0 || byIndex[j] == nil || !linkTo(byIndex[j].Links, a.Origin) {
				continue
			}
			h := EdgeHash(a.Origin, l.Neighbor)
			g.to = append(g.to, j)
			g.cost = append(g.cost, l.Cost)
			g.hash = append(g.hash, h)
			g.print += mix64(h ^ uint64(l.Cost))
		}
	}
	g.off[n] = int32(len(g.to))
	return g
}

// weight is the lexicographic path weight of doc.go: advertised cost first,
// then the sum of edge hashes.
type weight struct{ cost, hash uint64 }

func (a weight) less(b weight) bool {
	return a.cost < b.cost || a.cost == b.cost && a.hash < b.hash
}

var infinite = weight{math.MaxUint64, math.MaxUint64}

// spt is a shortest-path tree over a graph.
type spt struct {
	dist   []weight
	parent []int32 // −1 for the root and unreachable nodes
	order  []int32 // nodes in the order they were settled, root first
}

type heapItem struct {
	w    weight
	node int32
}

func (a heapItem) less(b heapItem) bool {
	if a.w != b.w {
		return a.w.less(b.w)
	}
	return a.node < b.node
}

// The heap works with lazy deletion: a node may be pushed once per
// improvement and stale items are skipped when popped, which is cheaper than
// decrease-key bookkeeping at mesh degrees.

// dijkstra computes the shortest-path tree rooted at src. On an exact tie
// of both weights (a 2^-48 coincidence of hash sums) the lower parent index,
// that is the lower router ID, wins, so the result is still deterministic.
func (g *graph) dijkstra(src int32) *spt {
	n := len(g.ids)
	t := &spt{
		dist:   make([]weight, n),
		parent: make([]int32, n),
		order:  make([]int32, 0, n),
	}
	for i := range t.dist {
		t.dist[i] = infinite
		t.parent[i] = -1
	}
	done := make([]bool, n)
	h := pq.New(heapItem.less, n)
	t.dist[src] = weight{}
	h.Push(heapItem{node: src})
	for h.Len() > 0 {
		it := h.Pop()
		u := it.node
		if done[u] || it.w != t.dist[u] {
			continue
		}
		done[u] = true
		t.order = append(t.order, u)
		du := t.dist[u]
		for e := g.off[u]; e < g.off[u+1]; e++ {
			v := g.to[e]
			if done[v] {
				continue
			}
			w := weight{du.cost + uint64(g.cost[e]), du.hash + g.hash[e]}
			if w.less(t.dist[v]) || w == t.dist[v] && u < t.parent[v] {
				t.dist[v] = w
				t.parent[v] = u
				h.Push(heapItem{w: w, node: v})
			}
		}
	}
	return t
}

// Table is a router's UNICAST table (Carzaniga09 §2.2) as an immutable
// snapshot of one LSDB state. It implements drp.Routing. A Table is safe
// for concurrent use: the node replaces it rather than changing it, so a
// forwarding goroutine may keep using the one it holds.
type Table struct {
	self  uint32
	g     *graph
	root  int32
	tree  *spt
	first []int32 // index of the first hop towards each node, −1 if none
	hops  []int32 // links on the shortest path to each node
	known int
	sec   secondState // second paths (second.go)

	mu       sync.Mutex
	children map[uint32][]uint32 // TreeChildren cache per source
	// from is, per source index, what Self's checks of the source's
	// bundles need of the shortest paths from it (ReversePath), filled
	// in as sources are asked for.
	from []atomic.Pointer[sourcePaths]
}

// sourcePaths is what one source's shortest-path tree says of Self's
// neighbours, and the tree itself (OnPath).
type sourcePaths struct {
	reverse int32   // the neighbour on the path to Self, −1 if none
	parent  []int32 // per node, its parent in the source's tree; nil: unreachable source
}

func newTable(self uint32, g *graph) *Table {
	t := &Table{self: self, g: g, root: g.index(self), from: make([]atomic.Pointer[sourcePaths], len(g.ids))}
	t.tree = g.dijkstra(t.root)
	t.first = make([]int32, len(g.ids))
	t.hops = make([]int32, len(g.ids))
	for i := range t.first {
		t.first[i] = -1
	}
	// Parents settle before their children, so one pass in settling order
	// propagates first hops and hop counts down the tree.
	for _, v := range t.tree.order[1:] {
		p := t.tree.parent[v]
		if p == t.root {
			t.first[v] = v
		} else {
			t.first[v] = t.first[p]
		}
		t.hops[v] = t.hops[p] + 1
	}
	t.known = len(t.tree.order)
	return t
}

// Self implements drp.Routing.
func (t *Table) Self() uint32 { return t.self }

// NextHop implements drp.Routing.
func (t *Table) NextHop(dst uint32) (next uint32, ok bool) {
	i := t.g.index(dst)
	if i < 0 || t.first[i] < 0 {
		return 0, false
	}
	return t.g.ids[t.first[i]], true
}

// Known implements drp.Routing.
func (t *Table) Known() int { return t.known }

// Reachable reports whether dst is reachable (Self included).
func (t *Table) Reachable(dst uint32) bool {
	i := t.g.index(dst)
	return i >= 0 && t.tree.dist[i] != infinite
}

// Distance returns the advertised cost of the path to dst.
func (t *Table) Distance(dst uint32) (cost uint64, ok bool) {
	i := t.g.index(dst)
	if i < 0 || t.tree.dist[i] == infinite {
		return 0, false
	}
	return t.tree.dist[i].cost, true
}

// Path returns the advertised cost of the shortest path to dst and how
// many links it has, for the delay budgets of Kim10 §2.2.
func (t *Table) Path(dst uint32) (cost uint64, hops int, ok bool) {
	i := t.g.index(dst)
	if i < 0 || t.tree.dist[i] == infinite {
		return 0, 0, false
	}
	return t.tree.dist[i].cost, int(t.hops[i]), true
}

// Routers lists the reachable routers, Self included, in ascending order.
func (t *Table) Routers() []uint32 {
	out := make([]uint32, 0, t.known)
	for i, id := range t.g.ids {
		if t.tree.dist[i] != infinite {
			out = append(out, id)
		}
	}
	return out
}

// TreeChildren implements drp.Routing: Self's children in the shortest-path
// tree rooted at source, the routers to which a broadcast from source is
// forwarded here (Carzaniga09 §2.3). Every router computes the same tree, with
// the same tie-breaking, so together they cover each reachable router once.
// The result is cached per source for the life of the Table and must not
// be modified. It is empty when source is unreachable.
func (t *Table) TreeChildren(source uint32) []uint32 {
	t.mu.Lock()
	defer t.mu.Unlock()
	if c, ok := t.children[source]; ok {
		return c
	}
	var tree *spt
	if s := t.g.index(source); s >= 0 && t.tree.dist[s] != infinite {
		if s == t.root {
			tree = t.tree
		} else {
			tree = t.g.dijkstra(s)
		}
	}
	var c []uint32
	if tree != nil {
		for e := t.g.off[t.root]; e < t.g.off[t.root+1]; e++ {
			if v := t.g.to[e]; tree.parent[v] == t.root {
				c = append(c, t.g.ids[v])
			}
		}
		// Links are stored in ascending neighbour order already.
	}
	if t.children == nil {
		t.children = make(map[uint32][]uint32)
	}
	t.children[source] = c
	return c
}

// Incarnation returns the incarnation of router id as its LSA numbers it
// (Config.Incarnation); ok is false when the router is unknown or its LSA
// carries none.
func (t *Table) Incarnation(id uint32) (inc uint64, ok bool) {
	i := t.g.index(id)
	if i < 0 || t.g.inc[i] == 0 {
		return 0, false
	}
	return t.g.inc[i], true
}

// ReversePath returns Self's neighbour on the shortest path from source to
// Self: the only neighbour that B-DRP forwards source's bundles to Self
// from, since every router picks the rest of the source's unique shortest
// paths (doc.go) — the check of unicast reverse-path forwarding. ok is
// false when source is Self or unreachable. Each source costs one Dijkstra
// run per Table, the first time it is asked for; after that it is a load.
func (t *Table) ReversePath(source uint32) (neighbor uint32, ok bool) {
	sp := t.sourcePaths(source)
	if sp == nil || sp.reverse < 0 {
		return 0, false
	}
	return t.g.ids[sp.reverse], true
}

// sourcePaths returns what the shortest paths from source say of Self's
// neighbours, computing it the first time; nil when source is Self or
// unknown.
func (t *Table) sourcePaths(source uint32) *sourcePaths {
	s := t.g.index(source)
	if s < 0 || s == t.root {
		return nil
	}
	if sp := t.from[s].Load(); sp != nil {
		return sp
	}
	sp := &sourcePaths{reverse: -1}
	if t.tree.dist[s] != infinite {
		sp.parent = t.g.dijkstra(s).parent
		sp.reverse = sp.parent[t.root]
	}
	t.from[s].Store(sp)
	return sp
}

// OnPath reports whether via lies on the shortest path from source to dst,
// either end included, as this table sees it; false when any of them is
// unknown or dst is unreachable from source.
func (t *Table) OnPath(source, via, dst uint32) bool {
	v := t.g.index(via)
	found := false
	ok := t.walkPath(source, dst, func(x int32) { found = found || x == v })
	return v >= 0 && ok && found
}

// After returns the router that follows via on the shortest path from
// source to dst; ok is false when via is not on it, is dst, or the path
// does not exist. It walks the path without allocating.
func (t *Table) After(source, dst, via uint32) (next uint32, ok bool) {
	v := t.g.index(via)
	prev, found := int32(-1), int32(-1)
	exists := t.walkPath(source, dst, func(x int32) {
		if x == v && found < 0 {
			found = prev
		}
		prev = x
	})
	if !exists || v < 0 || found < 0 {
		return 0, false
	}
	return t.g.ids[found], true
}

// PathFrom returns the routers on the shortest path from source to dst, dst
// first and source last; nil when either is unknown or dst is unreachable
// from source. Both are the checks of bundles that left the shortest-path
// tree of their source around a failure (node's source.go); the first
// call for a source costs a Dijkstra run per Table, as ReversePath's.
func (t *Table) PathFrom(source, dst uint32) []uint32 {
	var out []uint32
	if !t.walkPath(source, dst, func(x int32) { out = append(out, t.g.ids[x]) }) {
		return nil
	}
	return out
}

// walkPath calls visit for each node of the shortest path from source to
// dst, dst first, and reports whether the path exists (visit may have
// been called for a path that does not).
func (t *Table) walkPath(source, dst uint32, visit func(int32)) bool {
	s, d := t.g.index(source), t.g.index(dst)
	if s < 0 || d < 0 {
		return false
	}
	parent := t.tree.parent
	if s != t.root {
		sp := t.sourcePaths(source)
		if sp == nil || sp.parent == nil {
			return false
		}
		parent = sp.parent
	}
	for x, steps := d, 0; steps <= len(parent); x, steps = parent[x], steps+1 {
		visit(x)
		if x == s {
			return true
		}
		if parent[x] < 0 {
			return false // unreachable
		}
	}
	return false
}
