package experiment

import (
	"context"
	"image/png"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dripmesh/drip/internal/bench"
	"github.com/dripmesh/drip/internal/testbed/systems"
	"github.com/dripmesh/drip/internal/workload"
)

// Carzaniga09 §5.2.1: the comparative networks are 1, 2, 4 (a square with one
// diagonal) and 8 brokers (diameter 3, BRITE), linked at 1 MBps.
func TestTopologies(t *testing.T) {
	for _, tt := range []struct{ n, links, diameter int }{{1, 0, 0}, {2, 1, 1}, {4, 5, 2}, {8, 11, 3}} {
		topo := Topology(tt.n)
		assert.Len(t, topo.Brokers, tt.n)
		assert.Len(t, topo.Links, tt.links)
		assert.Equal(t, tt.diameter, systems.Diameter(topo), "%d brokers", tt.n)
		for _, l := range topo.Links {
			assert.Equal(t, 1e6, float64(l.Bandwidth))
		}
	}
	assert.Panics(t, func() { Topology(3) })
}

// Carzaniga09 §5.2.1: in the single-broker scenario "each published message is
// delivered on average to 27 clients".
func TestSingleBrokerReplication(t *testing.T) {
	sc := mustLookup(t, "single-broker")[0]
	g, err := workload.New(sc.Workload)
	require.NoError(t, err)
	client, _ := workload.Replication(g.Predicates(sc.Clients), workload.RoundRobin(sc.Clients, 1), g.Messages(3000))
	assert.InDelta(t, 27, client, 2)
}

// Carzaniga09 §5.2.1: 80 clients of 20 one-constraint subscriptions, "a
// replication factor of 5%".
func TestScalingReplication(t *testing.T) {
	sc := mustLookup(t, "brokers-8")[0]
	g, err := workload.New(sc.Workload)
	require.NoError(t, err)
	client, _ := workload.Replication(g.Predicates(sc.Clients), workload.RoundRobin(sc.Clients, 8), g.Messages(3000))
	assert.InDelta(t, 0.05, client/float64(sc.Clients), 0.01)
}

func mustLookup(t *testing.T, name string) []Scenario {
	t.Helper()
	s, err := Lookup(name)
	require.NoError(t, err)
	return s
}

func TestLookup(t *testing.T) {
	s := mustLookup(t, "scaling")
	require.Len(t, s, 4)
	for i, n := range []int{1, 2, 4, 8} {
		assert.Len(t, s[i].Topology.Brokers, n)
		assert.Equal(t, 80, s[i].Clients)
		assert.Equal(t, bench.Ramp, s[i].Mode)
		assert.Equal(t, [2]float64{1, 100}, [2]float64{s[i].RateStart, s[i].RateEnd}, "Carzaniga09 §5.2.1: 1 to 100 msg/s per client")
	}
	_, err := Lookup("nope")
	assert.ErrorContains(t, err, `unknown scenario "nope": want one of single-broker, brokers-1`)
	for _, sc := range Scenarios() {
		assert.NoError(t, sc.Workload.Validate(), sc.Name)
	}
}

func TestBenchConfigScales(t *testing.T) {
	sc := mustLookup(t, "brokers-2")[0]
	bc := benchConfig(Config{Scenario: sc, Scale: 0.5}, []string{"s0", "s1"})
	assert.Equal(t, 80, bc.Subscribers)
	assert.Equal(t, 80, bc.Publishers)
	assert.InDelta(t, 40, bc.RateStart, 1e-9, "80 clients × 1 msg/s × 0.5")
	assert.InDelta(t, 4000, bc.Rate, 1e-9, "80 clients × 100 msg/s × 0.5")
	assert.True(t, bc.CutStuckPublishers)
}

func sample(at time.Duration, bytes map[systems.Direction]uint64) linkSample {
	return linkSample{at: at, bytes: bytes}
}

func TestBusiestPerSecond(t *testing.T) {
	ab, ba, bc := systems.Direction{From: "a", To: "b"}, systems.Direction{From: "b", To: "a"}, systems.Direction{From: "b", To: "c"}
	bw := map[systems.Direction]float64{ab: 1000, ba: 1000, bc: 500}
	samples := []linkSample{
		sample(0, map[systems.Direction]uint64{ab: 0, ba: 0}),
		sample(time.Second, map[systems.Direction]uint64{ab: 100, ba: 300}),
		// A slow read: this interval covers seconds 1 and 2.
		sample(3*time.Second, map[systems.Direction]uint64{ab: 2100, ba: 400, bc: 1000}),
		sample(4*time.Second, map[systems.Direction]uint64{ab: 2100, ba: 400, bc: 1000}),
	}
	got := busiestPerSecond(samples, bw)
	assert.Equal(t, map[int]busiest{
		0: {dir: ba, rate: 300, util: 0.3},
		1: {dir: ab, rate: 1000, util: 1},
		2: {dir: ab, rate: 1000, util: 1},
		3: {dir: ab, rate: 0, util: 0}, // idle: ties go to the first direction
	}, got)
	// A counter that went back (a broker restarted) yields no rate.
	got = busiestPerSecond([]linkSample{sample(0, map[systems.Direction]uint64{ab: 50}), sample(time.Second, map[systems.Direction]uint64{ab: 10})}, bw)
	assert.Empty(t, got)
}

