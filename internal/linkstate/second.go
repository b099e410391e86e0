package linkstate

import (
	"sync"

	"github.com/dripmesh/drip/internal/pq"
)

// Second paths: two-path redundancy (Kim10 §2.3, docs/design.md §11).
//
// A message that must survive a link failure travels twice: once along
// the shortest-path tree DRP always uses, and once along a second path to
// each destination that shares no link with the first (in either
// direction, since a failed path fails both ways), or as few as the
// topology allows. The delivering router passes the first copy on and
// suppresses the other by its stamp (internal/dedup).
//
// The second path from source s to destination d is the least-weight path
// from s to d under the lexicographic weight (shared, cost, h): first the
// number of links it shares with the shortest path s→d, then the
// advertised cost and the edge-hash sum of doc.go. Like the shortest path
// it is unique, and every router computes it from its own database with
// the same algorithm, so every router on it agrees on it: a router
// forwards a second copy to its successor on the second path from the
// copy's source, which is hop-by-hop forwarding of a source-determined
// path without carrying the path in the bundle. A router that finds
// itself off the path (its database differs from the source's while a
// change floods) falls back to its shortest path; the hop limit bounds
// what a disagreement can do, as for first copies.
//
// This is not a tree. No spanning tree rooted at s can be link-disjoint
// from the shortest-path tree for every destination whenever the
// shortest-path tree uses every link of s (a full mesh of direct paths,
// Kim10 §3's topology): a child c of s in the second tree reaches s over
// some link s–c, which is c's shortest path. Second paths are therefore
// chosen per destination; the second copies of one message still form one
// bundle per next hop, with receiver partitioning as usual.
//
// Removing the first path and taking the shortest of what remains is not
// Suurballe's algorithm: in a "trap" topology a disjoint pair exists that
// does not contain the shortest path, and the second path then shares a
// link with the first (TestSecondPathTrap). Keeping the first copy on the
// shortest path keeps its latency and lets two-path and one-path messages
// share the same first tree.

// secondCacheLimit bounds the cached second-path decisions of one Table;
// beyond it the cache starts over. A decision costs a Dijkstra run.
const secondCacheLimit = 1 << 16

// sptCacheLimit bounds the cached shortest-path trees of other sources.
const sptCacheLimit = 256

type pair struct{ source, dst uint32 }

// secondHop is Self's decision for one (source, destination) pair: its
// successor on the second path (next, or its shortest-path next hop when
// it is off that path), and its predecessor on it (prev, valid with on).
type secondHop struct {
	next uint32
	ok   bool
	prev uint32
	on   bool
}

// secondState caches second-path decisions for the life of a Table.
type secondState struct {
	mu   sync.Mutex
	hops map[pair]secondHop
	spts map[int32]*spt
}

// sptFrom returns the shortest-path tree rooted at node index s.
func (t *Table) sptFrom(s int32) *spt {
	if s == t.root {
		return t.tree
	}
	if tr, ok := t.sec.spts[s]; ok {
		return tr
	}
	if len(t.sec.spts) >= sptCacheLimit {
		clear(t.sec.spts)
	}
	if t.sec.spts == nil {
		t.sec.spts = make(map[int32]*spt)
	}
	tr := t.g.dijkstra(s)
	t.sec.spts[s] = tr
	return tr
}

// SecondPath returns the second path from source to dst as this table
// sees it: the routers along it, source first and dst last, and how many
// of its links the shortest path from source to dst also uses (0: the two
// are link-disjoint). ok is false when source or dst is unknown or
// unreachable, or they are equal.
func (t *Table) SecondPath(source, dst uint32) (path []uint32, shared int, ok bool) {
	t.sec.mu.Lock()
	defer t.sec.mu.Unlock()
	p, shared, ok := t.secondPathLocked(source, dst)
	if !ok {
		return nil, 0, false
	}
	out := make([]uint32, len(p))
	for i, v := range p {
		out[i] = t.g.ids[v]
	}
	return out, shared, true
}

func (t *Table) secondPathLocked(source, dst uint32) ([]int32, int, bool) {
	s, d := t.g.index(source), t.g.index(dst)
	if s < 0 || d < 0 || s == d || t.tree.dist[s] == infinite {
		return nil, 0, false
	}
	first := t.sptFrom(s)
	if first.dist[d] == infinite {
		return nil, 0, false
	}
	// The undirected links of the first path.
	onFirst := make(map[[2]int32]bool)
	for v := d; v != s; v = first.parent[v] {
		u := first.parent[v]
		onFirst[[2]int32{min(u, v), max(u, v)}] = true
	}
	return t.g.avoiding(s, d, onFirst)
}

// weight3 is the second path's lexicographic weight: links shared with
// the first path, then weight.
type weight3 struct {
	shared uint64
	w      weight
}

func (a weight3) less(b weight3) bool {
	return a.shared < b.shared || a.shared == b.shared && a.w.less(b.w)
}

type heapItem3 struct {
	w    weight3
	node int32
}

