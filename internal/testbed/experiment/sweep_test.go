package experiment

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gonum.org/v1/plot/plotter"

	"github.com/dripmesh/drip/internal/bench"
	"github.com/dripmesh/drip/internal/testbed/systems"
)

// rampResult is a run whose input is 10, 20, …, 10·n msg/s, whose ideal is
// repl × input, and whose output is the ideal capped at top.
func rampResult(scenario, system string, n int, repl float64, top uint64) *Result {
	r := &Result{Scenario: ScenarioInfo{Name: scenario}, System: systems.Info{System: system},
		SendSeconds: float64(n), Replication: bench.Replication{Client: repl}}
	for s := range n + 2 { // two seconds of drain
		in := uint64(0)
		if s < n {
			in = uint64(10 * (s + 1))
		}
		ideal := uint64(repl * float64(in))
		r.Series = append(r.Series, Point{T: s, Input: in, Ideal: ideal, Output: min(ideal, top)})
	}
	return r
}

func TestIdealLine(t *testing.T) {
	for _, tt := range []struct {
		name string
		r    *Result
		want plotter.XYs
	}{
		// 3-s means: the last sending second averages 90 and 100.
		{"ramp", rampResult("a", "drip", 10, 4, 1e9), plotter.XYs{{X: 0, Y: 0}, {X: 95, Y: 380}}},
		{"higher replication", rampResult("a", "drip", 10, 20, 100), plotter.XYs{{X: 0, Y: 0}, {X: 95, Y: 1900}}},
		{"no replication", rampResult("a", "drip", 10, 0, 0), nil},
		{"nothing sent", &Result{Replication: bench.Replication{Client: 3}}, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, idealLine(tt.r))
		})
	}
	// The measured line is in input order and leaves out the drain.
	xys := throughput(rampResult("a", "drip", 10, 4, 200))
	require.Len(t, xys, 10)
	assert.Equal(t, plotter.XY{X: 15, Y: 60}, xys[0])
	assert.Equal(t, plotter.XY{X: 95, Y: 200}, xys[9])
}

func TestPlotSweeps(t *testing.T) {
	dir := t.TempDir()
	run := func(sc, sys string) *Result { return rampResult(sc, sys, 20, 20, 3000) }
	// scale-clients complete for drip, only the base for nats; the base
	// alone does not make the other sweeps' panels.
	rows := [][]*Result{
		{run("scale-base", "drip"), run("scale-base", "nats")},
		{run("scale-clients-20", "drip")},
		{run("scale-clients-50", "drip")},
	}
	files, err := plotSweeps(dir, "scale-clients", rows)
	require.NoError(t, err)
	assert.Equal(t, []string{filepath.Join(dir, "scale-clients-fig7-drip.png"), filepath.Join(dir, "scale-clients-fig7-nats.png")}, files)

	files, err = plotSweeps(dir, "scale", rows)
	require.NoError(t, err)
	assert.Equal(t, []string{filepath.Join(dir, "scale-fig7-drip.png")}, files, "nats has only the base: no sweep of the group")

	files, err = plotSweeps(dir, "scaling", [][]*Result{{run("brokers-8", "drip")}})
	require.NoError(t, err)
	assert.Empty(t, files)

	sweeps, _ := ScaleSweeps()
	assert.ErrorContains(t, PlotSweeps(sweeps, "drip", nil, filepath.Join(dir, "x.png")), "4 sweeps with 0 rows")
}