// fakeResult is a ramp that a system follows to 60 msg/s and then caps.
func fakeResult(system string) *Result {
	r := &Result{
		Scenario:    ScenarioInfo{Name: "brokers-2", Links: []LinkInfo{{A: "s0", B: "s1", Bandwidth: 1e6}}},
		System:      systems.Info{System: system},
		SendSeconds: 20,
		Replication: bench.Replication{Client: 4},
		Totals:      bench.Totals{Duplicates: 3},
	}
	for s := range 25 {
		in := uint64(0)
		if s < 20 {
			in = uint64(5 * (s + 1))
		}
		out := min(4*in, 240)
		r.Series = append(r.Series, Point{T: s, Input: in, Ideal: 4 * in, Output: out, Undelivered: 4*in - out,
			Duplicates: uint64(s % 2), BusiestLink: "s0→s1", Utilisation: float64(s) / 40})
	}
	return r
}

func TestSaveWritesJSONAndPlots(t *testing.T) {
	dir := t.TempDir()
	rows := [][]*Result{{fakeResult("drip"), fakeResult("nats")}, {fakeResult("drip"), {System: systems.Info{System: "activemq"}, Scenario: ScenarioInfo{Name: "brokers-2"}, Error: "not installed"}}}
	rows[1][0].Scenario.Name = "brokers-4"
	rows[1][1].Scenario.Name = "brokers-4"
	files, err := Save(dir, "scaling", rows)
	require.NoError(t, err)
	want := []string{
		"brokers-2-drip.json", "brokers-2-nats.json", "brokers-4-drip.json", "brokers-4-activemq.json",
		"brokers-2-drip.png", "brokers-2-nats.png", "brokers-2-compare.png",
		"brokers-4-drip.png", "brokers-4-activemq.png", "brokers-4-compare.png",
		"scaling-grid.png", "scaling-links.png",
	}
	var got []string
	for _, f := range files {
		got = append(got, filepath.Base(f))
		if filepath.Ext(f) == ".png" {
			fh, err := os.Open(f)
			require.NoError(t, err)
			img, err := png.Decode(fh)
			fh.Close()
			require.NoError(t, err, f)
			assert.Greater(t, img.Bounds().Dx(), 300, f)
		}
	}
	assert.Equal(t, want, got)
	loaded, err := Load(dir, "scaling", []string{"drip", "activemq", "nats"})
	require.Error(t, err, "no brokers-1 results")
	_ = loaded
	loaded, err = Load(dir, "brokers-2", []string{"drip", "activemq", "nats"})
	require.NoError(t, err)
	require.Len(t, loaded, 1)
	require.Len(t, loaded[0], 2)
	assert.Equal(t, "nats", loaded[0][1].System.System)
	back, err := ReadResult(filepath.Join(dir, "brokers-2-nats.json"))
	require.NoError(t, err)
	assert.Equal(t, rows[0][1].Series, back.Series)
	assert.Equal(t, "nats", back.System.System)
}

// The knee of fakeResult's curve: output follows 4 × input up to 60 msg/s
// (240 deliveries/s) and then stays there, so it leaves the 10% band once
// 4 × input exceeds 240/0.9.
func TestSummarise(t *testing.T) {
	s := summarise(fakeResult("drip"))
	assert.InDelta(t, 65, s.SustainedInput, 1e-9)
	assert.InDelta(t, 240, s.SustainedOutput, 1e-9)
	assert.InDelta(t, 240, s.PeakOutput, 1e-9)
	assert.InDelta(t, 18.5/40, s.PeakUtilisation, 1e-9, "the last sending second averages seconds 18 and 19")
}

