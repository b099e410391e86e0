package experiment

import (
	"fmt"
	"image/color"
	"os"
	"sort"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// The plots follow Carzaniga09 Figs. 3–5: rates over time under a ramp, with
// the busiest link's utilisation on top, and throughput against input rate
// with the ideal (input × replication) for comparing systems.

var (
	colInput       = color.RGBA{R: 0x44, G: 0x44, B: 0x44, A: 0xff}
	colOutput      = color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}
	colIdeal       = color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff}
	colUndelivered = color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}
	colDuplicates  = color.RGBA{R: 0x94, G: 0x67, B: 0xbd, A: 0xff}
)

// sending returns the seconds of r during which messages were sent, whole
// ones only: the partial last second and the drain would show as a fall
// that the system did not cause. (Deliveries in the drain are in the JSON.)
func sending(r *Result) []Point {
	n := min(len(r.Series), int(r.SendSeconds))
	return r.Series[:n]
}

// smoothing is the moving-average window, in seconds, applied to the
// per-second counts of Poisson traffic before plotting.
const smoothing = 3

// PlotRun writes r as a PNG in the style of Carzaniga09 Figs. 4–5: input rate,
// output throughput, ideal throughput and undelivered messages per second
// over time, and above them the busiest link's utilisation.
func PlotRun(r *Result, path string) error {
	rates := ratesPlot(r, true)
	util := utilisationPlot(r)
	util.Title.Text, rates.Title.Text = rates.Title.Text+util.Title.Text, ""
	const w, h = 16 * vg.Centimeter, 13 * vg.Centimeter
	img := vgimg.NewWith(vgimg.UseWH(w, h), vgimg.UseDPI(110))
	dc := draw.New(img)
	top := draw.Crop(dc, 0, 0, h*0.70, 0)
	bottom := draw.Crop(dc, 0, 0, 0, -h*0.30)
	util.Draw(top)
	rates.Draw(bottom)
	return savePNG(img, path)
}

// curve is one line of a rates plot.
type curve struct {
	name  string
	col   color.Color
	dash  []vg.Length
	value func(Point) float64
}

func ratesPlot(r *Result, legend bool) *plot.Plot {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("%s — %s", r.Scenario.Name, r.System.System)
	if r.Error != "" {
		p.Title.Text += " (failed)"
	}
	p.X.Label.Text = "time (s)"
	p.Y.Label.Text = "messages/s"
	series := []curve{
		{"ideal", colIdeal, []vg.Length{vg.Points(4), vg.Points(2)}, func(pt Point) float64 { return float64(pt.Ideal) }},
		{"output", colOutput, nil, func(pt Point) float64 { return float64(pt.Output) }},
		{"input", colInput, nil, func(pt Point) float64 { return float64(pt.Input) }},
		{"undelivered", colUndelivered, nil, func(pt Point) float64 { return float64(pt.Undelivered) }},
	}
	if r.Totals.Duplicates > 0 {
		series = append(series, curve{"duplicates", colDuplicates, []vg.Length{vg.Points(1), vg.Points(2)}, func(pt Point) float64 { return float64(pt.Duplicates) }})
	}
	for _, s := range series {
		xys := smooth(sending(r), s.value)
		if len(xys) == 0 {
			continue
		}
		l, err := plotter.NewLine(xys)
		if err != nil {
			continue
		}
		l.Color, l.Dashes, l.Width = s.col, s.dash, vg.Points(1.2)
		p.Add(l)
		if legend {
			p.Legend.Add(s.name, l)
		}
	}
	p.Legend.Top, p.Legend.Left = true, true
	p.Y.Min = 0
	p.Add(plotter.NewGrid())
	return p
}

func utilisationPlot(r *Result) *plot.Plot {
	p := plot.New()
	p.Y.Label.Text = "busiest link %"
	p.Y.Min = 0
	xys := smooth(sending(r), func(pt Point) float64 { return 100 * pt.Utilisation })
	if l, err := plotter.NewLine(xys); err == nil && len(xys) > 0 {
		l.Color, l.Width = colUndelivered, vg.Points(1)
		p.Add(l)
	}
	switch {
	case len(r.Scenario.Links) == 0:
		p.Title.Text = " (one site: no links)"
	case r.LinkError != "":
		p.Title.Text = " (no link counts)"
	}
	p.Add(plotter.NewGrid())
	return p
}

// smooth returns a centred moving average of value over the series.
func smooth(series []Point, value func(Point) float64) plotter.XYs {
	xys := make(plotter.XYs, len(series))
	for i := range series {
		lo, hi := max(0, i-smoothing/2), min(len(series)-1, i+smoothing/2)
		var sum float64
		for k := lo; k <= hi; k++ {
			sum += value(series[k])
		}
		xys[i].X, xys[i].Y = float64(series[i].T), sum/float64(hi-lo+1)
	}
	return xys
}

// PlotCompare writes the systems' output throughput against input rate,
// one curve per system, with the ideal throughput (input × replication)
// dashed: where a curve leaves the ideal, that system stops delivering
// everything (Carzaniga09 §5.2.2, Fig. 7).
func PlotCompare(results []*Result, path string) error {
	p := comparePlot(results, true)
	img := vgimg.NewWith(vgimg.UseWH(16*vg.Centimeter, 11*vg.Centimeter), vgimg.UseDPI(110))
	p.Draw(draw.New(img))
	return savePNG(img, path)
}

