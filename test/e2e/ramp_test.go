package e2e

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/dripmesh/drip/internal/bench"
)

// rampSpec is the throughput test: bench runs at offered rates that grow
// geometrically, one Job each, until one is not sustained (Carzaniga09
// §5.1.4: output throughput against the ideal, input × replication). The
// steps are bounded in number, so the ramp is bounded in time: about
// Steps × (Warmup + Step + the drain + a pod's start).
type rampSpec struct {
	Start    float64       // offered rate of the first step, messages per second
	Factor   float64       // each step offers this times the last
	Steps    int           // at most this many steps
	Step     time.Duration // sending time of one step
	Warmup   time.Duration
	MinRatio float64       // a sustained step delivers at least this fraction of the ideal
	MaxP99   time.Duration // and its latency p99 is at most this
}

func defaultRamp() rampSpec {
	return rampSpec{Start: 200, Factor: 1.5, Steps: 10, Step: 10 * time.Second, Warmup: 3 * time.Second, MinRatio: 0.95, MaxP99: time.Second}
}

func (r rampSpec) validate() error {
	switch {
	case r.Start <= 0:
		return fmt.Errorf("-ramp-start %v: want a positive rate", r.Start)
	case r.Factor <= 1:
		return fmt.Errorf("-ramp-factor %v: want more than 1", r.Factor)
	case r.Steps < 1 || r.Steps > 20:
		return fmt.Errorf("-ramp-steps %d: want 1 to 20 (each step is a bench Job)", r.Steps)
	case r.Step <= 0:
		return fmt.Errorf("-ramp-step %v: want a positive duration", r.Step)
	case r.MinRatio <= 0 || r.MinRatio > 1:
		return fmt.Errorf("-ramp-min-ratio %v: want a fraction in (0, 1]", r.MinRatio)
	case r.MaxP99 <= 0:
		return fmt.Errorf("-ramp-max-p99 %v: want a positive duration", r.MaxP99)
	}
	return nil
}

// rate is the offered rate of step i (from 0), rounded to a whole message
// per second.
func (r rampSpec) rate(i int) float64 { return math.Round(r.Start * math.Pow(r.Factor, float64(i))) }

// bench is the workload of one step.
func (r rampSpec) bench(base benchSpec, rate float64) benchSpec {
	b := base
	b.Rate, b.Duration, b.Warmup = rate, r.Step, r.Warmup
	return b
}

// rampStep is one step's outcome, as the results JSON keeps it.
type rampStep struct {
	Rate           float64 `json:"offered_rate"`   // messages per second
	Sent           uint64  `json:"sent"`           // messages
	SentRate       float64 `json:"sent_rate"`      // messages per second the bench managed
	Ideal          uint64  `json:"ideal"`          // deliveries called for
	Delivered      uint64  `json:"delivered"`      // first copies of them
	DeliveredRate  float64 `json:"delivered_rate"` // deliveries per second of sending
	Ratio          float64 `json:"ratio"`          // Delivered / Ideal
	Duplicates     uint64  `json:"duplicates"`
	FalsePositives uint64  `json:"false_positives"`
	Lost           uint64  `json:"lost"`
	P50            float64 `json:"latency_p50_ms"`
	P99            float64 `json:"latency_p99_ms"`
	Max            float64 `json:"latency_max_ms"`
	Sustained      bool    `json:"sustained"`
	Why            string  `json:"why,omitempty"` // why not sustained
	Error          string  `json:"error,omitempty"`
}

// rampResult is one ramp: the mesh, the bounds and every step.
type rampResult struct {
	Brokers   int    `json:"brokers"`
	Shape     string `json:"shape"`
	Netem     bool   `json:"netem"`
	Bandwidth string `json:"bandwidth,omitempty"`
	Delay     string `json:"delay,omitempty"`
	// NetemUnsupported is what the node's kernel could not emulate
	// (drip_netem_unsupported): without sch_netem, links are shaped to
	// their bandwidth only.
	NetemUnsupported []string   `json:"netem_unsupported,omitempty"`
	MinRatio         float64    `json:"min_ratio"`
	MaxP99Ms         float64    `json:"max_p99_ms"`
	StepS            float64    `json:"step_s"`
	Steps            []rampStep `json:"steps"`
	// Sustained is the highest offered rate that every step up to it
	// sustained; 0 if the first did not. Capped says the ramp ran out of
	// steps before one failed: the mesh sustains at least Sustained.
	Sustained float64 `json:"sustained_rate"`
	Capped    bool    `json:"capped"`
	Started   string  `json:"started"`
	Seconds   float64 `json:"seconds"`
}

