package congestion

import (
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// studyRun is Malekpour11 §III-C's simulation (Fig. 5): a flow of
// publications through a link that cannot carry it, open loop, watched by
// a subscriber with a publication record of size k. It returns, per second,
// the estimated loss event rate and the TCP-friendly rate.
func studyRun(k int, seed uint64) (p, rate []float64) {
	cfg := DefaultConfig()
	cfg.RecordSize = k
	sc := scenario{
		cfg:      cfg,
		publish:  func(time.Duration) float64 { return 1000 },
		rho:      0.3,
		link:     &bottleneck{rate: 200, limit: 20, delay: 40 * time.Millisecond},
		back:     40 * time.Millisecond,
		duration: 100 * time.Second,
		step:     time.Millisecond,
		seed:     seed,
		sample: func(_ time.Duration, s *Subscriber) {
			ss := s.sessions[1]
			p = append(p, ss.loss.rate())
			rate = append(rate, TCPRate(ss.rtt, ss.loss.rate()))
		},
	}
	sc.run()
	return p, rate
}

// TestRecordSizeStudy is Fig. 5 of Malekpour11 §III-C as a test: with k = 5
// the estimated rate stays close to that of a receiver that sees every
// loss (k = 256 covers every gap here), and with k = 2 it strays further,
// mostly upwards (losses go unseen).
func TestRecordSizeStudy(t *testing.T) {
	_, ideal := studyRun(256, 1)
	_, k5 := studyRun(5, 1)
	_, k2 := studyRun(2, 1)
	errOf := func(est []float64) float64 {
		var sum float64
		n := 0
		for i := 10; i < len(est); i++ { // after the first loss events
			sum += math.Abs(est[i]-ideal[i]) / ideal[i]
			n++
		}
		return sum / float64(n)
	}
	e5, e2 := errOf(k5), errOf(k2)
	t.Logf("mean relative error of the estimated rate: k=5 %.3f, k=2 %.3f", e5, e2)
	t.Logf("rate at 50 s: ideal %.1f, k=5 %.1f, k=2 %.1f msg/s", ideal[50], k5[50], k2[50])
	if e5 > 0.15 {
		t.Errorf("k=5 strays %.3f from the ideal receiver's rate, want ≤ 0.15", e5)
	}
	if e2 <= e5 {
		t.Errorf("k=2 (%.3f) should stray further than k=5 (%.3f)", e2, e5)
	}
}

var study = flag.Bool("study", false, "write the studies to docs/results/congestion/ (JSON and PNG)")

// studyDir is where the studies go.
var studyDir = filepath.Join("..", "..", "docs", "results", "congestion")

// writeJSON writes v as docs/results/congestion/name.
func writeJSON(t *testing.T, name string, v any) {
	t.Helper()
	require.NoError(t, os.MkdirAll(studyDir, 0o755))
	data, err := json.MarshalIndent(v, "", "  ")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(studyDir, name), append(data, '\n'), 0o644))
}

// series is one line of a panel.
type series struct {
	name string
	y    []float64
}

// linesPanel plots lines over seconds 1, 2, ….
func linesPanel(t *testing.T, title, ylabel string, lines ...series) *plot.Plot {
	t.Helper()
	pl := plot.New()
	pl.Title.Text, pl.X.Label.Text, pl.Y.Label.Text = title, "time (s)", ylabel
	var args []any
	for _, l := range lines {
		pts := make(plotter.XYs, len(l.y))
		for i, y := range l.y {
			pts[i] = plotter.XY{X: float64(i + 1), Y: y}
		}
		args = append(args, l.name, pts)
	}
	require.NoError(t, plotutil.AddLines(pl, args...))
	pl.Legend.Top = true
	return pl
}

// writePNG draws the panels side by side as docs/results/congestion/name.
func writePNG(t *testing.T, name string, panels ...*plot.Plot) {
	t.Helper()
	w, h := vg.Length(len(panels))*11*vg.Centimeter, 9*vg.Centimeter
	img := vgimg.NewWith(vgimg.UseWH(w, h), vgimg.UseDPI(110))
	dc := draw.New(img)
	for i, pl := range panels {
		left := w * vg.Length(i) / vg.Length(len(panels))
		right := w * vg.Length(len(panels)-i-1) / vg.Length(len(panels))
		pl.Draw(draw.Crop(dc, left, -right, 0, 0))
	}
	f, err := os.Create(filepath.Join(studyDir, name))
	require.NoError(t, err)
	_, err = vgimg.PngCanvas{Canvas: img}.WriteTo(f)
	require.NoError(t, err)
	require.NoError(t, f.Close())
}

func floats(counts []int) []float64 {
	out := make([]float64, len(counts))
	for i, c := range counts {
		out[i] = float64(c)
	}
	return out
}

// studyReport is docs/results/congestion/record-study.json.
type studyReport struct {
	Command  string               `json:"command"`
	Scenario string               `json:"scenario"`
	Seconds  []int                `json:"seconds"`
	LossRate map[string][]float64 `json:"loss_event_rate"`
	Rate     map[string][]float64 `json:"tcp_rate_msgs_per_s"`
	// MeanError is the mean relative error of each rate against the ideal
	// receiver's, from second 10 on.
	MeanError map[string]float64 `json:"mean_error_vs_ideal"`
}

