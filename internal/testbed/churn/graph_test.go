package churn

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// randomGraph has n vertices and up to m random edges: connected or not,
// trees, cycles and dense graphs alike.
func randomGraph(rng *rand.Rand, n, m int) Graph {
	g := Graph{N: n}
	have := map[[2]int]bool{}
	for tries := 0; len(g.Edges) < m && tries < 10*m; tries++ {
		a, b := rng.IntN(n), rng.IntN(n)
		if a == b || have[[2]int{min(a, b), max(a, b)}] {
			continue
		}
		have[[2]int{min(a, b), max(a, b)}] = true
		g.Edges = append(g.Edges, [2]int{a, b})
	}
	return g
}

// bruteCuts is the definition: v is a cut vertex when removing it leaves
// more components than the graph had, not counting v's own.
func bruteCuts(g Graph) []int {
	var out []int
	before := len(g.Components())
	for v := range g.N {
		isolated := g.Degree(v) == 0
		after := len(g.Components(v))
		if isolated {
			after++ // v was a component of its own
		}
		if after > before {
			out = append(out, v)
		}
	}
	return out
}

func TestArticulationPointsMatchBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	withCuts, without := 0, 0
	for i := range 2000 {
		n := 1 + rng.IntN(16)
		g := randomGraph(rng, n, rng.IntN(n*(n-1)/2+1))
		require.NoError(t, g.Validate())
		want := bruteCuts(g)
		require.Equal(t, want, g.ArticulationPoints(), "graph %d: %+v", i, g)
		if len(want) > 0 {
			withCuts++
		} else {
			without++
		}
	}
	// The draw must exercise both answers, or the comparison proves little.
	assert.Greater(t, withCuts, 200)
	assert.Greater(t, without, 200)
}

func TestArticulationPointsKnownGraphs(t *testing.T) {
	path := Graph{N: 4, Edges: [][2]int{{0, 1}, {1, 2}, {2, 3}}}
	assert.Equal(t, []int{1, 2}, path.ArticulationPoints())
	ring := Graph{N: 4, Edges: [][2]int{{0, 1}, {1, 2}, {2, 3}, {3, 0}}}
	assert.Empty(t, ring.ArticulationPoints())
	// Two triangles sharing vertex 2, the DFS root's child: a bow tie.
	bowtie := Graph{N: 5, Edges: [][2]int{{0, 1}, {1, 2}, {2, 0}, {2, 3}, {3, 4}, {4, 2}}}
	assert.Equal(t, []int{2}, bowtie.ArticulationPoints())
	star := Graph{N: 4, Edges: [][2]int{{0, 1}, {0, 2}, {0, 3}}}
	assert.Equal(t, []int{0}, star.ArticulationPoints(), "a root with several children")
}

func TestComponents(t *testing.T) {
	g := Graph{N: 6, Edges: [][2]int{{0, 1}, {1, 2}, {3, 4}}}
	assert.Equal(t, [][]int{{0, 1, 2}, {3, 4}, {5}}, g.Components())
	assert.Equal(t, [][]int{{0}, {2}, {3, 4}, {5}}, g.Components(1))
	assert.False(t, g.Connected())
	assert.True(t, Graph{N: 2, Edges: [][2]int{{1, 0}}}.Connected())
}

func TestGraphValidate(t *testing.T) {
	assert.ErrorContains(t, Graph{N: 2, Edges: [][2]int{{0, 2}}}.Validate(), "edge 0 (0–2) names a vertex outside 0..1")
	assert.ErrorContains(t, Graph{N: 2, Edges: [][2]int{{1, 1}}}.Validate(), "edge 0 is a loop at 1")
	assert.ErrorContains(t, Graph{N: 2, Edges: [][2]int{{0, 1}, {1, 0}}}.Validate(), "edge 1 (1–0) is repeated")
}
