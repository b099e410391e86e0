package perf

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dripmesh/drip/internal/buildinfo"
)

// Summary is the whole invocation: what ran where, and every case's table
// (the runs are in each case's own JSON).
type Summary struct {
	Command  string        `json:"command"`
	Note     string        `json:"note,omitempty"`
	Started  time.Time     `json:"started"`
	Seconds  Num           `json:"seconds"`
	Machine  Machine       `json:"machine"`
	Settings Settings      `json:"settings"`
	Cases    []*CaseResult `json:"cases"`
	// Failed lists the cases that did not complete, with why.
	Failed map[string]string `json:"failed,omitempty"`
}

// Machine is where the run happened.
type Machine struct {
	Cores     int    `json:"cores"`
	CPU       string `json:"cpu"`
	Kernel    string `json:"kernel"`
	GoVersion string `json:"go_version"`
	Driplab   string `json:"driplab"`
	// Source is what code was measured, as the caller says (make perf:
	// the git commit, +dirty for uncommitted changes).
	Source   string `json:"source,omitempty"`
	Drip     string `json:"drip"`
	NATS     string `json:"nats_server"`
	ActiveMQ string `json:"activemq,omitempty"`
	// LoadBefore and LoadAfter are the 1-minute load averages around the
	// run: the machine is shared, and a high one explains a noisy table.
	LoadBefore string `json:"load_before"`
	LoadAfter  string `json:"load_after"`
}

// Settings are the measurement settings.
type Settings struct {
	Reps               int     `json:"repetitions"`
	Warmup             string  `json:"warmup"`
	Duration           string  `json:"duration"`
	Drain              string  `json:"drain_max"`
	PayloadBytes       int     `json:"payload_bytes"`
	FanOut             int     `json:"fan_out"`
	LatencyRate        float64 `json:"latency_rate"`
	InertFilters       int     `json:"inert_filters"`
	ContentSubscribers int     `json:"content_subscribers"`
	ContentMessages    int     `json:"content_messages"`
	HenjesFilters      []int   `json:"henjes_non_matching_filters"`
	HenjesReplication  []int   `json:"henjes_replication"`
	HenjesWarmup       string  `json:"henjes_warmup"`
	HenjesDuration     string  `json:"henjes_duration"`
	HenjesDrain        string  `json:"henjes_drain_max"`
	HenjesWindow       int     `json:"henjes_window"`
}

// harness runs the cases of one Config.
type harness struct {
	cfg  Config
	dir  string // servers' directories
	runs uint32 // runs started
}

// nextRun names the next run.
func (h *harness) nextRun() uint32 {
	h.runs++
	return h.runs
}

func (h *harness) progress(format string, args ...any) {
	if h.cfg.Progress != nil {
		fmt.Fprintf(h.cfg.Progress, format+"\n", args...)
	}
}

func (h *harness) progressRun(name string, reps int, r RunResult) {
	if h.cfg.Progress == nil {
		return
	}
	what := name
	if r.Variant != "" {
		what += " " + r.Variant
	}
	if r.Error != "" {
		h.progress("%s rep %d/%d %s: FAILED: %s", what, r.Rep, reps, r.System, r.Error)
		return
	}
	line := fmt.Sprintf("%s rep %d/%d %s: delivered %s/s, published %s/s, loss %s, server %.2f cores, %s µs/delivery",
		what, r.Rep, reps, r.System, group(float64(r.DeliveryRate)), group(float64(r.PublishRate)),
		percent(float64(r.Loss)), float64(r.ServerCores), fixed(float64(r.CPUPerDelivery), 2))
	if r.Latency != nil {
		line += fmt.Sprintf(", latency p50 %s p99 %s max %s ms", fixed(float64(r.Latency.P50), 3), fixed(float64(r.Latency.P99), 3), fixed(float64(r.Latency.Max), 3))
	}
	h.progress("%s", line)
}

