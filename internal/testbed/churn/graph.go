package churn

import (
	"fmt"
	"slices"
)

// Graph is an undirected simple graph over the vertices 0..N-1.
type Graph struct {
	N     int
	Edges [][2]int
}

// adjacency lists each vertex's neighbours in increasing order.
func (g Graph) adjacency() [][]int {
	adj := make([][]int, g.N)
	for _, e := range g.Edges {
		adj[e[0]] = append(adj[e[0]], e[1])
		adj[e[1]] = append(adj[e[1]], e[0])
	}
	for _, a := range adj {
		slices.Sort(a)
	}
	return adj
}

// Degree is the number of links of vertex v.
func (g Graph) Degree(v int) int {
	d := 0
	for _, e := range g.Edges {
		if e[0] == v || e[1] == v {
			d++
		}
	}
	return d
}

// Validate reports an edge out of range, a loop or a repeated edge.
func (g Graph) Validate() error {
	seen := map[[2]int]bool{}
	for i, e := range g.Edges {
		a, b := min(e[0], e[1]), max(e[0], e[1])
		switch {
		case a < 0 || b >= g.N:
			return fmt.Errorf("edge %d (%d–%d) names a vertex outside 0..%d", i, e[0], e[1], g.N-1)
		case a == b:
			return fmt.Errorf("edge %d is a loop at %d", i, a)
		case seen[[2]int{a, b}]:
			return fmt.Errorf("edge %d (%d–%d) is repeated", i, e[0], e[1])
		}
		seen[[2]int{a, b}] = true
	}
	return nil
}

// Components returns the connected components of g once the vertices in
// removed are taken out, each in increasing order, ordered by their
// smallest vertex.
func (g Graph) Components(removed ...int) [][]int {
	adj := g.adjacency()
	comp := make([]int, g.N)
	for i := range comp {
		comp[i] = -1
	}
	for _, v := range removed {
		comp[v] = -2
	}
	var out [][]int
	for s := range g.N {
		if comp[s] != -1 {
			continue
		}
		id := len(out)
		members := []int{s}
		comp[s] = id
		for k := 0; k < len(members); k++ { // breadth first; each vertex enters once
			for _, w := range adj[members[k]] {
				if comp[w] == -1 {
					comp[w] = id
					members = append(members, w)
				}
			}
		}
		slices.Sort(members)
		out = append(out, members)
	}
	return out
}

// Connected reports whether g is one component.
func (g Graph) Connected() bool { return g.N > 0 && len(g.Components()) == 1 }

// ArticulationPoints returns the cut vertices of g — those whose removal
// leaves more components than g has — in increasing order. It is the
// lowpoint depth-first search of Hopcroft and Tarjan, written with an
// explicit stack so that its depth does not depend on the graph's: a
// non-root vertex u is a cut vertex when some child w in the DFS tree has
// low(w) ≥ disc(u) (no back edge from w's subtree climbs above u); a root
// is one when it has two or more children.
func (g Graph) ArticulationPoints() []int {
	adj := g.adjacency()
	disc := make([]int, g.N) // 0: not visited; else discovery time from 1
	low := make([]int, g.N)
	parent := make([]int, g.N)
	cut := make([]bool, g.N)
	type frame struct{ v, next int } // next: index into adj[v] still to explore
	t := 0
	for root := range g.N {
		if disc[root] != 0 {
			continue
		}
		t++
		disc[root], low[root], parent[root] = t, t, -1
		children := 0
		stack := []frame{{root, 0}}
		for len(stack) > 0 {
			f := &stack[len(stack)-1]
			if f.next < len(adj[f.v]) {
				w := adj[f.v][f.next]
				f.next++
				switch {
				case disc[w] == 0:
					t++
					disc[w], low[w], parent[w] = t, t, f.v
					if f.v == root {
						children++
					}
					stack = append(stack, frame{w, 0})
				case w != parent[f.v]:
					low[f.v] = min(low[f.v], disc[w])
				}
				continue
			}
			// f.v is finished: hand its low point to its parent.
			v := f.v
			stack = stack[:len(stack)-1]
			if p := parent[v]; p >= 0 {
				low[p] = min(low[p], low[v])
				if p != root && low[v] >= disc[p] {
					cut[p] = true
				}
			}
		}
		cut[root] = children > 1
	}
	var out []int
	for v, c := range cut {
		if c {
			out = append(out, v)
		}
	}
	return out
}
