package lab

import (
	"container/heap"
	"fmt"

	"github.com/dripmesh/drip/internal/topology"
)

// graph is the site graph of a topology: sites by position, and for each
// undirected link i the directed links 2i (A→B) and 2i+1 (B→A).
type graph struct {
	names []string
	index map[string]int
	// ends[d] are the sites directed link d leaves and enters.
	ends [][2]int
	// weight[d] is the cost of directed link d.
	weight []uint64
	// adj[s] lists the directed links leaving site s, in link order.
	adj [][]int
	// pair maps an unordered site pair to its undirected link.
	pair map[[2]int]int
}

func newGraph(t *topology.Topology) (*graph, error) {
	g := &graph{index: map[string]int{}, adj: make([][]int, len(t.Brokers)), pair: map[[2]int]int{}}
	for i, b := range t.Brokers {
		if _, dup := g.index[b.Name]; dup {
			return nil, fmt.Errorf("site %q is listed twice", b.Name)
		}
		g.names = append(g.names, b.Name)
		g.index[b.Name] = i
	}
	for i, l := range t.Links {
		a, okA := g.index[l.A]
		b, okB := g.index[l.B]
		if !okA || !okB || a == b {
			return nil, fmt.Errorf("link %d (%s–%s) does not join two different sites", i, l.A, l.B)
		}
		key := [2]int{min(a, b), max(a, b)}
		if _, dup := g.pair[key]; dup {
			return nil, fmt.Errorf("link %d (%s–%s) is listed twice", i, l.A, l.B)
		}
		g.pair[key] = i
		w := uint64(max(l.Weight, 1))
		g.ends = append(g.ends, [2]int{a, b}, [2]int{b, a})
		g.weight = append(g.weight, w, w)
		g.adj[a] = append(g.adj[a], 2*i)
		g.adj[b] = append(g.adj[b], 2*i+1)
	}
	return g, nil
}

// link returns the undirected link between the sites named a and b.
func (g *graph) link(a, b string) (int, error) {
	ia, okA := g.index[a]
	ib, okB := g.index[b]
	switch {
	case !okA:
		return 0, fmt.Errorf("no site %q", a)
	case !okB:
		return 0, fmt.Errorf("no site %q", b)
	}
	i, ok := g.pair[[2]int{min(ia, ib), max(ia, ib)}]
	if !ok {
		return 0, fmt.Errorf("no link between %s and %s", a, b)
	}
	return i, nil
}

// shortestPaths returns, for every ordered pair of sites, the directed
// links of a least-weight path; nil when the destination is unreachable,
// empty from a site to itself. Ties go to the path found first when sites
// are settled in (distance, index) order, so routes are deterministic and
// every flow keeps one path (no ECMP, hence no reordering).
func (g *graph) shortestPaths() [][][]int {
	n := len(g.names)
	paths := make([][][]int, n)
	for src := range n {
		dist := make([]uint64, n)
		via := make([]int, n) // directed link that reaches the site
		done := make([]bool, n)
		for i := range dist {
			dist[i], via[i] = ^uint64(0), -1
		}
		dist[src] = 0
		q := &siteQueue{{site: src}}
		for q.Len() > 0 {
			it := heap.Pop(q).(siteItem)
			if done[it.site] {
				continue
			}
			done[it.site] = true
			for _, d := range g.adj[it.site] {
				to := g.ends[d][1]
				if nd := it.dist + g.weight[d]; !done[to] && nd < dist[to] {
					dist[to], via[to] = nd, d
					heap.Push(q, siteItem{site: to, dist: nd})
				}
			}
		}
		paths[src] = make([][]int, n)
		for dst := range n {
			if dst == src {
				paths[src][dst] = []int{}
				continue
			}
			if via[dst] < 0 {
				continue
			}
			var rev []int
			for s := dst; s != src; s = g.ends[via[s]][0] {
				rev = append(rev, via[s])
			}
			p := make([]int, len(rev))
			for i, d := range rev {
				p[len(rev)-1-i] = d
			}
			paths[src][dst] = p
		}
	}
	return paths
}

type siteItem struct {
	site int
	dist uint64
}

type siteQueue []siteItem

func (q siteQueue) Len() int { return len(q) }
func (q siteQueue) Less(i, j int) bool {
	if q[i].dist != q[j].dist {
		return q[i].dist < q[j].dist
	}
	return q[i].site < q[j].site
}
func (q siteQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *siteQueue) Push(x any)   { *q = append(*q, x.(siteItem)) }
func (q *siteQueue) Pop() any {
	old := *q
	it := old[len(old)-1]
	*q = old[:len(old)-1]
	return it
}
