package lab

import (
	"net/netip"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dripmesh/drip/internal/sim"
	"github.com/dripmesh/drip/internal/topology"
)

// diameter of a topology file's graph, through sim's implementation.
func diameter(t *topology.Topology) int {
	idx := map[string]uint32{}
	var g sim.Topology
	for i, b := range t.Brokers {
		idx[b.Name] = uint32(i)
		g.Routers = append(g.Routers, uint32(i))
	}
	for _, l := range t.Links {
		g.Links = append(g.Links, sim.Link{A: idx[l.A], B: idx[l.B], Weight: 1})
	}
	return g.Diameter()
}

func TestGenerateShapes(t *testing.T) {
	tests := []struct {
		name            string
		o               GenOptions
		sites, diameter int
	}{
		{"line", GenOptions{Shape: ShapeLine, N: 5}, 5, 4},
		{"single", GenOptions{Shape: ShapeLine, N: 1}, 1, 0},
		// Carzaniga09 §5.2.1: "a square plus one diagonal link".
		{"square", GenOptions{Shape: ShapeSquare}, 4, 2},
		// Carzaniga09 §5.2.1: 8 brokers, "a topology of diameter 3".
		{"eight", GenOptions{Shape: ShapeEight}, 8, 3},
		{"eight other seed", GenOptions{Shape: ShapeEight, Seed: 9}, 8, 3},
		// Carzaniga09 §5.2.2: 42 brokers, BRITE, diameter eleven.
		{"paper", GenOptions{Shape: ShapeBRITE, N: 42, Diameter: 11}, 42, 11},
		{"brite dense", GenOptions{Shape: ShapeBRITE, N: 30, Degree: 3.5, Diameter: 6}, 30, 6},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.o.Bandwidth, tt.o.Delay, tt.o.Jitter, tt.o.Loss = 1e6, 20*ms, ms, 0.01
			tp, err := Generate(tt.o)
			require.NoError(t, err)
			require.Len(t, tp.Brokers, tt.sites)
			assert.Equal(t, tt.diameter, diameter(tp))
			addrs, err := Addresses(tp, DefaultPrefix)
			require.NoError(t, err)
			for i, b := range tp.Brokers {
				assert.Equal(t, "b"+strconv.Itoa(i), b.Name)
				want, _ := PlanAddr(DefaultPrefix, i)
				assert.Equal(t, want, addrs[i])
				assert.Equal(t, netip.AddrPortFrom(want, PeerPort).String(), b.Peer)
				assert.Equal(t, netip.AddrPortFrom(want, ClientPort).String(), b.Client)
				assert.Equal(t, netip.AddrPortFrom(want, MetricsPort).String(), b.Metrics)
			}
			for _, l := range tp.Links {
				assert.Equal(t, topology.Rate(1e6), l.Bandwidth)
				assert.Equal(t, topology.Duration(20*ms), l.Delay)
				assert.Equal(t, topology.Duration(ms), l.Jitter)
				assert.InDelta(t, 0.01, float64(l.Loss), 1e-12)
			}
			again, err := Generate(tt.o)
			require.NoError(t, err)
			assert.Equal(t, tp, again, "deterministic")
		})
	}

	sq, err := Generate(GenOptions{Shape: ShapeSquare})
	require.NoError(t, err)
	assert.Len(t, sq.Links, 5)
	assert.Len(t, sq.Neighbors("b0"), 3, "b0 has the diagonal")
	assert.Len(t, sq.Neighbors("b1"), 2)

	dense, err := Generate(GenOptions{Shape: ShapeBRITE, N: 200, Degree: 3.6})
	require.NoError(t, err)
	assert.InDelta(t, 3.6, 2*float64(len(dense.Links))/200, 0.3, "average degree follows --degree")
}

func TestGenerateGeoDelay(t *testing.T) {
	tp, err := Generate(GenOptions{Shape: ShapeBRITE, N: 20, GeoDelay: true, Delay: 99 * ms})
	require.NoError(t, err)
	distinct := map[topology.Duration]bool{}
	for _, l := range tp.Links {
		assert.GreaterOrEqual(t, time.Duration(l.Delay), 500*time.Microsecond)
		assert.Less(t, time.Duration(l.Delay), 40*ms, "at most the plane's diagonal")
		distinct[l.Delay] = true
	}
	assert.Greater(t, len(distinct), 5, "delays follow distances")
}

func TestGenerateErrors(t *testing.T) {
	for _, tt := range []struct {
		o    GenOptions
		want string
	}{
		{GenOptions{Shape: "star"}, `unknown shape "star"`},
		{GenOptions{Shape: ShapeLine}, "at least 1 site"},
		{GenOptions{Shape: ShapeSquare, N: 5}, "4 sites, not 5"},
		{GenOptions{Shape: ShapeEight, N: 7}, "8 sites, not 7"},
		{GenOptions{Shape: ShapeBRITE, N: 1}, "at least 2 sites"},
		{GenOptions{Shape: ShapeLine, N: 300, Prefix: netip.MustParsePrefix("10.0.0.0/24")}, "no room for site 254"},
	} {
		_, err := Generate(tt.o)
		assert.ErrorContains(t, err, tt.want, "%+v", tt.o)
	}
}
