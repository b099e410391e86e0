package congestion

import (
	"encoding/json"
	"flag"
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

var study = flag.Bool("study", false, "write the record-size study to docs/results/congestion/record-study.{json,png}")

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
		t.Skip("run with -args -study")
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
	dir := filepath.Join("..", "..", "docs", "results", "congestion")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	data, err := json.MarshalIndent(rep, "", "  ")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "record-study.json"), append(data, '\n'), 0o644))

	panel := func(title, y string, series map[string][]float64) *plot.Plot {
		pl := plot.New()
		pl.Title.Text, pl.X.Label.Text, pl.Y.Label.Text = title, "time (s)", y
		var args []any
		for _, r := range runs {
			pts := make(plotter.XYs, len(rep.Seconds))
			for i, s := range rep.Seconds {
				pts[i] = plotter.XY{X: float64(s), Y: series[r.name][i]}
			}
			args = append(args, r.name, pts)
		}
		require.NoError(t, plotutil.AddLines(pl, args...))
		pl.Legend.Top = true
		return pl
	}
	const w, h = 22 * vg.Centimeter, 9 * vg.Centimeter
	img := vgimg.NewWith(vgimg.UseWH(w, h), vgimg.UseDPI(110))
	dc := draw.New(img)
	panel("Loss event rate p", "p", rep.LossRate).Draw(draw.Crop(dc, 0, -w/2, 0, 0))
	panel("TCP response function", "msg/s", rep.Rate).Draw(draw.Crop(dc, w/2, 0, 0, 0))
	f, err := os.Create(filepath.Join(dir, "record-study.png"))
	require.NoError(t, err)
	_, err = vgimg.PngCanvas{Canvas: img}.WriteTo(f)
	require.NoError(t, err)
	require.NoError(t, f.Close())
}
