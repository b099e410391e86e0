package churn

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"slices"
	"syscall"
	"time"

	"github.com/dripmesh/drip/internal/bench"
)

// BackWithin is how soon a subscriber must be back: within this of its
// broker's restart, or this long after its broker failed, on another.
const BackWithin = 2 * time.Second

// Result is one scenario's measurement, written as JSON.
type Result struct {
	Scenario ScenarioInfo `json:"scenario"`
	Mesh     MeshInfo     `json:"mesh"`
	Config   RunConfig    `json:"config"`
	// Times in seconds since sending started; the durations after the
	// fault and the restart are what the brokers' metrics show, to within
	// a scrape (ScrapeInterval, plus the scrape's own time).
	Times Times `json:"times"`
	// What reached the bench (bench.Totals has the rest).
	Sent             uint64 `json:"sent"`
	Ideal            uint64 `json:"ideal"`
	Delivered        uint64 `json:"delivered"`
	Undelivered      uint64 `json:"undelivered"`
	Duplicates       uint64 `json:"duplicates"`
	FalsePositives   uint64 `json:"false_positives"`
	ClientSuppressed uint64 `json:"client_suppressed"`
	// UndeliveredBySecond lists the seconds of sending whose messages
	// were not all delivered. Split at the restart, by the second a
	// message was sent (the restart's own second counts as after): what
	// the fault cost, and what the victim's return cost.
	UndeliveredBySecond      []SecondCount   `json:"undelivered_by_second"`
	UndeliveredBeforeRestart uint64          `json:"undelivered_before_restart"`
	UndeliveredFromRestart   uint64          `json:"undelivered_from_restart"`
	Gaps                     GapSummary      `json:"gaps"`
	Failovers                FailoverSummary `json:"failovers"`
	// BrokerCounters are the brokers' own counters, summed over brokers
	// and incarnations (each as of its last scrape).
	BrokerCounters map[string]float64 `json:"broker_counters"`
	// DropsByBroker says where: per broker incarnation ("b9/2"), its
	// counters of drops, suppressed copies and false positives that are
	// not zero.
	DropsByBroker map[string]map[string]float64 `json:"drops_by_broker"`
	Checks        []Check                       `json:"checks"`
	Error         string                        `json:"error,omitempty"`
	Bench         *bench.Report                 `json:"bench,omitempty"`
}

// ScenarioInfo says what fault the run injected, and where.
type ScenarioInfo struct {
	Name        string  `json:"name"`
	Description string  `json:"description"`
	Signal      string  `json:"signal"`
	Victim      string  `json:"victim"`
	Role        Role    `json:"role"`
	DownS       float64 `json:"down_s"`
}

// MeshInfo is the plan of the run.
type MeshInfo struct {
	Seed        uint64      `json:"seed"`
	Brokers     int         `json:"brokers"`
	Links       [][2]string `json:"links"`
	CutVertices []string    `json:"cut_vertices"`
	// Clients are the brokers of the bench's clients, in the bench's
	// order: a client fails over to the next.
	Clients []string `json:"clients"`
	// Parts are the mesh's connected parts without the victim.
	Parts [][]string `json:"parts_without_victim"`
	// Topology is the topology file the brokers ran.
	Topology string `json:"topology"`
}

// RunConfig is the bench's load.
type RunConfig struct {
	Rate         float64 `json:"rate"`
	Subscribers  int     `json:"subscribers"`
	Publishers   int     `json:"publishers"`
	Workload     string  `json:"workload"`
	WorkloadSeed int64   `json:"workload_seed"`
	Mode         string  `json:"mode"`
	DurationS    float64 `json:"duration_s"`
	FaultAtS     float64 `json:"fault_at_s"`
}

// Times are the fault's times and how long the mesh took to agree again.
// A field is null when it did not happen (a run that failed first).
type Times struct {
	StartupConvergedS float64  `json:"startup_converged_s"` // from starting the processes to the first agreement, before the bench
	FaultS            *float64 `json:"fault_s"`             // the signal
	ExitS             *float64 `json:"exit_s"`              // the victim's process exited
	RestartS          *float64 `json:"restart_s"`           // the victim started again
	// PartsAgreeAfterFaultS: from the signal until every part of the
	// mesh without the victim agreed on its own (Agree).
	PartsAgreeAfterFaultS *float64 `json:"parts_agree_after_fault_s"`
	// ReconvergedAfterRestartS: from the restart until all brokers
	// agreed again.
	ReconvergedAfterRestartS *float64 `json:"reconverged_after_restart_s"`
}

