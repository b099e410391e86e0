package experiment

import (
	"image/png"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dripmesh/drip/internal/topology"
)

func TestLayout(t *testing.T) {
	for _, tt := range []struct {
		name string
		topo *topology.Topology
	}{
		{"line", lineTopology(5)},
		{"eight", Topology(8)},
		{"scale", ScaleTopology(1e6)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			pos := layout(tt.topo)
			require.Len(t, pos, len(tt.topo.Brokers))
			idx := map[string]int{}
			for i, b := range tt.topo.Brokers {
				idx[b.Name] = i
			}
			minDist, linked, all := math.Inf(1), 0.0, 0.0
			for i, p := range pos {
				assert.True(t, p.X >= 0 && p.X <= 1 && p.Y >= 0 && p.Y <= 1, "site %d at %v", i, p)
				for j := i + 1; j < len(pos); j++ {
					d := math.Hypot(p.X-pos[j].X, p.Y-pos[j].Y)
					minDist = min(minDist, d)
					all += d
				}
			}
			for _, l := range tt.topo.Links {
				a, b := pos[idx[l.A]], pos[idx[l.B]]
				linked += math.Hypot(a.X-b.X, a.Y-b.Y)
			}
			n := float64(len(pos))
			assert.Greater(t, minDist, 0.01, "no two sites on top of each other")
			assert.Less(t, linked/float64(len(tt.topo.Links)), all/(n*(n-1)/2), "linked sites closer than the average pair")
			assert.Equal(t, pos, layout(tt.topo), "deterministic")
		})
	}
	assert.Empty(t, layout(&topology.Topology{}))
}

func TestPlotTopology(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "t.png")
	require.NoError(t, PlotTopology(ScaleTopology(1e6), "scale-base", path))
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	img, err := png.Decode(f)
	require.NoError(t, err)
	assert.Greater(t, img.Bounds().Dx(), 500)
	assert.ErrorContains(t, PlotTopology(&topology.Topology{}, "x", path), "no sites")

	require.NoError(t, WriteTopology(ScaleTopology(1e6), filepath.Join(dir, "t.yaml")))
	b, err := os.ReadFile(filepath.Join(dir, "t.yaml"))
	require.NoError(t, err)
	back, err := topology.Parse(b)
	require.NoError(t, err)
	assert.Len(t, back.Brokers, 42)
	assert.Len(t, back.Links, len(ScaleTopology(1e6).Links))
}
