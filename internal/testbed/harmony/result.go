package harmony

import (
	"fmt"
	"slices"
	"time"

	"github.com/dripmesh/drip/internal/testbed/systems"
)

// Result is one scenario's run of every variant.
type Result struct {
	Config   Config          `json:"config"`
	Pairs    []Pair          `json:"pairs"`
	Schedule []Degradation   `json:"schedule"`
	Variants []VariantResult `json:"variants"`
	// Command is how the run was made (set by the caller).
	Command string `json:"command,omitempty"`
}

// VariantResult is one variant's run.
type VariantResult struct {
	Variant Variant      `json:"variant"`
	Info    systems.Info `json:"system"`
	Pairs   []PairStats  `json:"pairs"`
	// All is every pair's deliveries together.
	All PairStats `json:"all"`
	// LinkBytes is what every link carried while publishing and
	// draining, both directions: the cost of a variant, two paths included.
	LinkBytes uint64 `json:"link_bytes"`
	// Detections are, for each link cut (the failure scenario, drip),
	// how long after the cut each end routed around it; Suspicions count
	// every suspicion of the run, false alarms included.
	Detections []Detection `json:"detections,omitempty"`
	Suspicions float64     `json:"suspicions"`
	// Counters are drip's drops, refusals, holds and suppressed copies,
	// summed over the brokers at the end of the run (none for NATS).
	Counters map[string]float64 `json:"counters,omitempty"`

	latencies []time.Duration // every pair's, for All
}

// Detection is when the two ends of a link cut in Period suspected it:
// milliseconds after the cut, at A and at B; −1: not before the period
// ended.
type Detection struct {
	Period int        `json:"period"`
	A      string     `json:"a"`
	B      string     `json:"b"`
	Ms     [2]float64 `json:"ms"`
}

// DetectionStats are the median and the worst of detection times over
// every end of every cut, and how many ends never suspected theirs.
func DetectionStats(ds []Detection) (median, worst float64, missed int) {
	var all []float64
	for _, d := range ds {
		for _, ms := range d.Ms {
			if ms < 0 {
				missed++
				continue
			}
			all = append(all, ms)
		}
	}
	if len(all) == 0 {
		return 0, 0, missed
	}
	slices.Sort(all)
	return all[len(all)/2], all[len(all)-1], missed
}

// PairStats is what one subscriber-topic pair received.
type PairStats struct {
	Pair       string  `json:"pair"`
	Published  uint64  `json:"published"`
	Received   uint64  `json:"received"`
	Lost       uint64  `json:"lost"`
	LossRate   float64 `json:"loss_rate"`
	Duplicates int     `json:"duplicates"`
	// Latency quantiles of the received messages (ms), and the fractions
	// of them later than the deadline and than 100 ms.
	P50          float64 `json:"p50_ms"`
	P90          float64 `json:"p90_ms"`
	P99          float64 `json:"p99_ms"`
	Max          float64 `json:"max_ms"`
	Mean         float64 `json:"mean_ms"`
	OverDeadline float64 `json:"over_deadline"`
	Over100ms    float64 `json:"over_100ms"`
	// CDF is the latency (ms) at quantiles 0, 0.005, …, 1.
	CDF []float64 `json:"cdf_ms"`
	// LostByPeriod counts the lost messages by the period they were sent
	// in, to set beside the schedule's degradations.
	LostByPeriod []uint64 `json:"lost_by_period,omitempty"`
}

// cdfSteps is the number of quantile steps in PairStats.CDF.
const cdfSteps = 200

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func pairStats(p Pair, sent *sentLog, l *pairLog, cfg Config) PairStats {
	l.mu.Lock()
	defer l.mu.Unlock()
	sent.mu.Lock()
	defer sent.mu.Unlock()
	s := latencyStats(slices.Clone(l.latencies), cfg.Deadline)
	s.Pair, s.Published, s.Duplicates = p.String(), uint64(len(sent.at)), l.dups
	s.Received = uint64(len(l.latencies))
	s.account()
	s.LostByPeriod = make([]uint64, cfg.Periods)
	for seq, at := range sent.at {
		if !l.seen[uint64(seq)] {
			s.LostByPeriod[min(int(at/cfg.Period), cfg.Periods-1)]++
		}
	}
	return s
}

// account derives the loss from what was published and received; copies
// received beyond what was published (none, unless publishing counts
// wrongly) are not losses.
func (s *PairStats) account() {
	if s.Published > s.Received {
		s.Lost = s.Published - s.Received
	}
	if s.Published > 0 {
		s.LossRate = float64(s.Lost) / float64(s.Published)
	}
}

// latencyStats summarises latencies (sorted in place).
func latencyStats(lat []time.Duration, deadline time.Duration) PairStats {
	var s PairStats
	if len(lat) == 0 {
		return s
	}
	slices.Sort(lat)
	q := func(f float64) float64 { return ms(lat[min(len(lat)-1, int(f*float64(len(lat))))]) }
	s.P50, s.P90, s.P99, s.Max = q(0.5), q(0.9), q(0.99), ms(lat[len(lat)-1])
	var sum time.Duration
	over, over100 := 0, 0
	for _, d := range lat {
		sum += d
		if d > deadline {
			over++
		}
		if d > 100*time.Millisecond {
			over100++
		}
	}
	s.Mean = ms(sum / time.Duration(len(lat)))
	s.OverDeadline = float64(over) / float64(len(lat))
	s.Over100ms = float64(over100) / float64(len(lat))
	for i := 0; i <= cdfSteps; i++ {
		s.CDF = append(s.CDF, q(float64(i)/cdfSteps))
	}
	return s
}

// total fills All from the pairs.
func (v *VariantResult) total(deadline time.Duration) {
	var published uint64
	dups := 0
	for _, p := range v.Pairs {
		published += p.Published
		dups += p.Duplicates
	}
	v.All = latencyStats(v.latencies, deadline)
	v.All.Pair, v.All.Published, v.All.Duplicates = "all", published, dups
	for _, p := range v.Pairs {
		v.All.Received += p.Received
	}
	v.All.account()
}

func (v *VariantResult) summary() string {
	a := v.All
	s := fmt.Sprintf("lost %d of %d (%.3f%%), p50 %.1f ms, p99 %.1f ms, %.2f%% over the deadline, %.2f%% over 100 ms, %.1f MB on the links",
		a.Lost, a.Published, 100*a.LossRate, a.P50, a.P99, 100*a.OverDeadline, 100*a.Over100ms, float64(v.LinkBytes)/1e6)
	if len(v.Detections) > 0 {
		med, worst, missed := DetectionStats(v.Detections)
		s += fmt.Sprintf("; cuts detected after %.1f ms (median), %.1f ms (worst), %d ends not; %.0f suspicions in all", med, worst, missed, v.Suspicions)
	}
	return s
}