// SecondCount is a count in one second of the run.
type SecondCount struct {
	T int    `json:"t"`
	N uint64 `json:"n"`
}

// GapSummary is the subscriptions' time without a broker.
type GapSummary struct {
	Count     uint64      `json:"count"`
	LongestMs float64     `json:"longest_ms"`
	Events    []GapTiming `json:"events"`
}

// GapTiming is one gap put beside the fault: when it began and ended
// after the signal, when it ended after the restart, and whether it
// counts as back (BackWithin).
type GapTiming struct {
	From             string  `json:"from"`
	To               string  `json:"to"`
	StartAfterFaultS float64 `json:"start_after_fault_s"`
	EndAfterFaultS   float64 `json:"end_after_fault_s"`
	EndAfterRestartS float64 `json:"end_after_restart_s"`
	DurationMs       float64 `json:"duration_ms"`
	Back             bool    `json:"back"`
}

// FailoverSummary is the publishers' moves.
type FailoverSummary struct {
	Count    uint64           `json:"count"`
	Resent   uint64           `json:"resent"`
	InFlight uint64           `json:"in_flight"`
	Events   []FailoverTiming `json:"events"`
}

// FailoverTiming is one publisher failover put beside the fault; brokers
// by name.
type FailoverTiming struct {
	From        string  `json:"from"`
	To          string  `json:"to"`
	AfterFaultS float64 `json:"after_fault_s"`
	Resent      int     `json:"resent,omitempty"`
	InFlight    uint64  `json:"in_flight,omitempty"`
}

// Check is one thing the run must show.
type Check struct {
	Name   string `json:"name"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail"`
}

// OK reports whether every check passed and the run completed.
func (r *Result) OK() bool {
	if r.Error != "" {
		return false
	}
	for _, c := range r.Checks {
		if !c.OK {
			return false
		}
	}
	return true
}

// WriteJSON writes r to path.
func (r *Result) WriteJSON(path string) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// ReadResult reads a Result that WriteJSON wrote.
func ReadResult(path string) (*Result, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var r Result
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &r, nil
}

// observation is what a run gathered, for assemble.
type observation struct {
	plan     Plan
	scenario Scenario
	config   RunConfig
	topology string
	// addrNames names brokers by their client addresses (publisher
	// failovers give addresses).
	addrNames map[string]string
	// Times on the wall clock; zero when it did not happen.
	processesStarted, converged   time.Time
	sendStart, fault, exit, start time.Time
	rounds                        []Round
	counters                      map[string]float64
	drops                         map[string]map[string]float64
	report                        *bench.Report
	err                           error
}

// assemble computes a Result from what a run observed.
func assemble(o observation) *Result {
	victim := o.scenario.victim(o.plan)
	r := &Result{
		Scenario: ScenarioInfo{
			Name: o.scenario.Name, Description: o.scenario.Description, Signal: signalName(o.scenario.Signal),
			Victim: Name(victim), Role: o.scenario.Victim, DownS: o.scenario.Down.Seconds(),
		},
		Mesh:           meshInfo(o.plan, victim, o.topology),
		Config:         o.config,
		BrokerCounters: o.counters,
		DropsByBroker:  o.drops,
		Bench:          o.report,
	}
	if o.err != nil {
		r.Error = o.err.Error()
	}
	if !o.converged.IsZero() {
		r.Times.StartupConvergedS = o.converged.Sub(o.processesStarted).Seconds()
	}
	since := func(t time.Time) *float64 {
		if t.IsZero() || o.sendStart.IsZero() {
			return nil
		}
		return ptr(t.Sub(o.sendStart).Seconds())
	}
	r.Times.FaultS, r.Times.ExitS, r.Times.RestartS = since(o.fault), since(o.exit), since(o.start)
	if !o.fault.IsZero() {
		parts := o.plan.Graph.Components(victim)
		if at, ok := FirstAgreement(o.rounds, o.fault, parts); ok && (o.start.IsZero() || at.Before(o.start)) {
			r.Times.PartsAgreeAfterFaultS = ptr(at.Sub(o.fault).Seconds())
		}
	}
	if !o.start.IsZero() {
		if at, ok := FirstAgreement(o.rounds, o.start, o.plan.Graph.Components()); ok {
			r.Times.ReconvergedAfterRestartS = ptr(at.Sub(o.start).Seconds())
		}
	}
	if rep := o.report; rep != nil {
		t := rep.Totals
		r.Sent, r.Ideal, r.Delivered, r.Undelivered = t.Sent, t.Ideal, t.Delivered, t.Undelivered
		r.Duplicates, r.FalsePositives, r.ClientSuppressed = t.Duplicates, t.FalsePositives, t.ClientSuppressed
		r.UndeliveredBySecond = []SecondCount{}
		restart := math.MaxInt
		if r.Times.RestartS != nil {
			restart = int(*r.Times.RestartS)
		}
		for _, s := range rep.Series {
			if s.Undelivered > 0 {
				r.UndeliveredBySecond = append(r.UndeliveredBySecond, SecondCount{T: s.T, N: s.Undelivered})
			}
			if s.T < restart {
				r.UndeliveredBeforeRestart += s.Undelivered
			} else {
				r.UndeliveredFromRestart += s.Undelivered
			}
		}
		r.Gaps = gapSummary(rep, o, Name(victim))
		r.Failovers = failoverSummary(rep, o)
	}
	r.Checks = checks(r, o)
	return r
}