// judge turns one step's report into its outcome.
func (r rampSpec) judge(rate float64, rep *bench.Report) rampStep {
	t := rep.Totals
	s := rampStep{
		Rate: rate, Sent: t.Sent, Ideal: t.Ideal, Delivered: t.Delivered, Ratio: deliveryRatio(rep),
		Duplicates: t.Duplicates, FalsePositives: t.FalsePositives, Lost: t.Lost,
		P50: rep.Latency.P50, P99: rep.Latency.P99, Max: rep.Latency.Max, Error: rep.Error,
	}
	if rep.SendSeconds > 0 {
		s.SentRate, s.DeliveredRate = float64(t.Sent)/rep.SendSeconds, float64(t.Delivered)/rep.SendSeconds
	}
	var why []string
	switch {
	case rep.Error != "":
		why = append(why, "the run stopped: "+rep.Error)
	case t.Ideal == 0:
		why = append(why, "no message matched a subscriber")
	}
	if s.Ratio < r.MinRatio {
		why = append(why, fmt.Sprintf("delivered %.1f%% of the ideal, below %.0f%%", 100*s.Ratio, 100*r.MinRatio))
	}
	if maxP99 := ms(r.MaxP99); s.P99 > maxP99 {
		why = append(why, fmt.Sprintf("latency p99 %.0f ms above %.0f ms", s.P99, maxP99))
	}
	// A bench that cannot offer the rate measures itself, not the mesh.
	if s.SentRate < 0.9*rate {
		why = append(why, fmt.Sprintf("the bench sent only %.0f of %.0f msg/s", s.SentRate, rate))
	}
	s.Sustained, s.Why = len(why) == 0, strings.Join(why, "; ")
	return s
}

