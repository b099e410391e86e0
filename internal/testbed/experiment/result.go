package experiment

import (
	"encoding/json"
	"os"
	"sort"
	"time"

	"github.com/dripmesh/drip/internal/bench"
	"github.com/dripmesh/drip/internal/testbed/systems"
	"github.com/dripmesh/drip/internal/topology"
)

// Result is one system's run of one scenario: what Carzaniga09 §5.1.5 and
// Figs. 3–5 report, with everything needed to reproduce it.
type Result struct {
	Scenario    ScenarioInfo `json:"scenario"`
	System      systems.Info `json:"system"`
	Environment Environment  `json:"environment"`
	// Error says why the system could not be measured; the other fields
	// then describe only what was attempted.
	Error string `json:"error,omitempty"`
	// LinkError says why link counters could not be read, when they could
	// not.
	LinkError string `json:"link_error,omitempty"`
	// Series has one point per second from the start of sending, through
	// the drain.
	Series      []Point            `json:"series"`
	Totals      bench.Totals       `json:"totals"`
	Replication bench.Replication  `json:"replication"`
	Latency     bench.Latency      `json:"latency_ms"`
	Bench       bench.ReportConfig `json:"bench"`
	SendSeconds float64            `json:"send_s"`
	// SettleSeconds is how long the system's routing took to settle once
	// every client had subscribed (systems.Deployment.Ready): at the
	// start of a run, a cold start of routing with all subscriptions.
	SettleSeconds float64 `json:"settle_s,omitempty"`
	Summary       Summary `json:"summary"`
	// Faults are the faults injected while sending (Config.Faults).
	Faults []FaultRecord `json:"faults,omitempty"`
	// Lab is what the emulator saw, when the run was in a lab.
	Lab *LabReport `json:"lab,omitempty"`
	// Testbed is the CPU the run took, the runner's (clients and oracle)
	// and the rest's, so that a limit of the testbed is not read as one of
	// the system.
	Testbed *TestbedCost `json:"testbed,omitempty"`
}

// Summary condenses a ramp into the numbers a results table needs, all
// over 3-second means of the sending seconds.
type Summary struct {
	// SustainedInput is the highest input rate up to which the output
	// stayed within 10% of the ideal every second (the knee of the
	// throughput curve), and SustainedOutput the output there.
	SustainedInput  float64 `json:"sustained_input"`
	SustainedOutput float64 `json:"sustained_output"`
	// PeakOutput is the highest output rate.
	PeakOutput float64 `json:"peak_output"`
	// PeakUtilisation is the highest busiest-link utilisation.
	PeakUtilisation float64 `json:"peak_link_utilisation"`
	// SaturationInput is the input when the busiest link first reached
	// 95% utilisation; 0 when no link did.
	SaturationInput float64 `json:"saturation_input"`
	// BeforeSaturation is the output over the ideal, summed over the
	// sending seconds before that point (all of them when no link
	// saturated): whether the system delivers everything while the
	// network has capacity (Carzaniga09 §5.2.1, "full throughput").
	BeforeSaturation float64 `json:"output_over_ideal_before_saturation"`
	// AtTwiceSaturation is the mean output over the sending seconds whose
	// input was at least twice SaturationInput, over PeakOutput: whether
	// throughput holds when the input is twice what saturated the links
	// (no congestion collapse). Absent when no link saturated or the input
	// never reached twice that.
	AtTwiceSaturation *float64 `json:"output_at_twice_saturation_over_peak,omitempty"`
}

// saturationUtilisation is the busiest-link utilisation at which a link
// counts as saturated: queues build beyond it.
const saturationUtilisation = 0.95