func ptr(f float64) *float64 { return &f }

func meshInfo(p Plan, victim int, topo string) MeshInfo {
	m := MeshInfo{Seed: p.Seed, Brokers: p.Graph.N, CutVertices: names(p.CutVertices), Clients: names(p.Clients), Topology: topo}
	for _, e := range p.Graph.Edges {
		m.Links = append(m.Links, [2]string{Name(e[0]), Name(e[1])})
	}
	for _, c := range p.Graph.Components(victim) {
		m.Parts = append(m.Parts, names(c))
	}
	return m
}

// seconds is a time of the bench's report (seconds since sending
// started) relative to t, a wall-clock time of the run.
func seconds(o observation, reportS float64, t time.Time) float64 {
	if t.IsZero() || o.sendStart.IsZero() {
		return math.NaN()
	}
	return reportS - t.Sub(o.sendStart).Seconds()
}

func gapSummary(rep *bench.Report, o observation, victim string) GapSummary {
	g := GapSummary{Count: rep.Totals.Gaps, LongestMs: rep.Totals.MaxGapMs, Events: []GapTiming{}}
	for _, e := range rep.GapEvents {
		gt := GapTiming{
			From: e.From, To: e.To,
			StartAfterFaultS: round3(seconds(o, e.StartS, o.fault)),
			EndAfterFaultS:   round3(seconds(o, e.EndS, o.fault)),
			EndAfterRestartS: round3(seconds(o, e.EndS, o.start)),
			DurationMs:       round3((e.EndS - e.StartS) * 1000),
		}
		back := BackWithin.Seconds()
		gt.Back = gt.DurationMs <= back*1000 || (e.To == victim && gt.EndAfterRestartS <= back)
		g.Events = append(g.Events, gt)
	}
	return g
}

func failoverSummary(rep *bench.Report, o observation) FailoverSummary {
	f := FailoverSummary{Count: rep.Totals.Failovers, Resent: rep.Totals.Resent, InFlight: rep.Totals.InFlightLost, Events: []FailoverTiming{}}
	name := func(addr string) string {
		if n, ok := o.addrNames[addr]; ok {
			return n
		}
		return addr
	}
	for _, e := range rep.FailoverEvents {
		f.Events = append(f.Events, FailoverTiming{
			From: name(e.From), To: name(e.To), AfterFaultS: round3(seconds(o, e.AtS, o.fault)),
			Resent: e.Resent, InFlight: e.InFlight,
		})
	}
	return f
}

// round3 keeps milliseconds: the clocks measure no finer than that here,
// and the JSON stays readable. NaN (no such time) becomes -1.
func round3(f float64) float64 {
	if math.IsNaN(f) {
		return -1
	}
	return math.Round(f*1000) / 1000
}

