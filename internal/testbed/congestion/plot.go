package congestion

import (
	"fmt"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// line is one series of a plot.
type line struct {
	name   string
	values []float64
	dashed bool
}

// Plot writes the scenario's figure: the series the paper's figure shows,
// per variant, over time.
func Plot(r *Result, path string) error {
	var lines []line
	ylabel := "messages/s"
	for _, v := range r.Variants {
		n := v.Variant.Name
		switch r.Scenario.Name {
		case Fig10:
			ylabel = "kbit/s on the bottleneck"
			var content, tcp []float64
			for b := range v.Bottleneck {
				t := 0.0
				if b < len(v.TCP) {
					t = v.TCP[b] * tcpWire
				}
				tcp = append(tcp, t*8/1000)
				content = append(content, (v.Bottleneck[b]-t)*8/1000)
			}
			lines = append(lines, line{n + " content flow", content, false}, line{n + " TCP", tcp, true})
		case Fig9:
			for _, g := range v.Groups {
				lines = append(lines, line{fmt.Sprintf("%s %s received", n, g.Group), g.Arrived, !v.Variant.Control})
			}
		default:
			g := v.Groups[0]
			if r.Scenario.Name == IVE {
				g = v.Groups[len(v.Groups)-1] // behind the bottleneck
				ylabel = "deliveries/s behind the bottleneck"
			}
			lines = append(lines, line{n + " sent", g.Sent, true}, line{n + " received", g.Arrived, false})
			if r.Scenario.Name != Fig8 {
				lines = append(lines, line{n + " lost", g.LostPerBin, true})
			}
		}
	}
	return plotLines(r, lines, ylabel, path)
}

func plotLines(r *Result, lines []line, ylabel, path string) error {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("%s: %s", r.Scenario.Name, title[r.Scenario.Name])
	p.X.Label.Text = "time (s)"
	p.Y.Label.Text = ylabel
	p.Y.Min = 0
	bin := r.Config.Bin.Seconds()
	for i, l := range lines {
		var xys plotter.XYs
		for b, v := range Smooth(l.values, max(1, int(0.5/bin))) {
			xys = append(xys, plotter.XY{X: float64(b+1) * bin, Y: v})
		}
		if len(xys) == 0 {
			continue
		}
		pl, err := plotter.NewLine(xys)
		if err != nil {
			return err
		}
		pl.Color, pl.Width = plotutil.Color(i), vg.Points(1)
		if l.dashed {
			pl.Dashes = []vg.Length{vg.Points(4), vg.Points(2)}
		}
		p.Add(pl)
		p.Legend.Add(l.name, pl)
	}
	p.Legend.Top = true
	p.Add(plotter.NewGrid())
	return p.Save(20*vg.Centimeter, 12*vg.Centimeter, path)
}

var title = map[string]string{
	Fig7:  "one pair through 500 kbit/s, rate ramp then bursts (Malekpour11 Fig. 7)",
	Fig8:  "bottleneck alternating 2 and 1 Mbit/s (Fig. 8)",
	Fig9:  "three pairs, bottleneck 2 → 1 → 0.5 Mbit/s (Fig. 9)",
	Fig10: "a content flow and a TCP flow on 1 Mbit/s (Fig. 10)",
	IVE:   "8 brokers, two fast publishers, one bottleneck (§IV-E)",
}
