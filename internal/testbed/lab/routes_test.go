package lab

import (
	"fmt"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dripmesh/drip/internal/sim"
	"github.com/dripmesh/drip/internal/topology"
)

// fromSim turns a sim topology into a lab topology (sites b0, b1, …).
func fromSim(g sim.Topology) *topology.Topology {
	t := &topology.Topology{Mesh: "test"}
	for _, id := range g.Routers {
		t.Brokers = append(t.Brokers, topology.Broker{Name: "b" + strconv.Itoa(int(id))})
	}
	for _, l := range g.Links {
		t.Links = append(t.Links, topology.Link{A: "b" + strconv.Itoa(int(l.A)), B: "b" + strconv.Itoa(int(l.B)), Weight: l.Weight})
	}
	return t
}

func sitePath(t *testing.T, tp *topology.Topology, src, dst string) []string {
	t.Helper()
	n, err := NewNetwork[int](tp, NetworkOptions{})
	require.NoError(t, err)
	s, _ := n.Site(src)
	d, _ := n.Site(dst)
	return n.Path(s, d)
}

func TestShortestPaths(t *testing.T) {
	line := fromSim(sim.Line(4))
	assert.Equal(t, []string{"b0", "b1", "b2", "b3"}, sitePath(t, line, "b0", "b3"))
	assert.Equal(t, []string{"b3", "b2", "b1"}, sitePath(t, line, "b3", "b1"))
	assert.Equal(t, []string{"b2"}, sitePath(t, line, "b2", "b2"), "a site reaches itself without links")

	// Square b0-b1-b2-b3-b0 plus the diagonal b0-b2 (Carzaniga09 §5.2.1).
	sq, err := Generate(GenOptions{Shape: ShapeSquare})
	require.NoError(t, err)
	assert.Equal(t, []string{"b0", "b2"}, sitePath(t, sq, "b0", "b2"), "the diagonal is one hop")
	assert.Equal(t, []string{"b1", "b0", "b3"}, sitePath(t, sq, "b1", "b3"), "equal-cost tie goes to the lower site")

	// A heavy diagonal is avoided.
	sq.Links[4].Weight = 5
	assert.Equal(t, []string{"b0", "b1", "b2"}, sitePath(t, sq, "b0", "b2"))

	split := fromSim(sim.Line(2))
	split.Brokers = append(split.Brokers, topology.Broker{Name: "b2"})
	assert.Nil(t, sitePath(t, split, "b0", "b2"), "unreachable")
}

// Routes are least-weight paths: checked against Floyd–Warshall on random
// weighted graphs.
func TestShortestPathsProperty(t *testing.T) {
	for seed := range uint64(30) {
		n := 2 + int(seed%25)
		g := sim.RandomConnected(n, 3, seed).RandomWeights(4, seed)
		tp := fromSim(g)
		gr, err := newGraph(tp)
		require.NoError(t, err)
		paths := gr.shortestPaths()

		const inf = ^uint64(0) / 4
		dist := make([][]uint64, n)
		for i := range dist {
			dist[i] = make([]uint64, n)
			for j := range dist[i] {
				if i != j {
					dist[i][j] = inf
				}
			}
		}
		for _, l := range g.Links {
			a, b := int(l.A), int(l.B)
			dist[a][b] = min(dist[a][b], uint64(l.Weight))
			dist[b][a] = dist[a][b]
		}
		for k := range n {
			for i := range n {
				for j := range n {
					dist[i][j] = min(dist[i][j], dist[i][k]+dist[k][j])
				}
			}
		}
		for src := range n {
			for dst := range n {
				p := paths[src][dst]
				require.NotNil(t, p, "seed %d: %d→%d connected", seed, src, dst)
				at, cost := src, uint64(0)
				for _, d := range p {
					require.Equal(t, at, gr.ends[d][0], "seed %d: %d→%d path is contiguous", seed, src, dst)
					at = gr.ends[d][1]
					cost += gr.weight[d]
				}
				require.Equal(t, dst, at, "seed %d: %d→%d path ends at the destination", seed, src, dst)
				require.Equal(t, dist[src][dst], cost, fmt.Sprintf("seed %d: %d→%d path is least-weight", seed, src, dst))
			}
		}
	}
}

func TestGraphErrors(t *testing.T) {
	tp := &topology.Topology{Brokers: []topology.Broker{{Name: "a"}, {Name: "b"}}, Links: []topology.Link{{A: "a", B: "b"}, {A: "b", B: "a"}}}
	_, err := newGraph(tp)
	assert.ErrorContains(t, err, "listed twice")
	tp.Links = []topology.Link{{A: "a", B: "x"}}
	_, err = newGraph(tp)
	assert.ErrorContains(t, err, "does not join two different sites")
	tp.Brokers = append(tp.Brokers, topology.Broker{Name: "a"})
	_, err = newGraph(tp)
	assert.ErrorContains(t, err, `site "a" is listed twice`)
}
