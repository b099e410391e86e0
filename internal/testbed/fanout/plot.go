package fanout

import (
	"fmt"
	"image/color"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// Plot draws the brokers' RSS over time, one line per labelled run, with
// each run's budget as a dashed line, into a PNG at path.
func Plot(path string, labels []string, runs []*Result) error {
	p := plot.New()
	p.Title.Text = "Broker RSS under a 2,000-subscriber fan-out"
	p.X.Label.Text = "seconds"
	p.Y.Label.Text = "MiB"
	cols := []color.Color{color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}, color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}, color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff},
		color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff}, color.RGBA{R: 0x94, G: 0x67, B: 0xbd, A: 0xff}, color.RGBA{R: 0x8c, G: 0x56, B: 0x4b, A: 0xff}}
	budgets := map[int]bool{} // each budget is drawn once
	for i, r := range runs {
		pts := make(plotter.XYs, len(r.Samples))
		for k, s := range r.Samples {
			pts[k] = plotter.XY{X: s.T, Y: float64(s.RSS) / (1 << 20)}
		}
		l, err := plotter.NewLine(pts)
		if err != nil {
			return fmt.Errorf("plot %s: %w", labels[i], err)
		}
		l.Color, l.Width = cols[i%len(cols)], vg.Points(1.5)
		p.Add(l)
		p.Legend.Add(labels[i], l)
		if b := r.Config.Budget; b > 0 && len(r.Samples) > 0 && !budgets[b] {
			budgets[b] = true
			last := r.Samples[len(r.Samples)-1].T
			bl, err := plotter.NewLine(plotter.XYs{{X: 0, Y: float64(b) / (1 << 20)}, {X: last, Y: float64(b) / (1 << 20)}})
			if err != nil {
				return err
			}
			bl.Color, bl.Dashes = cols[i%len(cols)], []vg.Length{vg.Points(4), vg.Points(3)}
			p.Add(bl)
			p.Legend.Add(fmt.Sprintf("budget %d MiB", b>>20), bl)
		}
	}
	p.Legend.Top, p.Legend.Left = true, true
	p.Y.Min = 0
	p.Add(plotter.NewGrid())
	return p.Save(8*vg.Inch, 4.5*vg.Inch, path)
}