// add records a step and says whether the ramp goes on.
func (res *rampResult) add(s rampStep, maxSteps int) (more bool) {
	res.Steps = append(res.Steps, s)
	if !s.Sustained {
		return false
	}
	res.Sustained = s.Rate
	res.Capped = len(res.Steps) == maxSteps
	return !res.Capped
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// shaping says what netem applied to every link.
func (res *rampResult) shaping() string {
	var parts []string
	if res.Bandwidth != "" {
		parts = append(parts, res.Bandwidth)
	}
	if res.Delay != "" {
		if slices.Contains(res.NetemUnsupported, "delay") {
			parts = append(parts, res.Delay+" delay not applied: no sch_netem")
		} else {
			parts = append(parts, res.Delay)
		}
	}
	return orNone(parts)
}

// summary is the ramp in one line.
func (res *rampResult) summary() string {
	var b strings.Builder
	netem := "off"
	if res.Netem {
		netem = fmt.Sprintf("on (%s per link)", res.shaping())
	}
	fmt.Fprintf(&b, "%d brokers (%s), netem %s: sustained %.0f msg/s", res.Brokers, res.Shape, netem, res.Sustained)
	if res.Capped {
		b.WriteString(" or more (the ramp's last step)")
	}
	for _, s := range res.Steps {
		fmt.Fprintf(&b, "\n  %6.0f msg/s offered: sent %.0f/s, delivered %.1f%% (%.0f deliveries/s), p50 %.1f ms, p99 %.1f ms, dup %d, fp %d",
			s.Rate, s.SentRate, 100*s.Ratio, s.DeliveredRate, s.P50, s.P99, s.Duplicates, s.FalsePositives)
		if !s.Sustained {
			b.WriteString(": NOT sustained: " + s.Why)
		}
	}
	return b.String()
}

// runRamp runs the ramp against brokers in ns; run runs one bench Job and
// returns its report (a variable in the tests).
func (r rampSpec) runRamp(ctx context.Context, t *testing.T, base benchSpec, m meshSpec, run func(ctx context.Context, name string, b benchSpec) (*bench.Report, error)) *rampResult {
	t.Helper()
	start := time.Now()
	res := &rampResult{Brokers: m.Brokers, Shape: m.Shape, Netem: m.Netem, MinRatio: r.MinRatio, MaxP99Ms: ms(r.MaxP99),
		StepS: r.Step.Seconds(), Started: start.UTC().Format(time.RFC3339)}
	if m.Netem {
		res.Bandwidth, res.Delay = m.Bandwidth, m.Delay
	}
	netem := map[bool]string{true: "netem", false: "plain"}[m.Netem]
	for i := range r.Steps {
		rate := r.rate(i)
		rep, err := run(ctx, fmt.Sprintf("ramp-%s-%d", netem, i), r.bench(base, rate))
		if err != nil {
			// A step that could not run at all fails the test: it says
			// nothing about the mesh's throughput.
			t.Errorf("ramp step %d (%.0f msg/s): %v", i, rate, err)
			break
		}
		s := r.judge(rate, rep)
		t.Logf("ramp %s: %.0f msg/s offered: delivered %.2f%%, p99 %.1f ms, sustained %v %s", netem, rate, 100*s.Ratio, s.P99, s.Sustained, s.Why)
		// Exactness holds at every rate: overload may cost deliveries,
		// never a duplicate or a false positive.
		if s.Duplicates > 0 || s.FalsePositives > 0 {
			t.Errorf("ramp step %.0f msg/s: %d duplicates, %d false positives", rate, s.Duplicates, s.FalsePositives)
		}
		if !res.add(s, r.Steps) {
			break
		}
	}
	res.Seconds = time.Since(start).Seconds()
	return res
}

// writeJSON writes v to dir/name, creating dir.
func writeJSON(dir, name string, v any) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	js, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, name)
	return path, os.WriteFile(path, append(js, '\n'), 0o644)
}

// plotRamps draws the ramps side by side in one PNG: delivered
// throughput against the offered rate with the ideal (Carzaniga09 Fig. 3's
// axes), and latency p99 against the offered rate with the bound.
func plotRamps(ramps []*rampResult, path string) error {
	colours := []color.Color{color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}, color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}}
	thr, lat := plot.New(), plot.New()
	thr.Title.Text = "drip on Kubernetes: delivered against offered"
	thr.X.Label.Text, thr.Y.Label.Text = "offered rate (msg/s)", "delivered / ideal (%)"
	lat.X.Label.Text, lat.Y.Label.Text = "offered rate (msg/s)", "latency p99 (ms)"
	thr.Legend.Top, thr.Legend.Left = false, true
	var maxP99 float64
	for i, r := range ramps {
		var ratio, p99 plotter.XYs
		for _, s := range r.Steps {
			ratio = append(ratio, plotter.XY{X: s.Rate, Y: 100 * s.Ratio})
			p99 = append(p99, plotter.XY{X: s.Rate, Y: s.P99})
		}
		name := fmt.Sprintf("netem off: %.0f msg/s sustained", r.Sustained)
		if r.Netem {
			name = fmt.Sprintf("netem on: %.0f msg/s sustained", r.Sustained)
			if r.Bandwidth != "" {
				name = fmt.Sprintf("netem on (%s links): %.0f msg/s sustained", r.Bandwidth, r.Sustained)
			}
		}
		if r.Capped {
			name += " or more"
		}
		for _, pl := range []struct {
			p  *plot.Plot
			xy plotter.XYs
		}{{thr, ratio}, {lat, p99}} {
			line, points, err := plotter.NewLinePoints(pl.xy)
			if err != nil {
				return err
			}
			line.Color, points.Color = colours[i%len(colours)], colours[i%len(colours)]
			line.Width = vg.Points(1.5)
			pl.p.Add(line, points)
			if pl.p == thr {
				thr.Legend.Add(name, line, points)
			}
		}
		maxP99 = r.MaxP99Ms
	}
	if len(ramps) > 0 {
		bound := plotter.NewFunction(func(float64) float64 { return 100 * ramps[0].MinRatio })
		bound.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		thr.Add(bound)
		thr.Legend.Add(fmt.Sprintf("sustained: at least %.0f%%", 100*ramps[0].MinRatio), bound)
		p99Bound := plotter.NewFunction(func(float64) float64 { return maxP99 })
		p99Bound.Dashes = bound.Dashes
		lat.Add(p99Bound)
	}
	thr.X.Tick.Marker, lat.X.Tick.Marker = wholeTicks{}, wholeTicks{}
	thr.Y.Min, thr.Y.Max = 0, 105
	// Latency spans milliseconds to seconds across the ramp.
	lat.Y.Scale, lat.Y.Tick.Marker = plot.LogScale{}, plot.LogTicks{Prec: -1}
	lat.X.Min, thr.X.Min = 0, 0
	lat.X.Max = max(lat.X.Max, thr.X.Max)
	thr.X.Max = lat.X.Max
	const w, h = 16 * vg.Centimeter, 16 * vg.Centimeter
	img := vgimg.NewWith(vgimg.UseWH(w, h), vgimg.UseDPI(110))
	dc := draw.New(img)
	thr.Draw(draw.Crop(dc, 0, 0, h*0.45, 0))
	lat.Draw(draw.Crop(dc, 0, 0, 0, -h*0.55))
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	png := vgimg.PngCanvas{Canvas: img}
	if _, err := png.WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// wholeTicks are gonum's default ticks labelled as whole numbers.
