package churn

import (
	"fmt"
	"image/color"
	"os"

	"github.com/dripmesh/drip/internal/bench"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// The colours of internal/testbed/experiment's plots, so that the pages
// of docs/results read alike.
var (
	colDelivered   = color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}
	colIdeal       = color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff}
	colUndelivered = color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}
	colDuplicates  = color.RGBA{R: 0x94, G: 0x67, B: 0xbd, A: 0xff}
	colFault       = color.RGBA{R: 0x44, G: 0x44, B: 0x44, A: 0xff}
)

// Plot writes r as a PNG: above, per second, the deliveries expected
// (ideal) and received; below, on their own scale, the undelivered ones
// (by the second they were sent) and the duplicates; the fault, the
// victim's exit (when it is not at once) and its restart marked on both.
// Unlike the experiments' plots the counts are not smoothed: a fault's
// effect lasts a second or two.
func Plot(r *Result, path string) error {
	const w, h = 16 * vg.Centimeter, 12 * vg.Centimeter
	img := vgimg.NewWith(vgimg.UseWH(w, h), vgimg.UseDPI(110))
	drawResult(r, draw.New(img))
	return savePNG(img, path)
}

// PlotAll writes the results one above the other in one PNG.
func PlotAll(rs []*Result, path string) error {
	if len(rs) == 0 {
		return fmt.Errorf("churn: no results to plot")
	}
	const w, hEach = 16 * vg.Centimeter, 10 * vg.Centimeter
	h := hEach * vg.Length(len(rs))
	img := vgimg.NewWith(vgimg.UseWH(w, h), vgimg.UseDPI(110))
	dc := draw.New(img)
	for i, r := range rs {
		top := hEach * vg.Length(i)
		drawResult(r, draw.Crop(dc, 0, 0, h-top-hEach, -top))
	}
	return savePNG(img, path)
}

// drawResult draws r's two panels in dc, the deliveries on 60% of it.
func drawResult(r *Result, dc draw.Canvas) {
	h := dc.Max.Y - dc.Min.Y
	top, bottom := ratesPlot(r), lossPlot(r)
	top.Draw(draw.Crop(dc, 0, 0, h*0.40, 0))
	bottom.Draw(draw.Crop(dc, 0, 0, 0, -h*0.60))
}

// curve is one line of a plot, over the bench's series.
type curve struct {
	name  string
	col   color.Color
	dash  []vg.Length
	value func(s bench.Second) float64
}

func ratesPlot(r *Result) *plot.Plot {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("%s: %s %s (%s), restart after %gs", r.Scenario.Name, r.Scenario.Signal, r.Scenario.Victim, r.Scenario.Role, r.Scenario.DownS)
	if !r.OK() {
		p.Title.Text += " — checks failed"
	}
	p.Y.Label.Text = "deliveries/s"
	addCurves(p, r, []curve{
		{"ideal", colIdeal, []vg.Length{vg.Points(4), vg.Points(2)}, func(s bench.Second) float64 { return float64(s.Ideal) }},
		{"delivered", colDelivered, nil, func(s bench.Second) float64 { return float64(s.Delivered) }},
	}, false)
	return p
}

func lossPlot(r *Result) *plot.Plot {
	p := plot.New()
	p.X.Label.Text = "time since sending started (s)"
	p.Y.Label.Text = "messages/s"
	addCurves(p, r, []curve{
		{"undelivered (by send second)", colUndelivered, nil, func(s bench.Second) float64 { return float64(s.Undelivered) }},
		{"duplicates", colDuplicates, []vg.Length{vg.Points(1), vg.Points(2)}, func(s bench.Second) float64 { return float64(s.Duplicates) }},
	}, true)
	return p
}

// addCurves draws the curves and the fault's marks, with the legend at
// the top right above the curves' range.
func addCurves(p *plot.Plot, r *Result, curves []curve, markLegend bool) {
	p.Y.Min = 0
	p.Legend.Top, p.Legend.Left = true, false
	p.Add(plotter.NewGrid())
	if r.Bench == nil {
		return
	}
	series := r.Bench.Series
	ymax := 1.0
	for _, c := range curves {
		xys := make(plotter.XYs, len(series))
		for i, s := range series {
			xys[i].X, xys[i].Y = float64(s.T), c.value(s)
			ymax = max(ymax, xys[i].Y)
		}
		l, err := plotter.NewLine(xys)
		if err != nil {
			continue
		}
		l.Color, l.Dashes, l.Width = c.col, c.dash, vg.Points(1.2)
		p.Add(l)
		p.Legend.Add(c.name, l)
	}
	// Room for the legend above the curves.
	p.Y.Max = ymax * 1.6
	marks := []struct {
		name string
		at   *float64
		dash []vg.Length
	}{
		{"fault", r.Times.FaultS, nil},
		{"exit", r.Times.ExitS, []vg.Length{vg.Points(1), vg.Points(2)}},
		{"restart", r.Times.RestartS, []vg.Length{vg.Points(4), vg.Points(2)}},
	}
	for _, m := range marks {
		if m.at == nil || (m.name == "exit" && r.Times.FaultS != nil && *m.at-*r.Times.FaultS < 0.5) {
			continue // a kill's exit is the fault
		}
		l, err := plotter.NewLine(plotter.XYs{{X: *m.at, Y: 0}, {X: *m.at, Y: p.Y.Max}})
		if err != nil {
			continue
		}
		l.Color, l.Dashes, l.Width = colFault, m.dash, vg.Points(0.8)
		p.Add(l)
		if markLegend {
			p.Legend.Add(fmt.Sprintf("%s %.1fs", m.name, *m.at), l)
		}
	}
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