// summarise computes r's Summary from its series.
func summarise(r *Result) Summary {
	pts := sending(r)
	in := smooth(pts, func(p Point) float64 { return float64(p.Input) })
	out := smooth(pts, func(p Point) float64 { return float64(p.Output) })
	ideal := smooth(pts, func(p Point) float64 { return float64(p.Ideal) })
	util := smooth(pts, func(p Point) float64 { return p.Utilisation })
	var s Summary
	within := true
	for i := range pts {
		within = within && out[i].Y >= 0.9*ideal[i].Y
		if within && in[i].Y > s.SustainedInput {
			s.SustainedInput, s.SustainedOutput = in[i].Y, out[i].Y
		}
		s.PeakOutput = max(s.PeakOutput, out[i].Y)
		s.PeakUtilisation = max(s.PeakUtilisation, util[i].Y)
	}
	sat := len(pts)
	for i := range pts {
		if util[i].Y >= saturationUtilisation {
			sat, s.SaturationInput = i, in[i].Y
			break
		}
	}
	var sumOut, sumIdeal float64
	for _, p := range pts[:sat] {
		sumOut, sumIdeal = sumOut+float64(p.Output), sumIdeal+float64(p.Ideal)
	}
	if sumIdeal > 0 {
		s.BeforeSaturation = sumOut / sumIdeal
	}
	if s.SaturationInput > 0 && s.PeakOutput > 0 {
		var sum float64
		n := 0
		for i := sat; i < len(pts); i++ {
			if in[i].Y >= 2*s.SaturationInput {
				sum += out[i].Y
				n++
			}
		}
		if n > 0 {
			v := sum / float64(n) / s.PeakOutput
			s.AtTwiceSaturation = &v
		}
	}
	return s
}

// ScenarioInfo records the scenario as run.
type ScenarioInfo struct {
	Name         string             `json:"name"`
	Description  string             `json:"description"`
	Sites        []string           `json:"sites"`
	Links        []LinkInfo         `json:"links"`
	Diameter     int                `json:"diameter"`
	Clients      int                `json:"clients"`
	WorkloadName string             `json:"workload"`
	Mode         bench.Mode         `json:"mode"`
	Paper        RatePerClient      `json:"paper_rate_per_client"`
	Scale        float64            `json:"scale"`
	Run          RatePerClient      `json:"run_rate_per_client"`
	RunTotal     RatePerClient      `json:"run_rate_total"`
	Duration     float64            `json:"duration_s"`
	Topology     *topology.Topology `json:"-"`
}

// RatePerClient is a rate at the start and at the end of sending.
type RatePerClient struct {
	Start float64 `json:"start"`
	End   float64 `json:"end"`
}

// LinkInfo is a topology link.
type LinkInfo struct {
	A         string  `json:"a"`
	B         string  `json:"b"`
	Bandwidth float64 `json:"bandwidth_Bps"`
}

// Environment is where the run happened.
type Environment struct {
	Placement string `json:"placement"`
	CPUs      int    `json:"cpus"`
	CPU       string `json:"cpu,omitempty"`
	Kernel    string `json:"kernel,omitempty"`
	GoVersion string `json:"go"`
	Date      string `json:"date"`
}

// Point is one second of a run. Input counts messages published, Output
// expected deliveries received, Ideal the deliveries the published
// messages call for (input × client replication, from the oracle), and
// Undelivered those of the second's messages that never arrived,
// Duplicates further copies of deliveries received in the second. The
// busiest link is the link direction that carried the most bytes in the
// second; Utilisation is its rate over the link's bandwidth (which on
// loopback is not enforced, so it can exceed 1).
type Point struct {
	T           int     `json:"t"`
	Input       uint64  `json:"input"`
	Output      uint64  `json:"output"`
	Ideal       uint64  `json:"ideal"`
	Undelivered uint64  `json:"undelivered"`
	Duplicates  uint64  `json:"duplicates"`
	BusiestLink string  `json:"busiest_link,omitempty"`
	LinkBytes   float64 `json:"busiest_link_Bps,omitempty"`
	Utilisation float64 `json:"busiest_link_utilisation,omitempty"`
}

