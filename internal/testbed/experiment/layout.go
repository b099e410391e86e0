package experiment

import (
	"fmt"
	"image/color"
	"math"
	"os"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/dripmesh/drip/internal/testbed/systems"
	"github.com/dripmesh/drip/internal/topology"
)

// layout places a topology's sites in the unit square for a picture, by
// Fruchterman and Reingold's force-directed method: linked sites attract,
// all sites repel, and the step shrinks each round. It starts from the
// sites on a circle in file order, so the same topology always gets the
// same picture.
func layout(t *topology.Topology) []plotter.XY {
	n := len(t.Brokers)
	pos := make([]plotter.XY, n)
	if n == 0 {
		return pos
	}
	idx := make(map[string]int, n)
	for i, b := range t.Brokers {
		idx[b.Name] = i
		a := 2 * math.Pi * float64(i) / float64(n)
		pos[i] = plotter.XY{X: 0.5 + 0.4*math.Cos(a), Y: 0.5 + 0.4*math.Sin(a)}
	}
	k := math.Sqrt(1 / float64(n)) // ideal distance between sites
	const rounds = 300
	disp := make([]plotter.XY, n)
	for r := range rounds {
		temp := 0.1 * (1 - float64(r)/rounds)
		clear(disp)
		for i := range n {
			for j := i + 1; j < n; j++ {
				dx, dy := pos[i].X-pos[j].X, pos[i].Y-pos[j].Y
				d := max(math.Hypot(dx, dy), 1e-6)
				f := k * k / d
				disp[i].X, disp[i].Y = disp[i].X+dx/d*f, disp[i].Y+dy/d*f
				disp[j].X, disp[j].Y = disp[j].X-dx/d*f, disp[j].Y-dy/d*f
			}
		}
		for _, l := range t.Links {
			i, j := idx[l.A], idx[l.B]
			dx, dy := pos[i].X-pos[j].X, pos[i].Y-pos[j].Y
			d := max(math.Hypot(dx, dy), 1e-6)
			f := d * d / k
			disp[i].X, disp[i].Y = disp[i].X-dx/d*f, disp[i].Y-dy/d*f
			disp[j].X, disp[j].Y = disp[j].X+dx/d*f, disp[j].Y+dy/d*f
		}
		for i := range n {
			d := max(math.Hypot(disp[i].X, disp[i].Y), 1e-9)
			step := min(d, temp)
			pos[i].X += disp[i].X / d * step
			pos[i].Y += disp[i].Y / d * step
		}
	}
	// Fit into the unit square, keeping the aspect ratio.
	minX, minY, maxX, maxY := pos[0].X, pos[0].Y, pos[0].X, pos[0].Y
	for _, p := range pos {
		minX, minY, maxX, maxY = min(minX, p.X), min(minY, p.Y), max(maxX, p.X), max(maxY, p.Y)
	}
	span := max(maxX-minX, maxY-minY, 1e-9)
	padX, padY := (span-(maxX-minX))/2, (span-(maxY-minY))/2 // centre the narrower side
	for i := range pos {
		pos[i].X, pos[i].Y = (pos[i].X-minX+padX)/span, (pos[i].Y-minY+padY)/span
	}
	return pos
}

// PlotTopology draws t's sites and links as a PNG, with the diameter and
// the degree range in the title.
func PlotTopology(t *topology.Topology, title, path string) error {
	if len(t.Brokers) == 0 {
		return fmt.Errorf("experiment: topology has no sites to draw")
	}
	pos := layout(t)
	idx := map[string]int{}
	for i, b := range t.Brokers {
		idx[b.Name] = i
	}
	degree := make([]int, len(t.Brokers))
	p := plot.New()
	for _, l := range t.Links {
		i, j := idx[l.A], idx[l.B]
		degree[i]++
		degree[j]++
		line, err := plotter.NewLine(plotter.XYs{pos[i], pos[j]})
		if err != nil {
			return err
		}
		line.Color, line.Width = color.Gray{Y: 0x80}, vg.Points(1)
		p.Add(line)
	}
	lo, hi := degree[0], degree[0]
	for _, d := range degree {
		lo, hi = min(lo, d), max(hi, d)
	}
	p.Title.Text = fmt.Sprintf("%s: %d sites, %d links, diameter %d, degree %d–%d",
		title, len(t.Brokers), len(t.Links), systems.Diameter(t), lo, hi)
	sites, err := plotter.NewScatter(plotter.XYs(pos))
	if err != nil {
		return err
	}
	sites.GlyphStyle = draw.GlyphStyle{Color: colOutput, Radius: vg.Points(6), Shape: draw.CircleGlyph{}}
	p.Add(sites)
	names := make([]string, len(t.Brokers))
	for i, b := range t.Brokers {
		names[i] = b.Name
	}
	labels, err := plotter.NewLabels(plotter.XYLabels{XYs: pos, Labels: names})
	if err != nil {
		return err
	}
	for i := range labels.TextStyle {
		labels.TextStyle[i].Color = color.White
		labels.TextStyle[i].Font.Size = vg.Points(5.5)
		labels.TextStyle[i].XAlign, labels.TextStyle[i].YAlign = draw.XCenter, draw.YCenter
	}
	p.Add(labels)
	p.HideAxes()
	p.X.Min, p.X.Max, p.Y.Min, p.Y.Max = -0.04, 1.04, -0.04, 1.04
	img := vgimg.NewWith(vgimg.UseWH(18*vg.Centimeter, 18*vg.Centimeter), vgimg.UseDPI(110))
	p.Draw(draw.New(img))
	return savePNG(img, path)
}

// WriteTopology writes t as a topology file (internal/topology's format).
func WriteTopology(t *topology.Topology, path string) error {
	b, err := t.Marshal()
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}