// checks are the conditions for the run.
func checks(r *Result, o observation) []Check {
	var cs []Check
	add := func(name string, ok bool, format string, args ...any) {
		cs = append(cs, Check{Name: name, OK: ok, Detail: fmt.Sprintf(format, args...)})
	}
	rep := o.report
	add("run completed", o.err == nil && rep != nil && rep.Error == "", "%s", orNone(r.Error))
	if rep == nil {
		return cs
	}
	add("no duplicate reached the bench", r.Duplicates == 0, "%d duplicates (the clients dropped %d copies by stamp)", r.Duplicates, r.ClientSuppressed)
	add("no false positive", r.FalsePositives == 0, "%d false positives", r.FalsePositives)
	var late []string
	for _, g := range r.Gaps.Events {
		if !g.Back {
			late = append(late, fmt.Sprintf("%s→%s %.0f ms, ended %.3f s after the restart", g.From, g.To, g.DurationMs, g.EndAfterRestartS))
		}
	}
	add("subscribers back", len(late) == 0 && uint64(len(r.Gaps.Events)) == r.Gaps.Count,
		"%d gaps, longest %.0f ms; within %v of the restart or on another broker; late: %v", r.Gaps.Count, r.Gaps.LongestMs, BackWithin, late)
	add("parts agreed after the fault", r.Times.PartsAgreeAfterFaultS != nil, "%s", secondsOrNever(r.Times.PartsAgreeAfterFaultS))
	add("mesh reconverged after the restart", r.Times.ReconvergedAfterRestartS != nil, "%s", secondsOrNever(r.Times.ReconvergedAfterRestartS))
	if o.scenario.Signal == syscall.SIGTERM && o.scenario.Victim == NonCutVertex {
		// Design §10: a graceful departure of a broker that is no cut
		// vertex loses nothing and leaves no gap.
		add("graceful departure lost nothing", r.UndeliveredBeforeRestart == 0 && r.Failovers.InFlight == 0 && r.Gaps.Count == 0,
			"%d undelivered among the messages sent before the restart, %d in flight to the leaving broker, %d gaps",
			r.UndeliveredBeforeRestart, r.Failovers.InFlight, r.Gaps.Count)
	}
	if o.scenario.Victim == NonCutVertex && r.Times.RestartS != nil {
		// The mesh stayed connected and the victim's clients had moved
		// before it came back: its return forces no loss. (After a cut
		// vertex's restart the partition lasts until the mesh has
		// reconverged, so loss there is forced.)
		victim := Name(o.scenario.victim(o.plan))
		add("rejoin lost nothing", r.UndeliveredFromRestart == 0,
			"%d undelivered among the messages sent from the restart's second on; the restarted %s dropped %g destinations for want of a route",
			r.UndeliveredFromRestart, victim, r.DropsByBroker[victim+"/2"][`drip_route_dropped_destinations_total{reason="no_route"}`])
	}
	return cs
}

func orNone(s string) string {
	if s == "" {
		return "no error"
	}
	return s
}

func secondsOrNever(f *float64) string {
	if f == nil {
		return "never seen"
	}
	return fmt.Sprintf("%.1f s", *f)
}

// Summary is one line per scenario of a run of several.
type Summary struct {
	Scenario              string   `json:"scenario"`
	Victim                string   `json:"victim"`
	Signal                string   `json:"signal"`
	Undelivered           uint64   `json:"undelivered"`
	Ideal                 uint64   `json:"ideal"`
	Duplicates            uint64   `json:"duplicates"`
	FalsePositives        uint64   `json:"false_positives"`
	ClientSuppressed      uint64   `json:"client_suppressed"`
	BrokerSuppressed      float64  `json:"broker_suppressed"`
	Gaps                  uint64   `json:"gaps"`
	LongestGapMs          float64  `json:"longest_gap_ms"`
	Failovers             uint64   `json:"failovers"`
	InFlight              uint64   `json:"in_flight"`
	Resent                uint64   `json:"resent"`
	PartsAgreeAfterFaultS *float64 `json:"parts_agree_after_fault_s"`
	ReconvergedS          *float64 `json:"reconverged_after_restart_s"`
	OK                    bool     `json:"ok"`
	Failed                []string `json:"failed_checks,omitempty"`
}

// Summarize makes the summary line of r.
func Summarize(r *Result) Summary {
	s := Summary{
		Scenario: r.Scenario.Name, Victim: r.Scenario.Victim, Signal: r.Scenario.Signal,
		Undelivered: r.Undelivered, Ideal: r.Ideal, Duplicates: r.Duplicates, FalsePositives: r.FalsePositives,
		ClientSuppressed: r.ClientSuppressed, BrokerSuppressed: r.BrokerCounters[`drip_duplicates_suppressed_total{verdict="duplicate"}`],
		Gaps: r.Gaps.Count, LongestGapMs: r.Gaps.LongestMs, Failovers: r.Failovers.Count, InFlight: r.Failovers.InFlight,
		Resent: r.Failovers.Resent, PartsAgreeAfterFaultS: r.Times.PartsAgreeAfterFaultS, ReconvergedS: r.Times.ReconvergedAfterRestartS,
		OK: r.OK(),
	}
	for _, c := range r.Checks {
		if !c.OK {
			s.Failed = append(s.Failed, c.Name)
		}
	}
	if r.Error != "" && !slices.Contains(s.Failed, "run completed") {
		s.Failed = append(s.Failed, "run completed")
	}
	return s
}