// Run runs the selected cases and writes their results: perf-CASE.json
// per case, perf-summary.json, the PNG plots, and the Markdown report if
// cfg.Report is set. A case that fails is recorded and the others still
// run; the error then lists the failures. Cancelling ctx stops at once and
// writes what completed.
func Run(ctx context.Context, cfg Config) (*Summary, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	h := &harness{cfg: cfg}
	if cfg.Dir != "" {
		if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
			return nil, err
		}
		h.dir = cfg.Dir
	} else {
		dir, err := os.MkdirTemp("", "driplab-perf-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(dir)
		h.dir = dir
	}
	if err := os.MkdirAll(cfg.Out, 0o755); err != nil {
		return nil, err
	}
	started := time.Now()
	sum := &Summary{Command: cfg.Command, Note: cfg.Note, Started: started.UTC().Truncate(time.Second), Machine: machine(cfg.DripBinary, cfg.DripEnv, cfg.Source),
		Settings: settings(cfg), Failed: map[string]string{}}

	type caseDef struct {
		name, title, description string
		run                      func(context.Context, *CaseResult) error
	}
	defs := []caseDef{
		{CaseOneToOne, "1 publisher → 1 subscriber, max rate",
			"One publisher sends 16-byte payloads as fast as the system takes them; one subscriber counts. drip: both on one broker, the messages carry symbol, n and class, the subscription is symbol = \"DRIP\"; NATS: the same payload on one subject.",
			func(ctx context.Context, cr *CaseResult) error {
				return h.caseMaxRate(ctx, cr, 1, 1, sysDrip, atLeast("≥ 0.5 (aim 1.0)", 0.5), atMost("≤ 1.5", 1.5))
			}},
		{CaseMaps, "1 publisher → 1 subscriber, max rate, a fresh attribute map per message",
			"As one-to-one, with drip's clients written as most users write them (drip-maps): the publisher builds a new client.Attrs map for every message, and the subscriber's deliveries are decoded into Attrs maps. one-to-one's drip clients reuse one client.Fields and subscribe WithFields, drip's allocation-free path.",
			func(ctx context.Context, cr *CaseResult) error {
				return h.caseMaxRate(ctx, cr, 1, 1, sysDripMaps, nil, nil)
			}},
		{CaseFanOut, fmt.Sprintf("1 publisher → %d subscribers, max rate", cfg.FanOut),
			fmt.Sprintf("As one-to-one with %d subscribers, each on its own connection; delivered counts every subscriber's deliveries.", cfg.FanOut),
			func(ctx context.Context, cr *CaseResult) error {
				return h.caseMaxRate(ctx, cr, 1, cfg.FanOut, sysDrip, atLeast("≥ 0.7", 0.7), nil)
			}},
		{CaseTwoBrokers, "2 brokers: publisher on one, subscriber on the other, max rate",
			"drip: two linked brokers with --peer-compression=false (drip-uncompressed: a LAN, where compression costs CPU and saves nothing the link needs), and once with the default compressed links; NATS: a 2-server cluster.",
			func(ctx context.Context, cr *CaseResult) error {
				return h.caseMaxRate(ctx, cr, 2, 1, sysDripNoDeflat, atLeast("≥ 0.5", 0.5), nil)
			}},
		{CaseLatency, fmt.Sprintf("Latency at a fixed %s msg/s", group(cfg.LatencyRate)),
			"One publisher paced at the rate (evenly spaced send times), one subscriber; latency is the subscriber's reading of the harness's monotonic clock minus the send time in the payload, over the messages sent in the window.",
			h.caseLatency},
		{CaseInert, fmt.Sprintf("%s inert filters vs none (drip alone)", group(float64(cfg.InertFilters))),
			fmt.Sprintf("The one-to-one run against a broker holding %d inert subscriptions (symbol = \"DRIP\" && n < -K, distinct K: they share every message's attributes and fail on the range) and against one holding none, interleaved; the ratio is to drip's own plain throughput.", cfg.InertFilters),
			h.caseInert},
		{CaseContent, fmt.Sprintf("Content routing: 1 broker, %d subscribers matching about 5%% each", cfg.ContentSubscribers),
			"Carzaniga09's single-constraint workload (workload.SingleConstraint). drip matches at the broker. NATS as the lab experiments deploy it: every message on one subject, each subscriber decodes every message and keeps those its predicate matches (systems.NATSFilter). The subscribers of both systems run in a child driplab process (`driplab perf subscribers`), one connection each, so that their CPU — NATS's client-side filtering — is counted beside the server's; the publisher's is not counted for either.",
			h.caseContent},
		{CaseHenjes, "Henjes07: received msg/s against filters and replication grade, one broker, drip vs ActiveMQ",
			"Henjes07 §4.5's method: the publisher sends messages with class = 0 as fast as the broker takes them, keeping at most " + group(float64(cfg.HenjesWindow)) + " outstanding (sent, not yet delivered to every matching subscriber; Henjes07 §3.3's saturated publishers, queueing at the publisher, so that no broker still works through a backlog during the other system's next run); r subscribers select class = 0 (the replication grade) and the non-matching filters are inert subscriptions (symbol = \"DRIP\" && n < -K); n_fltr = non-matching + r. ActiveMQ 5.17 over STOMP with JMS selectors (internal/testbed/systems), non-persistent, 1 GB heap as Henjes07 §3.2. The model B = t_rcv + n_fltr·t_fltr + r·t_tx is fitted to each system's received throughput.",
			h.caseHenjes},
	}
	var errs []error
	for _, d := range defs {
		if !cfg.selected(d.name) {
			continue
		}
		if ctx.Err() != nil {
			break
		}
		cr := &CaseResult{Name: d.name, Title: d.title, Description: d.description}
		h.progress("== %s: %s", d.name, d.title)
		began := time.Now()
		err := d.run(ctx, cr)
		cr.Seconds = Num(time.Since(began).Seconds())
		var skip *skipError
		switch {
		case errors.As(err, &skip):
			cr.Skipped = skip.Error()
			h.progress("  skipped: %s", cr.Skipped)
		case err != nil:
			sum.Failed[d.name] = err.Error()
			errs = append(errs, fmt.Errorf("%s: %w", d.name, err))
			h.progress("  FAILED: %v", err)
		}
		if err == nil || len(cr.Runs) > 0 {
			sum.Cases = append(sum.Cases, cr)
			if err := writeJSON(filepath.Join(cfg.Out, "perf-"+d.name+".json"), cr); err != nil {
				errs = append(errs, err)
			}
		}
	}
	sum.Machine.LoadAfter = loadAverage()
	sum.Seconds = Num(time.Since(started).Seconds())
	if err := ctx.Err(); err != nil {
		errs = append(errs, fmt.Errorf("interrupted after %.0f s: %w", time.Since(started).Seconds(), err))
	}
	errs = append(errs, writeOutputs(cfg, sum))
	return sum, errors.Join(errs...)
}

