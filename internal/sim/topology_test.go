package sim

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func degree(t Topology) float64 { return 2 * float64(len(t.Links)) / float64(len(t.Routers)) }

func TestSimpleTopologies(t *testing.T) {
	for _, tc := range []struct {
		name         string
		topo         Topology
		routers      int
		links        int
		diameter     int
		validatesErr bool
	}{
		{"line", Line(5), 5, 4, 4, false},
		{"ring", Ring(6), 6, 6, 3, false},
		{"grid", Grid(4, 3), 12, 17, 5, false},
		{"single", Line(1), 1, 0, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.NoError(t, tc.topo.Validate())
			assert.Len(t, tc.topo.Routers, tc.routers)
			assert.Len(t, tc.topo.Links, tc.links)
			assert.Equal(t, tc.diameter, tc.topo.Diameter())
		})
	}
}

func TestRandomConnected(t *testing.T) {
	for _, n := range []int{2, 10, 200} {
		topo := RandomConnected(n, 4, uint64(n))
		require.NoError(t, topo.Validate())
		assert.GreaterOrEqual(t, topo.Diameter(), 1, "connected")
		if n >= 10 {
			assert.InDelta(t, 4, degree(topo), 0.2)
		}
		assert.Equal(t, topo, RandomConnected(n, 4, uint64(n)), "deterministic")
	}
	assert.NotEqual(t, RandomConnected(20, 4, 1), RandomConnected(20, 4, 2))
}

func TestBRITELike(t *testing.T) {
	for seed := range uint64(10) {
		topo := BRITELike(DefaultBRITE(42), seed)
		require.NoError(t, topo.Validate())
		assert.Len(t, topo.Routers, 42)
		assert.Positive(t, topo.Diameter(), "connected")
		assert.InDelta(t, 2.2, degree(topo), 0.3, "mostly a tree")
		for _, l := range topo.Links {
			assert.Positive(t, l.Delay)
		}
	}
	// docs/design.md §7 / Carzaniga09 §5.2.2: 42 brokers, diameter ≈ 11.
	paper := PaperTopology(1)
	assert.Len(t, paper.Routers, 42)
	assert.Equal(t, 11, paper.Diameter())
	assert.Equal(t, paper, PaperTopology(1))
}

func TestTopologyValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		topo Topology
		want string
	}{
		{"dup router", Topology{Routers: []uint32{1, 1}}, "router 1 listed twice"},
		{"unknown", Topology{Routers: []uint32{1}, Links: []Link{{A: 1, B: 2, Weight: 1}}}, "unknown router"},
		{"self", Topology{Routers: []uint32{1}, Links: []Link{{A: 1, B: 1, Weight: 1}}}, "to itself"},
		{"weight", Topology{Routers: []uint32{1, 2}, Links: []Link{{A: 1, B: 2}}}, "weight 0"},
		{"dup link", Topology{Routers: []uint32{1, 2}, Links: []Link{{A: 1, B: 2, Weight: 1}, {A: 2, B: 1, Weight: 1}}}, "duplicates 2–1"},
		{"delay", Topology{Routers: []uint32{1, 2}, Links: []Link{{A: 1, B: 2, Weight: 1, Delay: -1}}}, "negative delay"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.ErrorContains(t, tc.topo.Validate(), tc.want)
			_, err := New(tc.topo, Options{})
			require.Error(t, err)
		})
	}
	assert.Equal(t, -1, Topology{Routers: []uint32{1, 2}}.Diameter())
}
