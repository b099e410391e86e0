package experiment

import (
	"fmt"
	"path/filepath"
	"slices"
	"sort"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// Fig. 7 of Carzaniga09 plots, per swept parameter, the output throughput
// against the input rate with one line per parameter value, and beside
// each the ideal throughput, input × replication, which differs between
// values when the parameter changes the replication (§5.2.2).

// throughput is r's output against its input, 3-s means of the sending
// seconds, in order of input.
func throughput(r *Result) plotter.XYs {
	pts := sending(r)
	in := smooth(pts, func(p Point) float64 { return float64(p.Input) })
	out := smooth(pts, func(p Point) float64 { return float64(p.Output) })
	xys := make(plotter.XYs, len(pts))
	for i := range pts {
		xys[i] = plotter.XY{X: in[i].Y, Y: out[i].Y}
	}
	sort.SliceStable(xys, func(a, b int) bool { return xys[a].X < xys[b].X })
	return xys
}

// idealLine is r's ideal throughput over the input range it sent: the
// input times the run's client replication (the oracle's deliveries per
// message), from no input to the highest 3-s mean input.
func idealLine(r *Result) plotter.XYs {
	top := 0.0
	for _, xy := range throughput(r) {
		top = max(top, xy.X)
	}
	if top == 0 || r.Replication.Client == 0 {
		return nil
	}
	return plotter.XYs{{X: 0, Y: 0}, {X: top, Y: top * r.Replication.Client}}
}

// sweepPlot is one panel of Fig. 7: results[i] is the run of the sweep's
// i-th value (nil when missing), all of one system.
func sweepPlot(sw Sweep, system string, results []*Result, legend bool) *plot.Plot {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("%s — %s", sw.Parameter, system)
	p.X.Label.Text = "input (messages/s)"
	p.Y.Label.Text = "output (deliveries/s)"
	p.X.Min, p.Y.Min = 0, 0
	for i, r := range results {
		if r == nil || r.Error != "" || len(r.Series) == 0 {
			continue
		}
		col := plotutil.Color(i)
		if out, err := plotter.NewLine(throughput(r)); err == nil {
			out.Color, out.Width = col, vg.Points(1.5)
			p.Add(out)
			if legend {
				p.Legend.Add(sw.Label(i), out)
			}
		}
		if xys := idealLine(r); xys != nil {
			ideal, err := plotter.NewLine(xys)
			if err == nil {
				ideal.Color, ideal.Width, ideal.Dashes = col, vg.Points(0.8), []vg.Length{vg.Points(4), vg.Points(3)}
				p.Add(ideal)
			}
		}
	}
	if legend {
		p.Legend.Top, p.Legend.Left = true, true
	}
	p.Add(plotter.NewGrid())
	return p
}

// PlotSweeps writes Fig. 7 for one system: one panel per sweep, side by
// side in a row (sweeps[i]'s runs are results[i], in its values' order),
// solid lines measured, dashed the ideal of the same colour.
func PlotSweeps(sweeps []Sweep, system string, results [][]*Result, path string) error {
	if len(sweeps) == 0 || len(sweeps) != len(results) {
		return fmt.Errorf("experiment: %d sweeps with %d rows of results", len(sweeps), len(results))
	}
	plots := [][]*plot.Plot{make([]*plot.Plot, len(sweeps))}
	for i, sw := range sweeps {
		plots[0][i] = sweepPlot(sw, system, results[i], true)
	}
	img := vgimg.NewWith(vgimg.UseWH(vg.Length(len(sweeps))*12*vg.Centimeter, 10*vg.Centimeter), vgimg.UseDPI(100))
	canvases := plot.Align(plots, draw.Tiles{Rows: 1, Cols: len(sweeps), PadX: vg.Millimeter * 4, PadLeft: vg.Millimeter * 2,
		PadRight: vg.Millimeter * 2, PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2}, draw.New(img))
	for j, p := range plots[0] {
		p.Draw(canvases[0][j])
	}
	return savePNG(img, path)
}

// plotSweeps writes, for the scale sweeps whose scenarios are among
// results' rows, NAME-fig7-SYSTEM.png for every system that ran: the
// panels of those sweeps (all four for the scale group). It writes nothing
// when no sweep has a run.
func plotSweeps(dir, name string, results [][]*Result) ([]string, error) {
	byScenario := map[string]map[string]*Result{}
	var systemsSeen []string
	for _, row := range results {
		for _, r := range row {
			if byScenario[r.Scenario.Name] == nil {
				byScenario[r.Scenario.Name] = map[string]*Result{}
			}
			if !slices.Contains(systemsSeen, r.System.System) {
				systemsSeen = append(systemsSeen, r.System.System)
			}
			byScenario[r.Scenario.Name][r.System.System] = r
		}
	}
	all, _ := ScaleSweeps()
	var files []string
	for _, sys := range systemsSeen {
		var sweeps []Sweep
		var rows [][]*Result
		for _, sw := range all {
			row := make([]*Result, len(sw.Scenarios))
			n := 0
			for i, sc := range sw.Scenarios {
				if r := byScenario[sc][sys]; r != nil {
					row[i], n = r, n+1
				}
			}
			// A sweep counts when a run of it other than the shared base
			// is present, or when it is the one asked for.
			if n > 1 || (n == 1 && name == sw.Name) {
				sweeps, rows = append(sweeps, sw), append(rows, row)
			}
		}
		if len(sweeps) == 0 {
			continue
		}
		f := filepath.Join(dir, name+"-fig7-"+sys+".png")
		if err := PlotSweeps(sweeps, sys, rows, f); err != nil {
			return files, fmt.Errorf("writing %s: %w", f, err)
		}
		files = append(files, f)
	}
	return files, nil
}