// skipError is a case that cannot run here (ActiveMQ not installed).
type skipError struct{ why string }

func (e *skipError) Error() string { return e.why }

// derive recomputes what sum's cases imply: case 4 from the max-rate
// cases' runs, the caveats the runs carry, the servers' versions.
func derive(sum *Summary) {
	var maxRate []*CaseResult
	cases := sum.Cases[:0]
	for _, c := range sum.Cases {
		if c.Name == CaseCPU {
			continue
		}
		cases = append(cases, c)
		c.Caveats = caveats(c)
		switch c.Name {
		case CaseOneToOne, CaseFanOut, CaseTwoBrokers:
			if len(c.Runs) > 0 {
				maxRate = append(maxRate, c)
			}
		}
		if d, ok := c.Deployments[sysNATS]; ok {
			sum.Machine.NATS = strings.TrimPrefix(d.Version, "nats-server: ")
		}
		if d, ok := c.Deployments[sysActiveMQ]; ok {
			sum.Machine.ActiveMQ = d.Version
		}
	}
	sum.Cases = cases
	if len(maxRate) == 0 {
		return
	}
	// In issue 12's order: after the max-rate cases.
	at := 0
	for i, c := range sum.Cases {
		if c == maxRate[len(maxRate)-1] {
			at = i + 1
		}
	}
	sum.Cases = slices.Insert(sum.Cases, at, cpuCase(maxRate))
}

// Render rewrites the summary, the plots and the report from the JSON a
// run wrote to out: after a change to how results are shown, without
// measuring again.
func Render(out, report string) (*Summary, error) {
	var sum Summary
	b, err := os.ReadFile(filepath.Join(out, "perf-summary.json"))
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(b, &sum); err != nil {
		return nil, fmt.Errorf("%s/perf-summary.json: %w", out, err)
	}
	for i, c := range sum.Cases {
		if c.Name == CaseCPU {
			continue
		}
		path := filepath.Join(out, "perf-"+c.Name+".json")
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		var full CaseResult
		if err := json.Unmarshal(b, &full); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		sum.Cases[i] = &full
	}
	return &sum, writeOutputs(Config{Out: out, Report: report}, &sum)
}

// writeOutputs writes the summary, the plots and the report.
func writeOutputs(cfg Config, sum *Summary) error {
	derive(sum)
	brief := *sum
	brief.Cases = nil
	for _, c := range sum.Cases {
		brief.Cases = append(brief.Cases, c.withoutRuns())
	}
	var errs []error
	errs = append(errs, writeJSON(filepath.Join(cfg.Out, "perf-summary.json"), &brief))
	plots, err := writePlots(cfg.Out, sum)
	errs = append(errs, err)
	if cfg.Report != "" {
		errs = append(errs, writeReport(cfg.Report, cfg.Out, sum, plots))
	}
	return errors.Join(errs...)
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding %s: %w", path, err)
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

func settings(c Config) Settings {
	return Settings{
		Reps: c.Reps, Warmup: c.Warmup.String(), Duration: c.Duration.String(), Drain: c.Drain.String(), PayloadBytes: PayloadSize,
		FanOut: c.FanOut, LatencyRate: c.LatencyRate, InertFilters: c.InertFilters,
		ContentSubscribers: c.ContentSubscribers, ContentMessages: c.ContentMessages,
		HenjesFilters: c.HenjesFilters, HenjesReplication: c.HenjesReplication,
		HenjesWarmup: c.HenjesWarmup.String(), HenjesDuration: c.HenjesDuration.String(), HenjesDrain: c.HenjesDrain.String(), HenjesWindow: c.HenjesWindow,
	}
}

// machine describes this machine and the drip binary measured.
func machine(drip string, env []string, source string) Machine {
	m := Machine{Cores: runtime.NumCPU(), GoVersion: runtime.Version(), Driplab: buildinfo.Of("driplab"), Source: source, LoadBefore: loadAverage()}
	var u unix.Utsname
	if unix.Uname(&u) == nil {
		m.Kernel = unix.ByteSliceToString(u.Sysname[:]) + " " + unix.ByteSliceToString(u.Release[:]) + " " + unix.ByteSliceToString(u.Machine[:])
	}
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
		f.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, drip, "version")
	cmd.Env = append(os.Environ(), env...)
	if out, err := cmd.Output(); err == nil {
		m.Drip = strings.TrimSpace(string(out))
	}
	return m
}

// loadAverage is /proc/loadavg's 1-, 5- and 15-minute averages.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}
