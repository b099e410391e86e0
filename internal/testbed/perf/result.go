package perf

import (
	"math"
	"slices"
)

// CaseResult is one case: its runs and the table they make.
type CaseResult struct {
	Name        string `json:"name"`
	Title       string `json:"title"`
	Description string `json:"description"`
	// Systems are the table's columns: drip (or its variant) first, then
	// what it is compared with.
	Systems []string `json:"systems"`
	// Deployments describe each system as it ran (version, settings).
	Deployments map[string]DeploymentInfo `json:"deployments,omitempty"`
	Rows        []Row                     `json:"rows"`
	Notes       []string                  `json:"notes,omitempty"`
	// Caveats are what the runs say about the numbers (a server that was
	// not the bottleneck, a drain that ended with deliveries still
	// coming), derived from the runs each time the results are written.
	Caveats []string      `json:"caveats,omitempty"`
	Henjes  *HenjesResult `json:"henjes07,omitempty"`
	Runs    []RunResult   `json:"runs,omitempty"`
	// Skipped says why the case did not run.
	Skipped string `json:"skipped,omitempty"`
	Seconds Num    `json:"seconds"`
}

// DeploymentInfo is what ran for one system of a case.
type DeploymentInfo struct {
	Version string            `json:"version"`
	Brokers int               `json:"brokers"`
	Config  map[string]string `json:"config,omitempty"`
}

// Row is one metric of a case: each system's median over the
// repetitions, the ratio of the first system's to the second's, the ratio
// of every interleaved pair, and the target the ratio (or the first
// system's value) is held to.
type Row struct {
	Metric string           `json:"metric"`
	Values map[string]Num   `json:"values"`
	Reps   map[string][]Num `json:"repetitions"`
	// RatioOf names the ratio, "drip/nats".
	RatioOf    string `json:"ratio_of,omitempty"`
	Ratio      Num    `json:"ratio"`
	PairRatios []Num  `json:"pair_ratios,omitempty"`
	Target     string `json:"target,omitempty"`
	// TargetRatio is the bound the target puts on the ratio, and AtMost
	// its direction; absent when the target is on the first system's
	// values instead (loss).
	TargetRatio Num  `json:"target_ratio,omitempty"`
	AtMost      bool `json:"at_most,omitempty"`
	// Met is whether the target is met; absent without a target or a
	// measurement.
	Met *bool `json:"met,omitempty"`
	// Unit says how to print the values: "rate", "us", "ms", "fraction",
	// "cores", "count".
	Unit string `json:"unit"`
}

// metric reads one number from a run; NaN when the run does not have it.
type metric struct {
	name, unit string
	get        func(RunResult) float64
	// noRatio: a ratio of the systems' values says nothing (losses, where
	// either may be zero).
	noRatio bool
}

var (
	mDelivered = metric{name: "delivered msg/s", unit: "rate", get: func(r RunResult) float64 { return float64(r.DeliveryRate) }}
	mPublished = metric{name: "published msg/s", unit: "rate", get: func(r RunResult) float64 { return float64(r.PublishRate) }}
	mLoss      = metric{name: "undelivered / expected, after the drain", unit: "fraction", get: func(r RunResult) float64 { return float64(r.Loss) }}.withoutRatio()
	mCPU       = metric{name: "server CPU µs per delivery", unit: "us", get: func(r RunResult) float64 { return float64(r.CPUPerDelivery) }}
	mCores     = metric{name: "server cores busy", unit: "cores", get: func(r RunResult) float64 { return float64(r.ServerCores) }}
	mLost      = metric{name: "drops reported to subscribers", unit: "count", get: func(r RunResult) float64 { return float64(r.Lost) }}.withoutRatio()
	mDropped   = metric{name: "drops counted by the brokers", unit: "count", get: func(r RunResult) float64 { return float64(r.BrokerDropped) }}.withoutRatio()
)

// withoutRatio is m with no ratio in its rows.
func (m metric) withoutRatio() metric {
	m.noRatio = true
	return m
}

// valuesOf returns m of system's runs (of variant) in repetition order;
// a failed run is NaN.
func valuesOf(runs []RunResult, system, variant string, m metric) []float64 {
	var out []float64
	for _, r := range runs {
		if r.System != system || r.Variant != variant {
			continue
		}
		if r.Error != "" {
			out = append(out, math.NaN())
			continue
		}
		out = append(out, m.get(r))
	}
	return out
}

// goal is a criterion on a row: the ratio at least or at most x, or every
// repetition of the first system at most x.
type goal struct {
	text   string
	x      float64
	atMost bool
	// worst judges the first system's every repetition instead of the
	// ratio: loss is a correctness target, which one bad run fails.
	worst bool
}

func atLeast(text string, x float64) *goal { return &goal{text: text, x: x} }
func atMost(text string, x float64) *goal  { return &goal{text: text, x: x, atMost: true} }
func worstAtMost(text string, x float64) *goal {
	return &goal{text: text, x: x, atMost: true, worst: true}
}

func (g *goal) met(ratio float64, first []float64) bool {
	if !g.worst {
		if g.atMost {
			return ratio <= g.x
		}
		return ratio >= g.x
	}
	if len(first) == 0 {
		return false
	}
	for _, v := range first {
		if math.IsNaN(v) || v > g.x {
			return false
		}
	}
	return true
}

// makeRow builds the row of m for systems a and b (b empty: a alone).
func makeRow(runs []RunResult, m metric, a, b, variant string, t *goal) Row {
	row := Row{Metric: m.name, Unit: m.unit, Values: map[string]Num{}, Reps: map[string][]Num{}, Ratio: Num(math.NaN()), TargetRatio: Num(math.NaN())}
	// A target on every run shows every system's worst run, not its
	// median.
	agg := Median
	if t != nil && t.worst {
		agg = Worst
		row.Metric += ", worst run"
	}
	va := valuesOf(runs, a, variant, m)
	row.Values[a], row.Reps[a] = Num(agg(va)), nums(va)
	if b != "" {
		vb := valuesOf(runs, b, variant, m)
		row.Values[b], row.Reps[b] = Num(agg(vb)), nums(vb)
		if !m.noRatio {
			row.RatioOf = a + "/" + b
			row.Ratio = Num(Ratio(Median(va), Median(vb)))
			row.PairRatios = nums(PairRatios(va, vb))
		}
	}
	if t != nil {
		row.Target = t.text
		if !t.worst {
			row.TargetRatio, row.AtMost = Num(t.x), t.atMost
		}
		if row.Ratio.Valid() || t.worst {
			met := t.met(float64(row.Ratio), va)
			row.Met = &met
		}
	}
	return row
}

func nums(xs []float64) []Num {
	out := make([]Num, len(xs))
	for i, x := range xs {
		out[i] = Num(x)
	}
	return out
}

// withoutRuns is the case as the summary lists it.
func (c *CaseResult) withoutRuns() *CaseResult {
	cp := *c
	cp.Runs = nil
	if c.Henjes != nil {
		h := *c.Henjes
		cp.Henjes = &h
	}
	return &cp
}

// targetRows are the rows that carry a target.
func (c *CaseResult) targetRows() []Row {
	return slices.DeleteFunc(slices.Clone(c.Rows), func(r Row) bool { return r.Target == "" })
}
