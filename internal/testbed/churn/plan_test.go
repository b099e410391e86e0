package churn

import (
	"slices"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dripmesh/drip/internal/topology"
)

func TestNewPlan(t *testing.T) {
	for seed := range uint64(100) {
		p, err := NewPlan(seed)
		require.NoError(t, err, "seed %d", seed)
		g := p.Graph
		require.NoError(t, g.Validate())
		assert.Equal(t, Brokers, g.N)
		assert.Len(t, g.Edges, Links)
		assert.True(t, g.Connected(), "seed %d", seed)
		assert.Equal(t, g.ArticulationPoints(), p.CutVertices)
		require.NotEmpty(t, p.CutVertices)
		assert.Contains(t, p.CutVertices, p.Cut)
		assert.Greater(t, len(g.Components(p.Cut)), 1, "seed %d: the cut vertex partitions the mesh", seed)
		assert.NotContains(t, p.CutVertices, p.NonCut)
		assert.Len(t, g.Components(p.NonCut), 1, "seed %d: the mesh stays connected without the other victim", seed)
		for v := range g.N {
			if !slices.Contains(p.CutVertices, v) {
				assert.LessOrEqual(t, g.Degree(v), g.Degree(p.NonCut), "seed %d: the non-cut victim has the highest degree", seed)
			}
		}
		assert.Len(t, p.Clients, ClientBrokers)
		assert.Contains(t, p.Clients, p.Cut, "the victims have clients")
		assert.Contains(t, p.Clients, p.NonCut)
		sorted := slices.Clone(p.Clients)
		slices.Sort(sorted)
		assert.Len(t, slices.Compact(sorted), ClientBrokers, "client brokers are distinct")
	}
}

func TestNewPlanDeterministic(t *testing.T) {
	a, err := NewPlan(7)
	require.NoError(t, err)
	b, err := NewPlan(7)
	require.NoError(t, err)
	assert.Equal(t, a, b)
	c, err := NewPlan(8)
	require.NoError(t, err)
	assert.NotEqual(t, a.Graph, c.Graph)
}

func TestPlanTopology(t *testing.T) {
	p, err := NewPlan(1)
	require.NoError(t, err)
	addrs := make([]Addrs, Brokers)
	for i := range addrs {
		port := func(base int) string { return "127.0.0.1:" + strconv.Itoa(base+i) }
		addrs[i] = Addrs{Client: port(7000), Peer: port(7100), Metrics: port(9100)}
	}
	topo, err := p.Topology(addrs)
	require.NoError(t, err)
	b, err := topo.Marshal()
	require.NoError(t, err)
	back, err := topology.Parse(b)
	require.NoError(t, err, "drip reads what is written")
	require.Len(t, back.Brokers, Brokers)
	assert.Len(t, back.Links, Links)
	for i, br := range back.Brokers {
		assert.Equal(t, Name(i), br.Name)
		assert.Equal(t, uint32(i), *br.ID)
		assert.Equal(t, addrs[i].Client, br.Client)
		assert.Equal(t, addrs[i].Metrics, br.Metrics)
	}
	// The file's links are the plan's graph.
	for _, e := range p.Graph.Edges {
		n := back.Neighbors(Name(e[0]))
		assert.True(t, slices.ContainsFunc(n, func(x topology.Neighbor) bool { return x.Broker.Name == Name(e[1]) }))
	}
	_, err = p.Topology(addrs[:3])
	assert.ErrorContains(t, err, "3 address sets for 12 brokers")
}

func TestFreeAddrs(t *testing.T) {
	addrs, err := FreeAddrs(3)
	require.NoError(t, err)
	seen := map[string]bool{}
	for _, a := range addrs {
		for _, s := range []string{a.Client, a.Peer, a.Metrics} {
			assert.False(t, seen[s], "%s handed out twice", s)
			seen[s] = true
		}
	}
}