type wholeTicks struct{}

func (wholeTicks) Ticks(min, max float64) []plot.Tick {
	ticks := plot.DefaultTicks{}.Ticks(min, max)
	for i := range ticks {
		if ticks[i].Label != "" {
			ticks[i].Label = fmt.Sprintf("%.0f", ticks[i].Value)
		}
	}
	return ticks
}

var plotFrom = flag.String("plot-from", "", "TestPlotResults: an e2e.json whose ramps to plot into -plot-to (docs/results/k8s-ramp.png from docs/results/k8s-e2e.json)")
var plotTo = flag.String("plot-to", "", "TestPlotResults: the PNG to write")

// TestPlotResults redraws a kept run's ramps: the plot step for results
// kept from an earlier run, such as the committed one.
func TestPlotResults(t *testing.T) {
	if *plotFrom == "" || *plotTo == "" {
		t.Skip("plots only with -plot-from and -plot-to")
	}
	js, err := os.ReadFile(*plotFrom)
	require.NoError(t, err)
	var res suiteResults
	require.NoError(t, json.Unmarshal(js, &res))
	require.NotEmpty(t, res.Ramps, "%s has no ramps", *plotFrom)
	require.NoError(t, plotRamps(res.Ramps, *plotTo))
}

func TestRampRates(t *testing.T) {
	r := defaultRamp()
	require.NoError(t, r.validate())
	var rates []float64
	for i := range r.Steps {
		rates = append(rates, r.rate(i))
	}
	assert.Equal(t, []float64{200, 300, 450, 675, 1013, 1519, 2278, 3417, 5126, 7689}, rates)
	b := r.bench(defaultBench(), 675)
	assert.Equal(t, 675.0, b.Rate)
	assert.Equal(t, r.Step, b.Duration)
	assert.Equal(t, 80, b.Subscribers, "the workload is the bench's")
	bad := map[string]func(*rampSpec){
		"factor": func(r *rampSpec) { r.Factor = 1 }, "steps": func(r *rampSpec) { r.Steps = 0 },
		"ratio": func(r *rampSpec) { r.MinRatio = 0 }, "p99": func(r *rampSpec) { r.MaxP99 = 0 },
		"start": func(r *rampSpec) { r.Start = 0 }, "too many": func(r *rampSpec) { r.Steps = 50 },
	}
	for name, mutate := range bad {
		r := defaultRamp()
		mutate(&r)
		assert.Error(t, r.validate(), name)
	}
}