func newResult(cfg Config, system string) *Result {
	sc := cfg.Scenario
	info := ScenarioInfo{
		Name: sc.Name, Description: sc.Description, Clients: sc.Clients, WorkloadName: sc.WorkloadName, Mode: sc.Mode,
		Paper:    RatePerClient{sc.RateStart, sc.RateEnd},
		Scale:    cfg.Scale,
		Run:      RatePerClient{sc.RateStart * cfg.Scale, sc.RateEnd * cfg.Scale},
		RunTotal: RatePerClient{sc.RateStart * cfg.Scale * float64(sc.Clients), sc.RateEnd * cfg.Scale * float64(sc.Clients)},
		Duration: sc.Duration.Seconds(), Diameter: systems.Diameter(sc.Topology), Topology: sc.Topology,
	}
	for _, b := range sc.Topology.Brokers {
		info.Sites = append(info.Sites, b.Name)
	}
	for _, l := range sc.Topology.Links {
		info.Links = append(info.Links, LinkInfo{A: l.A, B: l.B, Bandwidth: float64(l.Bandwidth)})
	}
	return &Result{Scenario: info, System: systems.Info{System: system}, Environment: environment(cfg.PlacementName)}
}

// fill copies the bench's report and the link samples into r.
func (r *Result) fill(rep *bench.Report, samples []linkSample, t *topology.Topology) {
	r.Totals, r.Replication, r.Latency, r.Bench, r.SendSeconds = rep.Totals, rep.Replication, rep.Latency, rep.Config, rep.SendSeconds
	bw := bandwidths(t)
	busy := busiestPerSecond(samples, bw)
	for _, s := range rep.Series {
		p := Point{T: s.T, Input: s.Sent, Output: s.Delivered, Ideal: s.Ideal, Undelivered: s.Undelivered, Duplicates: s.Duplicates}
		if b, ok := busy[s.T]; ok {
			p.BusiestLink, p.LinkBytes, p.Utilisation = b.dir.String(), b.rate, b.util
		}
		r.Series = append(r.Series, p)
	}
	r.Summary = summarise(r)
}

func bandwidths(t *topology.Topology) map[systems.Direction]float64 {
	bw := map[systems.Direction]float64{}
	for _, l := range t.Links {
		bw[systems.Direction{From: l.A, To: l.B}] = float64(l.Bandwidth)
		bw[systems.Direction{From: l.B, To: l.A}] = float64(l.Bandwidth)
	}
	return bw
}

type busiest struct {
	dir  systems.Direction
	rate float64 // bytes/s
	util float64 // rate / bandwidth, 0 when the bandwidth is unknown
}

// busiestPerSecond turns cumulative samples into, for each second of the
// run, the direction with the highest byte rate over the sampling interval
// that covers the middle of that second. Rates are per actual interval:
// samples are about a second apart, more when reading the counters is slow
// on a loaded machine, and then one interval covers several seconds. Ties
// go to the direction that sorts first, so the result does not depend on
// map order.
func busiestPerSecond(samples []linkSample, bw map[systems.Direction]float64) map[int]busiest {
	out := map[int]busiest{}
	for i := 1; i < len(samples); i++ {
		prev, cur := samples[i-1], samples[i]
		dt := (cur.at - prev.at).Seconds()
		if dt <= 0 {
			continue
		}
		dirs := make([]systems.Direction, 0, len(cur.bytes))
		for d := range cur.bytes {
			dirs = append(dirs, d)
		}
		sort.Slice(dirs, func(a, b int) bool { return dirs[a].String() < dirs[b].String() })
		var best busiest
		found := false
		for _, d := range dirs {
			n, p := cur.bytes[d], prev.bytes[d]
			if n < p {
				continue // a counter that went back (a restarted broker): no rate
			}
			rate := float64(n-p) / dt
			if !found || rate > best.rate {
				best, found = busiest{dir: d, rate: rate}, true
			}
		}
		if !found {
			continue
		}
		if b := bw[best.dir]; b > 0 {
			best.util = best.rate / b
		}
		for s := int(prev.at / time.Second); time.Duration(s)*time.Second < cur.at; s++ {
			mid := time.Duration(s)*time.Second + time.Second/2
			if prev.at <= mid && mid < cur.at {
				out[s] = best
			}
		}
	}
	return out
}

// WriteJSON writes r, indented, to path.
func (r *Result) WriteJSON(path string) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// ReadResult reads a result written by WriteJSON.
func ReadResult(path string) (*Result, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var r Result
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, err
	}
	return &r, nil
}
