package harmony

import (
	"fmt"
	"image/color"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// PlotLatency writes the latency CDF of every variant, all pairs together
// (Kim10 Fig. 4 shows one pair's), with the deadline marked.
func PlotLatency(r *Result, path string) error {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("%s: latency CDF, all subscriber-topic pairs", r.Config.Scenario)
	p.X.Label.Text = "latency (ms, log scale)"
	p.Y.Label.Text = "fraction of received messages"
	p.X.Scale, p.X.Tick.Marker = plot.LogScale{}, plot.LogTicks{Prec: -1}
	p.Y.Min, p.Y.Max = 0, 1
	top := 1.0
	for i, v := range r.Variants {
		var xys plotter.XYs
		for k, lat := range v.All.CDF {
			xys = append(xys, plotter.XY{X: max(lat, 0.1), Y: float64(k) / cdfSteps})
			top = max(top, lat)
		}
		if len(xys) == 0 {
			continue
		}
		l, err := plotter.NewLine(xys)
		if err != nil {
			return err
		}
		l.Color, l.Width = plotutil.Color(i), vg.Points(1.5)
		l.Dashes = plotutil.Dashes(i)
		p.Add(l)
		p.Legend.Add(v.Variant.Name, l)
	}
	d := ms(r.Config.Deadline)
	mark, err := plotter.NewLine(plotter.XYs{{X: d, Y: 0}, {X: d, Y: 1}})
	if err != nil {
		return err
	}
	mark.Color, mark.Dashes = color.Gray{Y: 0x80}, []vg.Length{vg.Points(3), vg.Points(3)}
	p.Add(mark)
	p.Legend.Add(fmt.Sprintf("deadline %.0f ms", d), mark)
	p.X.Min, p.X.Max = 1, top*1.2
	p.Legend.Top, p.Legend.Left = false, false
	p.Legend.XOffs, p.Legend.YOffs = -vg.Millimeter*2, vg.Millimeter*20
	p.Add(plotter.NewGrid())
	return p.Save(16*vg.Centimeter, 11*vg.Centimeter, path)
}

// PlotLoss writes each variant's loss rate per pair and overall, as
// Kim10 Fig. 6(a) does.
func PlotLoss(r *Result, path string) error {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("%s: messages lost per subscriber-topic pair", r.Config.Scenario)
	p.Y.Label.Text = "lost (%)"
	p.Y.Min = 0
	if len(r.Variants) == 0 {
		return p.Save(16*vg.Centimeter, 11*vg.Centimeter, path)
	}
	var names []string
	for _, ps := range r.Variants[0].Pairs {
		names = append(names, ps.Pair)
	}
	names = append(names, "all")
	w := vg.Points(60) / vg.Length(len(r.Variants))
	top := 0.0
	for i, v := range r.Variants {
		var vals plotter.Values
		for _, ps := range v.Pairs {
			vals = append(vals, 100*ps.LossRate)
		}
		vals = append(vals, 100*v.All.LossRate)
		for _, x := range vals {
			top = max(top, x)
		}
		b, err := plotter.NewBarChart(vals, w)
		if err != nil {
			return err
		}
		b.Color, b.LineStyle.Width = plotutil.Color(i), 0
		b.Offset = w * vg.Length(2*i-len(r.Variants)+1) / 2
		p.Add(b)
		p.Legend.Add(v.Variant.Name, b)
	}
	p.NominalX(names...)
	// Without losses the axis would centre on zero.
	p.Y.Max = max(top*1.15, 0.1)
	p.Legend.Top = true
	p.Add(plotter.NewGrid())
	return p.Save(18*vg.Centimeter, 11*vg.Centimeter, path)
}
