package perf

import (
	"errors"
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// The plots follow the experiment runner's style
// (internal/testbed/experiment/plot.go): drip in blue, what it is compared
// with in red, targets in grey, models dashed.
var (
	colDrip   = color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}
	colOther  = color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}
	colMet    = color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff}
	colTarget = color.RGBA{R: 0x44, G: 0x44, B: 0x44, A: 0xff}
	colFaint  = color.RGBA{R: 0x99, G: 0x99, B: 0x99, A: 0xff}
)

// Plot file names, in the order the report shows them.
const (
	plotRatios     = "perf-ratios.png"
	plotThroughput = "perf-throughput.png"
	plotLatency    = "perf-latency.png"
	plotHenjes     = "perf-henjes07.png"
)

// writePlots draws what sum has data for into dir and returns the files'
// names.
func writePlots(dir string, sum *Summary) ([]string, error) {
	var files []string
	var errs []error
	for _, pl := range []struct {
		name string
		draw func(*Summary) (*vgimg.Canvas, bool, error)
	}{{plotRatios, ratiosPlot}, {plotThroughput, throughputPlot}, {plotLatency, latencyPlot}, {plotHenjes, henjesPlot}} {
		img, ok, err := pl.draw(sum)
		if err != nil {
			errs = append(errs, fmt.Errorf("plot %s: %w", pl.name, err))
			continue
		}
		if !ok {
			continue
		}
		if err := savePNG(img, filepath.Join(dir, pl.name)); err != nil {
			errs = append(errs, err)
			continue
		}
		files = append(files, pl.name)
	}
	return files, errors.Join(errs...)
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

func canvas(w, h vg.Length) *vgimg.Canvas {
	return vgimg.NewWith(vgimg.UseWH(w, h), vgimg.UseDPI(110))
}

// shortLabel names a target row on an axis.
func shortLabel(c *CaseResult, r Row) string {
	switch c.Name {
	case CaseOneToOne:
		return "1→1"
	case CaseFanOut:
		return "fan-out"
	case CaseTwoBrokers:
		return "2 brokers"
	case CaseLatency:
		return "p99 latency"
	case CaseInert:
		return "inert filters"
	case CaseContent:
		if strings.Contains(r.Metric, "CPU") {
			return "content/CPU"
		}
		return "content"
	case CaseHenjes:
		if i := strings.LastIndex(r.Metric, "r = "); i >= 0 {
			return "Henjes07 " + strings.ReplaceAll(r.Metric[i:], " ", "")
		}
	}
	return c.Name
}

// ratiosPlot shows every ratio that has a target, on a log scale: the
// median ratio (green when met, red when not), each repetition pair's
// ratio (hollow), and the target (a grey bar).
func ratiosPlot(sum *Summary) (*vgimg.Canvas, bool, error) {
	p := plot.New()
	p.Title.Text = "Ratios to the compared system, with targets (log scale)"
	p.Y.Label.Text = "ratio"
	p.Y.Scale, p.Y.Tick.Marker = plot.LogScale{}, plot.LogTicks{Prec: -1}
	var ticks []plot.Tick
	var met, unmet, pairs plotter.XYs
	i := 0.0
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, c := range sum.Cases {
		for _, r := range c.Rows {
			if !r.TargetRatio.Valid() {
				continue
			}
			ticks = append(ticks, plot.Tick{Value: i, Label: shortLabel(c, r)})
			t := float64(r.TargetRatio)
			if l, err := plotter.NewLine(plotter.XYs{{X: i - 0.35, Y: t}, {X: i + 0.35, Y: t}}); err == nil {
				l.Color, l.Width = colTarget, vg.Points(2.5)
				p.Add(l)
			}
			lo, hi = math.Min(lo, t), math.Max(hi, t)
			if v := float64(r.Ratio); r.Ratio.Valid() && v > 0 {
				if r.Met != nil && *r.Met {
					met = append(met, plotter.XY{X: i, Y: v})
				} else {
					unmet = append(unmet, plotter.XY{X: i, Y: v})
				}
				lo, hi = math.Min(lo, v), math.Max(hi, v)
			}
			for _, pr := range r.PairRatios {
				if v := float64(pr); pr.Valid() && v > 0 {
					pairs = append(pairs, plotter.XY{X: i, Y: v})
					lo, hi = math.Min(lo, v), math.Max(hi, v)
				}
			}
			i++
		}
	}
	if len(ticks) == 0 {
		return nil, false, nil
	}
	for _, s := range []struct {
		xys   plotter.XYs
		col   color.Color
		shape draw.GlyphDrawer
		r     vg.Length
		name  string
	}{{pairs, colFaint, draw.RingGlyph{}, 3, "each repetition pair"}, {met, colMet, draw.CircleGlyph{}, 5, "median: target met"}, {unmet, colOther, draw.CircleGlyph{}, 5, "median: target not met"}} {
		if len(s.xys) == 0 {
			continue
		}
		sc, err := plotter.NewScatter(s.xys)
		if err != nil {
			return nil, false, err
		}
		sc.GlyphStyle = draw.GlyphStyle{Color: s.col, Radius: vg.Points(float64(s.r)), Shape: s.shape}
		p.Add(sc)
		p.Legend.Add(s.name, sc)
	}
	tl, _ := plotter.NewLine(plotter.XYs{{X: 0, Y: 1}})
	tl.Color, tl.Width = colTarget, vg.Points(2.5)
	p.Legend.Add("target (≥, or ≤ for latency)", tl)
	p.Legend.Top, p.Legend.Left = true, true
	p.X.Tick.Marker = plot.ConstantTicks(ticks)
	p.X.Tick.Label.Rotation = math.Pi / 5
	p.X.Tick.Label.XAlign, p.X.Tick.Label.YAlign = draw.XRight, draw.YCenter
	p.X.Min, p.X.Max = -0.6, i-0.4
	p.Y.Min, p.Y.Max = lo/2, hi*4
	p.Add(plotter.NewGrid())
	img := canvas(18*vg.Centimeter, 12*vg.Centimeter)
	p.Draw(draw.New(img))
	return img, true, nil
}

// throughputPlot shows each rate comparison's medians side by side, on a
// log scale (they differ by an order of magnitude): a stem and a dot per
// system.
func throughputPlot(sum *Summary) (*vgimg.Canvas, bool, error) {
	p := plot.New()
	p.Title.Text = "Delivered messages/s, median (content: matched deliveries/s)"
	p.Y.Label.Text = "messages/s (log scale)"
	p.Y.Scale, p.Y.Tick.Marker = plot.LogScale{}, plot.LogTicks{Prec: -1}
	var ticks []plot.Tick
	lo, hi := math.Inf(1), math.Inf(-1)
	type dot struct{ x, y float64 }
	var dots [2][]dot
	var names [2]string
	i := 0.0
	for _, c := range sum.Cases {
		switch c.Name {
		case CaseOneToOne, CaseFanOut, CaseTwoBrokers, CaseContent:
		default:
			continue
		}
		if len(c.Rows) == 0 || len(c.Systems) < 2 {
			continue
		}
		r := c.Rows[0]
		ticks = append(ticks, plot.Tick{Value: i, Label: shortLabel(c, r)})
		for k, sys := range c.Systems[:2] {
			v := r.Values[sys]
			if !v.Valid() || v <= 0 {
				continue
			}
			dots[k] = append(dots[k], dot{i + []float64{-0.12, 0.12}[k], float64(v)})
			names[k] = displayName(sys)
			lo, hi = math.Min(lo, float64(v)), math.Max(hi, float64(v))
		}
		i++
	}
	if len(ticks) == 0 || math.IsInf(lo, 0) {
		return nil, false, nil
	}
	base := lo / 3
	for k, ds := range dots {
		col := []color.Color{colDrip, colOther}[k]
		var xys plotter.XYs
		for _, d := range ds {
			stem, err := plotter.NewLine(plotter.XYs{{X: d.x, Y: base}, {X: d.x, Y: d.y}})
			if err != nil {
				return nil, false, err
			}
			stem.Color, stem.Width = col, vg.Points(6)
			p.Add(stem)
			xys = append(xys, plotter.XY{X: d.x, Y: d.y})
		}
		if len(xys) == 0 {
			continue
		}
		sc, err := plotter.NewScatter(xys)
		if err != nil {
			return nil, false, err
		}
		sc.GlyphStyle = draw.GlyphStyle{Color: col, Radius: vg.Points(4), Shape: draw.CircleGlyph{}}
		p.Add(sc)
		p.Legend.Add(names[k], sc)
	}
	p.Legend.Top = true
	p.X.Tick.Marker = plot.ConstantTicks(ticks)
	p.X.Min, p.X.Max = -0.6, i-0.4
	p.Y.Min, p.Y.Max = base, hi*3
	p.Add(plotter.NewGrid())
	img := canvas(16*vg.Centimeter, 10*vg.Centimeter)
	p.Draw(draw.New(img))
	return img, true, nil
}

// latencyPlot shows the latency quantiles of each system's median-p99 run.
func latencyPlot(sum *Summary) (*vgimg.Canvas, bool, error) {
	var c *CaseResult
	for _, x := range sum.Cases {
		if x.Name == CaseLatency && len(x.Runs) > 0 {
			c = x
		}
	}
	if c == nil {
		return nil, false, nil
	}
	p := plot.New()
	p.Title.Text = "Latency at a fixed rate: quantiles of the run with the median p99"
	p.Y.Label.Text = "latency (ms, log scale)"
	p.X.Label.Text = "quantile"
	p.Y.Scale, p.Y.Tick.Marker = plot.LogScale{}, plot.LogTicks{Prec: -1}
	var ticks []plot.Tick
	for i, q := range QuantileLevels {
		ticks = append(ticks, plot.Tick{Value: float64(i), Label: strconv.FormatFloat(100*q, 'f', -1, 64) + "%"})
	}
	drawn := false
	for k, sys := range c.Systems {
		run := medianRun(c.Runs, sys, func(r RunResult) float64 {
			if r.Latency == nil {
				return math.NaN()
			}
			return float64(r.Latency.P99)
		})
		if run == nil || run.Latency == nil {
			continue
		}
		var xys plotter.XYs
		for i, v := range run.Latency.Quantiles {
			if v.Valid() && v > 0 {
				xys = append(xys, plotter.XY{X: float64(i), Y: float64(v)})
			}
		}
		if len(xys) == 0 {
			continue
		}
		l, s, err := plotter.NewLinePoints(xys)
		if err != nil {
			return nil, false, err
		}
		col := []color.Color{colDrip, colOther}[min(k, 1)]
		l.Color, s.Color = col, col
		p.Add(l, s)
		p.Legend.Add(sys, l, s)
		drawn = true
	}
	if !drawn {
		return nil, false, nil
	}
	p.Legend.Top, p.Legend.Left = true, true
	p.X.Tick.Marker = plot.ConstantTicks(ticks)
	p.Add(plotter.NewGrid())
	img := canvas(16*vg.Centimeter, 10*vg.Centimeter)
	p.Draw(draw.New(img))
	return img, true, nil
}

// medianRun returns the run of system whose value is the median of its
// runs' (the lower middle one for an even count).
func medianRun(runs []RunResult, system string, value func(RunResult) float64) *RunResult {
	var mine []RunResult
	for _, r := range runs {
		if r.System == system && r.Error == "" && !math.IsNaN(value(r)) {
			mine = append(mine, r)
		}
	}
	if len(mine) == 0 {
		return nil
	}
	for i := 1; i < len(mine); i++ {
		for j := i; j > 0 && value(mine[j]) < value(mine[j-1]); j-- {
			mine[j], mine[j-1] = mine[j-1], mine[j]
		}
	}
	return &mine[(len(mine)-1)/2]
}

// henjesPlot draws Henjes07 Fig. 8(a) and 8(c) for both systems: received
// messages/s against the filters installed (one line per replication
// grade) and against the replication grade (one line per number of
// non-matching filters), measured (solid, points) and fitted (dashed), with
// Henjes07's own 2007 ActiveMQ model (dotted) for reference.
func henjesPlot(sum *Summary) (*vgimg.Canvas, bool, error) {
	var h *HenjesResult
	var systemsOrder []string
	for _, c := range sum.Cases {
		if c.Name == CaseHenjes && c.Henjes != nil {
			h, systemsOrder = c.Henjes, c.Systems
		}
	}
	if h == nil || len(h.Points) == 0 {
		return nil, false, nil
	}
	left, right := plot.New(), plot.New()
	left.Title.Text = "received msg/s vs filters installed (n_fltr)"
	left.X.Label.Text = "filters (log)"
	right.Title.Text = "received msg/s vs replication grade r"
	right.X.Label.Text = "r"
	for _, p := range []*plot.Plot{left, right} {
		p.Y.Label.Text = "received msg/s (log)"
		p.Y.Scale, p.Y.Tick.Marker = plot.LogScale{}, plot.LogTicks{Prec: -1}
		p.Add(plotter.NewGrid())
	}
	left.X.Scale, left.X.Tick.Marker = plot.LogScale{}, plot.LogTicks{Prec: -1}
	dashed := []vg.Length{vg.Points(4), vg.Points(2)}
	addLine := func(p *plot.Plot, xys, model plotter.XYs, col color.Color, width float64, label string) error {
		if len(xys) > 0 {
			l, s, err := plotter.NewLinePoints(xys)
			if err != nil {
				return err
			}
			l.Color, l.Width, s.Color = col, vg.Points(width), col
			p.Add(l, s)
			if label != "" {
				p.Legend.Add(label, l, s)
			}
		}
		if len(model) > 0 {
			m, err := plotter.NewLine(model)
			if err != nil {
				return err
			}
			m.Color, m.Dashes, m.Width = col, dashed, vg.Points(1)
			p.Add(m)
		}
		return nil
	}
	for k, sys := range systemsOrder {
		pts := h.Points[sys]
		col := []color.Color{colDrip, colOther}[min(k, 1)]
		model, fitted := h.Models[sys]
		for gi, r := range h.Replication {
			var xys, mod plotter.XYs
			for _, pt := range pts {
				if pt.R == r && pt.Received.Valid() && pt.Received > 0 {
					xys = append(xys, plotter.XY{X: float64(pt.Filters), Y: float64(pt.Received)})
					if fitted {
						mod = append(mod, plotter.XY{X: float64(pt.Filters), Y: model.Received(float64(pt.Filters), float64(r))})
					}
				}
			}
			label := ""
			if gi == 0 {
				label = fmt.Sprintf("%s (lines: r = %v)", sys, h.Replication)
			}
			if err := addLine(left, xys, mod, shade(col, gi, len(h.Replication)), 1.2, label); err != nil {
				return nil, false, err
			}
		}
		for li, add := range h.NonMatching {
			var xys, mod plotter.XYs
			for _, pt := range pts {
				if pt.NonMatching == add && pt.Received.Valid() && pt.Received > 0 {
					xys = append(xys, plotter.XY{X: float64(pt.R), Y: float64(pt.Received)})
					if fitted {
						mod = append(mod, plotter.XY{X: float64(pt.R), Y: model.Received(float64(pt.Filters), float64(pt.R))})
					}
				}
			}
			label := ""
			if li == 0 {
				label = fmt.Sprintf("%s (lines: non-matching %v)", sys, h.NonMatching)
			}
			if err := addLine(right, xys, mod, shade(col, li, len(h.NonMatching)), 1.2, label); err != nil {
				return nil, false, err
			}
		}
	}
	// Henjes07's 2007 fit, r = 1 and the smallest non-matching level.
	var ref, refR plotter.XYs
	for _, pt := range h.Points[systemsOrder[len(systemsOrder)-1]] {
		if pt.R == h.Replication[0] {
			ref = append(ref, plotter.XY{X: float64(pt.Filters), Y: h.Published.Received(float64(pt.Filters), float64(pt.R))})
		}
		if pt.NonMatching == h.NonMatching[0] {
			refR = append(refR, plotter.XY{X: float64(pt.R), Y: h.Published.Received(float64(pt.Filters), float64(pt.R))})
		}
	}
	for _, s := range []struct {
		p   *plot.Plot
		xys plotter.XYs
	}{{left, ref}, {right, refR}} {
		if len(s.xys) < 2 {
			continue
		}
		l, err := plotter.NewLine(s.xys)
		if err != nil {
			return nil, false, err
		}
		l.Color, l.Dashes, l.Width = colTarget, []vg.Length{vg.Points(1), vg.Points(2)}, vg.Points(1.5)
		s.p.Add(l)
		s.p.Legend.Add("Henjes07's model (ActiveMQ 4.0, 2007)", l)
	}
	for _, p := range []*plot.Plot{left, right} {
		p.Legend.Top = true
		p.Legend.TextStyle.Font.Size = vg.Points(8)
	}
	dl, _ := plotter.NewLine(plotter.XYs{{X: 1, Y: 1}})
	dl.Dashes, dl.Color = dashed, colTarget
	left.Legend.Add("fitted model B = t_rcv + n_fltr·t_fltr + r·t_tx", dl)
	const w, ht = 26 * vg.Centimeter, 11 * vg.Centimeter
	img := canvas(w, ht)
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 1, Cols: 2, PadX: vg.Millimeter * 4}
	cs := plot.Align([][]*plot.Plot{{left, right}}, tiles, dc)
	left.Draw(cs[0][0])
	right.Draw(cs[0][1])
	return img, true, nil
}

// shade lightens col for the i-th of n lines, darkest first.
func shade(col color.Color, i, n int) color.Color {
	c := color.RGBAModel.Convert(col).(color.RGBA)
	if n <= 1 {
		return c
	}
	f := 0.6 * float64(i) / float64(n-1)
	mix := func(v uint8) uint8 { return uint8(float64(v) + f*(255-float64(v))) }
	return color.RGBA{R: mix(c.R), G: mix(c.G), B: mix(c.B), A: 0xff}
}
