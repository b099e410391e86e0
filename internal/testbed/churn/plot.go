package churn

import (
	"fmt"
	"image/color"
	"os"

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

// Plot writes r as a PNG: per second, the deliveries expected (ideal) and
// received, the undelivered ones (by the second they were sent) and the
// duplicates, with the fault, the victim's exit and its restart marked.
// Unlike the experiments' plots the counts are not smoothed: a fault's
// effect lasts a second or two.
func Plot(r *Result, path string) error {
	const w, h = 16 * vg.Centimeter, 9 * vg.Centimeter
	img := vgimg.NewWith(vgimg.UseWH(w, h), vgimg.UseDPI(110))
	rp := ratesPlot(r)
	rp.Draw(draw.New(img))
	return savePNG(img, path)
}

// PlotAll writes the results one above the other in one PNG.
func PlotAll(rs []*Result, path string) error {
	if len(rs) == 0 {
		return fmt.Errorf("churn: no results to plot")
	}
	const w, hEach = 16 * vg.Centimeter, 7 * vg.Centimeter
	h := hEach * vg.Length(len(rs))
	img := vgimg.NewWith(vgimg.UseWH(w, h), vgimg.UseDPI(110))
	dc := draw.New(img)
	for i, r := range rs {
		top := hEach * vg.Length(i)
		ratesPlot(r).Draw(draw.Crop(dc, 0, 0, h-top-hEach, -top))
	}
	return savePNG(img, path)
}

func ratesPlot(r *Result) *plot.Plot {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("%s: %s %s (%s), restart after %gs", r.Scenario.Name, r.Scenario.Signal, r.Scenario.Victim, r.Scenario.Role, r.Scenario.DownS)
	if !r.OK() {
		p.Title.Text += " — checks failed"
	}
	p.X.Label.Text = "time since sending started (s)"
	p.Y.Label.Text = "per second"
	p.Y.Min = 0
	if r.Bench == nil {
		return p
	}
	type curve struct {
		name  string
		col   color.Color
		dash  []vg.Length
		value func(i int) float64
	}
	series := r.Bench.Series
	curves := []curve{
		{"ideal deliveries", colIdeal, []vg.Length{vg.Points(4), vg.Points(2)}, func(i int) float64 { return float64(series[i].Ideal) }},
		{"delivered", colDelivered, nil, func(i int) float64 { return float64(series[i].Delivered) }},
		{"undelivered (by send second)", colUndelivered, nil, func(i int) float64 { return float64(series[i].Undelivered) }},
		{"duplicates", colDuplicates, []vg.Length{vg.Points(1), vg.Points(2)}, func(i int) float64 { return float64(series[i].Duplicates) }},
	}
	ymax := 0.0
	for _, c := range curves {
		xys := make(plotter.XYs, len(series))
		for i := range series {
			xys[i].X, xys[i].Y = float64(series[i].T), c.value(i)
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
		if m.at == nil || (m.name == "exit" && r.Times.FaultS != nil && *m.at-*r.Times.FaultS < 0.2) {
			continue // a kill's exit is the fault
		}
		l, err := plotter.NewLine(plotter.XYs{{X: *m.at, Y: 0}, {X: *m.at, Y: ymax * 1.05}})
		if err != nil {
			continue
		}
		l.Color, l.Dashes, l.Width = colFault, m.dash, vg.Points(0.8)
		p.Add(l)
		p.Legend.Add(fmt.Sprintf("%s %.1fs", m.name, *m.at), l)
	}
	p.Legend.Top, p.Legend.Left = false, true
	p.Legend.YOffs = -vg.Points(30)
	p.Add(plotter.NewGrid())
	return p
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