func comparePlot(results []*Result, legend bool) *plot.Plot {
	p := plot.New()
	if len(results) > 0 {
		p.Title.Text = results[0].Scenario.Name + ": throughput against input rate"
	}
	p.X.Label.Text = "input (messages/s)"
	p.Y.Label.Text = "output (deliveries/s)"
	p.X.Min, p.Y.Min = 0, 0
	maxIn, repl := 0.0, 0.0
	for i, r := range results {
		if r.Error != "" || len(r.Series) == 0 {
			continue
		}
		if repl == 0 {
			repl = r.Replication.Client
		}
		in := smooth(sending(r), func(pt Point) float64 { return float64(pt.Input) })
		out := smooth(sending(r), func(pt Point) float64 { return float64(pt.Output) })
		var xys plotter.XYs
		for k := range in {
			xys = append(xys, plotter.XY{X: in[k].Y, Y: out[k].Y})
			maxIn = max(maxIn, in[k].Y)
		}
		sort.Slice(xys, func(a, b int) bool { return xys[a].X < xys[b].X })
		l, err := plotter.NewLine(xys)
		if err != nil || len(xys) == 0 {
			continue
		}
		l.Color, l.Width = plotutil.Color(i), vg.Points(1.4)
		p.Add(l)
		if legend {
			p.Legend.Add(r.System.System, l)
		}
	}
	if repl > 0 && maxIn > 0 {
		ideal, _ := plotter.NewLine(plotter.XYs{{X: 0, Y: 0}, {X: maxIn, Y: maxIn * repl}})
		ideal.Color, ideal.Dashes = color.Black, []vg.Length{vg.Points(4), vg.Points(3)}
		p.Add(ideal)
		if legend {
			p.Legend.Add(fmt.Sprintf("ideal (×%.1f)", repl), ideal)
		}
	}
	p.Legend.Top, p.Legend.Left = true, true
	p.Add(plotter.NewGrid())
	return p
}

// PlotGrid writes the rates over time of several scenarios (rows) and
// systems (columns) in one PNG, as Carzaniga09 Figs. 4 and 5 side by side.
// results[i][j] is scenario i on system j; nil cells stay empty.
func PlotGrid(results [][]*Result, path string) error {
	rows := len(results)
	if rows == 0 {
		return fmt.Errorf("experiment: nothing to plot")
	}
	cols := 0
	for _, row := range results {
		cols = max(cols, len(row))
	}
	plots := make([][]*plot.Plot, rows)
	for i, row := range results {
		plots[i] = make([]*plot.Plot, cols)
		for j, r := range row {
			if r != nil {
				plots[i][j] = ratesPlot(r, i == 0 && j == 0)
			}
		}
	}
	w, h := vg.Length(cols)*11*vg.Centimeter, vg.Length(rows)*7*vg.Centimeter
	img := vgimg.NewWith(vgimg.UseWH(w, h), vgimg.UseDPI(90))
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: rows, Cols: cols, PadX: vg.Millimeter * 3, PadY: vg.Millimeter * 3,
		PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 2}
	canvases := plot.Align(plots, tiles, dc)
	for i := range plots {
		for j, p := range plots[i] {
			if p != nil {
				p.Draw(canvases[i][j])
			}
		}
	}
	return savePNG(img, path)
}

// PlotLinks writes the busiest link's utilisation over time, one panel per
// system and one curve per scenario (Carzaniga09 Figs. 4–5, top strips).
// results[i][j] is scenario i on system j.
func PlotLinks(results [][]*Result, path string) error {
	cols := 0
	for _, row := range results {
		cols = max(cols, len(row))
	}
	if cols == 0 {
		return fmt.Errorf("experiment: nothing to plot")
	}
	plots := [][]*plot.Plot{make([]*plot.Plot, cols)}
	for j := range cols {
		p := plot.New()
		p.X.Label.Text = "time (s)"
		p.Y.Label.Text = "busiest link (% of bandwidth)"
		p.Y.Min = 0
		for i, row := range results {
			if j >= len(row) || row[j] == nil || row[j].Error != "" || len(row[j].Scenario.Links) == 0 {
				continue // nothing measured, or no links to measure
			}
			r := row[j]
			p.Title.Text = r.System.System
			xys := smooth(sending(r), func(pt Point) float64 { return 100 * pt.Utilisation })
			l, err := plotter.NewLine(xys)
			if err != nil || len(xys) == 0 {
				continue
			}
			l.Color, l.Dashes, l.Width = plotutil.Color(i), plotutil.Dashes(i), vg.Points(1.2)
			p.Add(l)
			p.Legend.Add(r.Scenario.Name, l)
		}
		p.Legend.Top, p.Legend.Left = true, true
		p.Add(plotter.NewGrid())
		plots[0][j] = p
	}
	img := vgimg.NewWith(vgimg.UseWH(vg.Length(cols)*11*vg.Centimeter, 8*vg.Centimeter), vgimg.UseDPI(90))
	canvases := plot.Align(plots, draw.Tiles{Rows: 1, Cols: cols, PadX: vg.Millimeter * 3, PadLeft: vg.Millimeter * 2,
		PadRight: vg.Millimeter * 2, PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2}, draw.New(img))
	for j, p := range plots[0] {
		p.Draw(canvases[0][j])
	}
	return savePNG(img, path)
}

func savePNG(img *vgimg.Canvas, path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