func TestRampJudge(t *testing.T) {
	r := defaultRamp()
	report := func(sent, ideal, delivered uint64, p99 float64) *bench.Report {
		return &bench.Report{SendSeconds: 10, Totals: bench.Totals{Sent: sent, Ideal: ideal, Delivered: delivered}, Latency: bench.Latency{P99: p99}}
	}
	s := r.judge(200, report(2000, 8000, 7990, 40))
	assert.True(t, s.Sustained, s.Why)
	assert.InDelta(t, 200, s.SentRate, 1e-9)
	assert.InDelta(t, 799, s.DeliveredRate, 1e-9)

	s = r.judge(200, report(2000, 8000, 7000, 40))
	assert.False(t, s.Sustained)
	assert.Equal(t, "delivered 87.5% of the ideal, below 95%", s.Why)

	s = r.judge(200, report(2000, 8000, 8000, 1500))
	assert.False(t, s.Sustained)
	assert.Equal(t, "latency p99 1500 ms above 1000 ms", s.Why)

	s = r.judge(2000, report(2000, 8000, 8000, 40))
	assert.False(t, s.Sustained)
	assert.Equal(t, "the bench sent only 200 of 2000 msg/s", s.Why)

	rep := report(2000, 8000, 8000, 40)
	rep.Error = "broker gone"
	s = r.judge(200, rep)
	assert.False(t, s.Sustained)
	assert.Contains(t, s.Why, "the run stopped: broker gone")
}

func TestRampStopsAtTheFirstUnsustainedStep(t *testing.T) {
	r := defaultRamp()
	r.Steps = 4
	m := defaultMesh()
	ok := func(rate float64) *bench.Report {
		ideal := uint64(rate * 40)
		return &bench.Report{SendSeconds: 10, Totals: bench.Totals{Sent: uint64(rate * 10), Ideal: ideal, Delivered: ideal}, Latency: bench.Latency{P99: 30}}
	}
	var ran []string
	res := r.runRamp(t.Context(), t, defaultBench(), m, func(_ context.Context, name string, b benchSpec) (*bench.Report, error) {
		ran = append(ran, name)
		rep := ok(b.Rate)
		if b.Rate > 400 {
			rep.Totals.Delivered = rep.Totals.Ideal / 2
		}
		return rep, nil
	})
	assert.Equal(t, []string{"ramp-netem-0", "ramp-netem-1", "ramp-netem-2"}, ran, "450 msg/s fails: no fourth step")
	assert.Equal(t, 300.0, res.Sustained)
	assert.False(t, res.Capped)
	require.Len(t, res.Steps, 3)
	assert.False(t, res.Steps[2].Sustained)

	ran = nil
	res = r.runRamp(t.Context(), t, defaultBench(), m, func(_ context.Context, name string, b benchSpec) (*bench.Report, error) {
		ran = append(ran, name)
		return ok(b.Rate), nil
	})
	assert.Len(t, ran, 4, "bounded by the steps")
	assert.Equal(t, r.rate(3), res.Sustained)
	assert.True(t, res.Capped)
	assert.Contains(t, res.summary(), "or more")

	dir := t.TempDir()
	path, err := writeJSON(dir, "ramp.json", res)
	require.NoError(t, err)
	var back rampResult
	js, err := os.ReadFile(path)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(js, &back))
	assert.Equal(t, *res, back)
	png := filepath.Join(dir, "ramp.png")
	require.NoError(t, plotRamps([]*rampResult{res, res}, png))
	head, err := os.ReadFile(png)
	require.NoError(t, err)
	assert.Equal(t, "\x89PNG", string(head[:4]))
}

func TestRampShaping(t *testing.T) {
	r := &rampResult{Netem: true, Bandwidth: "1MBps", Delay: "10ms"}
	assert.Equal(t, "1MBps, 10ms", r.shaping())
	r.NetemUnsupported = []string{"delay", "loss"}
	assert.Equal(t, "1MBps, 10ms delay not applied: no sch_netem", r.shaping())
	assert.Contains(t, r.summary(), "netem on (1MBps, 10ms delay not applied: no sch_netem per link)")
	assert.Equal(t, "none", (&rampResult{Netem: true}).shaping())
}