// TestSummariseSaturation: the input is 5, 10, …, 100 msg/s, the link's
// utilisation is input/40 (capped at 1) and the ideal 4 × input. The
// system follows the ideal until the link saturates, holds its peak of 160
// deliveries/s, and then (collapse) falls to 80 once the input reaches 60.
func TestSummariseSaturation(t *testing.T) {
	result := func(collapse bool) *Result {
		r := &Result{SendSeconds: 20, Scenario: ScenarioInfo{Name: "brokers-2"}}
		for s := range 22 {
			in := uint64(0)
			if s < 20 {
				in = uint64(5 * (s + 1))
			}
			out := min(4*in, 160)
			if collapse && in >= 60 {
				out = 80
			}
			r.Series = append(r.Series, Point{T: s, Input: in, Ideal: 4 * in, Output: out, Utilisation: min(float64(in)/40, 1)})
		}
		return r
	}
	s := summarise(result(false))
	// Second 7 is the first whose 3-s mean utilisation (7/8, 1, 1) is 95%;
	// its 3-s mean input is 40.
	assert.InDelta(t, 40, s.SaturationInput, 1e-9)
	assert.InDelta(t, 1, s.BeforeSaturation, 1e-9, "output equals ideal before saturation")
	require.NotNil(t, s.AtTwiceSaturation)
	assert.InDelta(t, 1, *s.AtTwiceSaturation, 1e-9, "the output holds its peak")

	s = summarise(result(true))
	assert.InDelta(t, 160, s.PeakOutput, 1e-9)
	require.NotNil(t, s.AtTwiceSaturation)
	assert.InDelta(t, 0.5, *s.AtTwiceSaturation, 1e-9, "collapse to half the peak")

	s = summarise(fakeResult("drip"))
	assert.Zero(t, s.SaturationInput, "utilisation never reaches 95%")
	assert.Nil(t, s.AtTwiceSaturation)
	// Over the whole sending time: (4·5·(1+…+12) + 8·240) / (4·5·(1+…+20)).
	assert.InDelta(t, 3480.0/4200, s.BeforeSaturation, 1e-9, "over the whole sending time")
}

// trafficCounter counts 1000 bytes a second on one link direction during
// the first 3 s of sending (from sendStart), and takes slow to answer its
// first read after sendStart (it reads the counts as the read begins, the
// worst case for dating the read), then fast for the others.
type trafficCounter struct {
	mu        sync.Mutex
	sendStart time.Time
	reads     int
	slow      time.Duration
}

func (c *trafficCounter) LinkBytes(ctx context.Context) (map[systems.Direction]uint64, error) {
	now := time.Now()
	sent := min(max(now.Sub(c.sendStart), 0), 3*time.Second)
	c.mu.Lock()
	started := !c.sendStart.IsZero() && !now.Before(c.sendStart)
	first := started && c.reads == 0
	if started {
		c.reads++
	}
	c.mu.Unlock()
	if first {
		select {
		case <-time.After(c.slow):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	var n uint64
	if started {
		n = uint64(sent.Seconds() * 1000)
	}
	return map[systems.Direction]uint64{{From: "a", To: "b"}: n, {From: "b", To: "a"}: 0}, nil
}

// TestLinkSamplerSpansTheRun: in virtual time, a run that sends for 3 s
// and drains until 6.3 s, with the first read of the link counters taking
// no time, 1.5 s or 6 s (as reading three in-process brokers' metrics did
// on a loaded 2-core machine, when TestSmoke found no traffic on any link).
// However long the reads, the samples hold all the traffic (from the
// baseline before sending to the read after the run) and some second of the
// run sees it.
func TestLinkSamplerSpansTheRun(t *testing.T) {
	for _, slow := range []time.Duration{0, 1500 * time.Millisecond, 6 * time.Second} {
		t.Run(slow.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c := &trafficCounter{slow: slow}
				s := &linkSampler{counter: c}
				time.Sleep(time.Second) // routing settles
				s.baseline(t.Context())
				time.Sleep(200 * time.Millisecond) // warm-up
				c.mu.Lock()
				c.sendStart = time.Now()
				c.mu.Unlock()
				s.start(t.Context())
				time.Sleep(6300 * time.Millisecond) // sending and the drain
				samples, err := s.stop(t.Context())
				require.NoError(t, err)
				require.NotEmpty(t, samples)
				assert.GreaterOrEqual(t, len(samples), 3, "the baseline, a read a second and the last read")
				ab := systems.Direction{From: "a", To: "b"}
				first, last := samples[0], samples[len(samples)-1]
				assert.Negative(t, first.at, "the baseline is read before sending")
				assert.Equal(t, uint64(3000), last.bytes[ab]-first.bytes[ab], "the samples hold all the traffic")
				busy := 0
				for s, b := range busiestPerSecond(samples, nil) {
					if s >= 0 && s <= 6 && b.rate > 0 {
						busy++
					}
				}
				assert.Positive(t, busy, "samples %v", samples)
			})
		})
	}
}