func (a heapItem3) less(b heapItem3) bool {
	if a.w != b.w {
		return a.w.less(b.w)
	}
	return a.node < b.node
}

// avoiding runs Dijkstra from s under weight3, with the links in shared
// (undirected, as ordered index pairs) counting as shared, and returns the
// path to d and how many shared links it uses. On an exact tie the lower
// parent index wins, as in dijkstra, so every router finds the same path.
func (g *graph) avoiding(s, d int32, shared map[[2]int32]bool) ([]int32, int, bool) {
	n := len(g.ids)
	inf := weight3{shared: ^uint64(0), w: infinite}
	dist := make([]weight3, n)
	parent := make([]int32, n)
	for i := range dist {
		dist[i], parent[i] = inf, -1
	}
	done := make([]bool, n)
	h := pq.New(heapItem3.less, n)
	dist[s] = weight3{}
	h.Push(heapItem3{node: s})
	for h.Len() > 0 {
		it := h.Pop()
		u := it.node
		if done[u] || it.w != dist[u] {
			continue
		}
		done[u] = true
		if u == d {
			break
		}
		du := dist[u]
		for e := g.off[u]; e < g.off[u+1]; e++ {
			v := g.to[e]
			if done[v] {
				continue
			}
			w := weight3{shared: du.shared, w: weight{du.w.cost + uint64(g.cost[e]), du.w.hash + g.hash[e]}}
			if shared[[2]int32{min(u, v), max(u, v)}] {
				w.shared++
			}
			if w.less(dist[v]) || w == dist[v] && u < parent[v] {
				dist[v], parent[v] = w, u
				h.Push(heapItem3{w: w, node: v})
			}
		}
	}
	if dist[d] == inf {
		return nil, 0, false
	}
	var path []int32
	for v := d; v != -1; v = parent[v] {
		path = append(path, v)
	}
	for i, j := 0, len(path)-1; i < j; i, j = i+1, j-1 {
		path[i], path[j] = path[j], path[i]
	}
	return path, int(dist[d].shared), true
}

// secondNextHop is Self's next hop for the second copy of a message from
// source to dst: its successor on the second path, or, when Self is not on
// that path in its own view, its shortest-path next hop.
func (t *Table) secondNextHop(source, dst uint32) (uint32, bool) {
	t.sec.mu.Lock()
	defer t.sec.mu.Unlock()
	h := t.secondHopLocked(source, dst)
	return h.next, h.ok
}

// SecondReversePath returns the neighbour that the second copy of a
// message from source to dst reaches Self from: Self's predecessor on the
// second path from source to dst. ok is false when Self is not on that
// path or is its source. It is the reverse-path check of second copies,
// which do not travel the shortest paths (docs/security.md).
func (t *Table) SecondReversePath(source, dst uint32) (neighbor uint32, ok bool) {
	t.sec.mu.Lock()
	defer t.sec.mu.Unlock()
	h := t.secondHopLocked(source, dst)
	return h.prev, h.on
}

func (t *Table) secondHopLocked(source, dst uint32) secondHop {
	k := pair{source, dst}
	if h, ok := t.sec.hops[k]; ok {
		return h
	}
	var h secondHop
	if p, _, ok := t.secondPathLocked(source, dst); ok {
		for i, v := range p {
			if v != t.root {
				continue
			}
			if i > 0 {
				h.prev, h.on = t.g.ids[p[i-1]], true
			}
			if i < len(p)-1 {
				h.next, h.ok = t.g.ids[p[i+1]], true
			}
			break
		}
	}
	if !h.ok && dst != t.self {
		h.next, h.ok = t.NextHop(dst)
	}
	if len(t.sec.hops) >= secondCacheLimit {
		clear(t.sec.hops)
	}
	if t.sec.hops == nil {
		t.sec.hops = make(map[pair]secondHop)
	}
	t.sec.hops[k] = h
	return h
}

// SecondRoutes is the routing view of second copies of messages from one
// source, as Self forwards them: NextHop follows the second path from the
// source (drp.Routing). Second copies are never broadcast, so
// TreeChildren is empty.
type SecondRoutes struct {
	t      *Table
	source uint32
}

// Second returns the routing view of second copies of messages that
// entered the mesh at source. It is cheap; decisions are cached in the
// Table.
func (t *Table) Second(source uint32) SecondRoutes { return SecondRoutes{t: t, source: source} }

// Self implements drp.Routing.
func (s SecondRoutes) Self() uint32 { return s.t.self }

// NextHop implements drp.Routing.
func (s SecondRoutes) NextHop(dst uint32) (uint32, bool) {
	if dst == s.t.self {
		return 0, false
	}
	return s.t.secondNextHop(s.source, dst)
}

// TreeChildren implements drp.Routing: second copies are not broadcast.
func (s SecondRoutes) TreeChildren(uint32) []uint32 { return nil }

// Known implements drp.Routing.
func (s SecondRoutes) Known() int { return s.t.known }