// TestWriteRecordSizeStudy writes Fig. 5 of Malekpour11 as JSON and PNG.
func TestWriteRecordSizeStudy(t *testing.T) {
	if !*study {
		t.Skip("writes docs/results/congestion/record-study.{json,png}: run with -args -study")
	}
	rep := studyReport{
		Command:   "go test ./internal/congestion -run TestWriteRecordSizeStudy -args -study",
		Scenario:  "open loop: 1000 msg/s published, 30% match the subscriber and cross a 200 msg/s drop-tail link (queue 20, 40 ms each way); seed 1",
		LossRate:  map[string][]float64{},
		Rate:      map[string][]float64{},
		MeanError: map[string]float64{},
	}
	runs := []struct {
		name string
		k    int
	}{{"ideal", 256}, {"k=5", 5}, {"k=2", 2}}
	for _, r := range runs {
		p, rate := studyRun(r.k, 1)
		rep.LossRate[r.name], rep.Rate[r.name] = p, rate
	}
	for i := range rep.Rate["ideal"] {
		rep.Seconds = append(rep.Seconds, i+1)
	}
	for _, r := range runs {
		var sum float64
		for i := 10; i < len(rep.Seconds); i++ {
			sum += math.Abs(rep.Rate[r.name][i]-rep.Rate["ideal"][i]) / rep.Rate["ideal"][i]
		}
		rep.MeanError[r.name] = sum / float64(len(rep.Seconds)-10)
	}
	writeJSON(t, "record-study.json", rep)
	var loss, rate []series
	for _, r := range runs {
		loss = append(loss, series{r.name, rep.LossRate[r.name]})
		rate = append(rate, series{r.name, rep.Rate[r.name]})
	}
	writePNG(t, "record-study.png", linesPanel(t, "Loss event rate p", "p", loss...), linesPanel(t, "TCP response function", "msg/s", rate...))
}

// sharedReport is docs/results/congestion/shared-study.json.
type sharedReport struct {
	Command string `json:"command"`
	// Fairness: Fig. 9, per record size and seed, Jain's index after each
	// capacity (over the second half of each 40 s phase).
	FairnessScenario string                 `json:"fairness_scenario"`
	Capacities       []float64              `json:"capacities_msgs_per_s"`
	Jain             map[string][][]float64 `json:"jain_by_k_seed_phase"`
	// Adaptation: Fig. 8, deliveries and drops per second.
	AdaptScenario string `json:"adapt_scenario"`
	Delivered     []int  `json:"adapt_delivered_per_s"`
	Dropped       []int  `json:"adapt_dropped_per_s"`
	// TCP: Fig. 10, the content flow's and the TCP flow's deliveries per
	// second on a 125 msg/s link, TCP from 20 s.
	TCPScenario string `json:"tcp_scenario"`
	TCPContent  []int  `json:"tcp_content_delivered_per_s"`
	TCP         []int  `json:"tcp_delivered_per_s"`
}

// TestWriteSharedStudies writes Figs. 8 and 9 of Malekpour11 in virtual
// time as JSON and PNG.
func TestWriteSharedStudies(t *testing.T) {
	if !*study {
		t.Skip("writes docs/results/congestion/ from a minute of simulation: run with -args -study")
	}
	rep := sharedReport{
		Command:          "go test ./internal/congestion -run TestWriteSharedStudies -args -study",
		FairnessScenario: "three publishers at 400 msg/s, their subscribers matching 20%, 50% and 100%, share a drop-tail link (queue 20, 40 ms each way) of 250, 125, then 62.5 msg/s (2, 1, 0.5 Mbit/s of 1 KB), 40 s each",
		Capacities:       fairnessCaps,
		Jain:             map[string][][]float64{},
		AdaptScenario:    "one publisher at 400 msg/s, all matching, the link alternating 250 and 125 msg/s every 20 s",
		TCPScenario:      "one publisher at 400 msg/s, all matching, on a 125 msg/s link; a TCP Reno flow with unbounded data joins at 20 s",
	}
	var panels []*plot.Plot
	for _, k := range []int{5, 64} {
		name := fmt.Sprintf("k=%d", k)
		for seed := uint64(1); seed <= 5; seed++ {
			out, _, index := fairnessRun(k, seed)
			rep.Jain[name] = append(rep.Jain[name], index)
			if seed == 1 {
				var lines []series
				for i, d := range fairnessDemands {
					lines = append(lines, series{fmt.Sprintf("demand %.0f", d), floats(out.delivered[i])})
				}
				panels = append(panels, linesPanel(t, "Delivered per pair, "+name+" (seed 1)", "msg/s", lines...))
			}
		}
	}
	writePNG(t, "fairness.png", panels...)
	out := adaptRun()
	rep.Delivered, rep.Dropped = out.delivered[0], out.dropped
	caps := make([]float64, len(out.dropped))
	for i := range caps {
		caps[i] = []float64{250, 125}[(i/20)%2]
	}
	writePNG(t, "adapt.png", linesPanel(t, "Bottleneck 2 ↔ 1 Mbit/s every 20 s", "msg/s",
		series{"capacity", caps}, series{"delivered", floats(out.delivered[0])}, series{"dropped", floats(out.dropped)}))
	tcp := tcpRun(1)
	rep.TCPContent, rep.TCP = tcp.delivered[0], tcp.tcp
	writePNG(t, "tcp.png", linesPanel(t, "A TCP flow joins at 20 s (1 Mbit/s)", "msg/s",
		series{"content flow", floats(tcp.delivered[0])}, series{"TCP", floats(tcp.tcp)}))
	writeJSON(t, "shared-study.json", rep)
}
