package experiment

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dripmesh/drip/internal/bench"
	"github.com/dripmesh/drip/internal/testbed/lab"
	"github.com/dripmesh/drip/internal/testbed/systems"
)

// Config is one invocation of the runner: a scenario on some systems.
type Config struct {
	Scenario Scenario
	Systems  []systems.System
	// Placement runs the systems; nil is systems.Loopback. PlacementName
	// goes into the results ("loopback", "lab NAME").
	Placement     systems.Placement
	PlacementName string
	// Links, when set, replaces the systems' own link counters (the lab
	// counts its emulated links for every system alike).
	Links systems.LinkCounter
	// Scale multiplies the scenario's per-client rates, to fit the
	// machine; 0 means 1.
	Scale float64
	// Duration, when set, replaces the scenario's sending time.
	Duration time.Duration
	// ReadyTimeout, when set, replaces how long a system may take to
	// settle its routing once the clients have subscribed (default:
	// readyTimeout of the scenario's sites).
	ReadyTimeout time.Duration
	// Dir receives the systems' configuration, logs and data; a temporary
	// directory (removed afterwards) when empty.
	Dir string
	// Progress receives a line per second and per phase; nil for none.
	Progress io.Writer
	// Lab, when set, runs every system of the scenario in a lab built for
	// it (see LabConfig); Placement and Links must then be unset.
	Lab *LabConfig
	// Faults are injected while the clients send (a cut needs Lab, a
	// restart a system whose deployment is a systems.Restarter).
	Faults []Fault

	lab *lab.Lab // the running lab, set by Run
}

// Run runs cfg.Scenario on each system in turn and returns one result per
// system. A system that fails yields a result with Error set, and the
// others still run; Run itself fails only on a bad configuration or when
// ctx ends.
func Run(ctx context.Context, cfg Config) ([]*Result, error) {
	if len(cfg.Systems) == 0 {
		return nil, fmt.Errorf("experiment: no systems to run")
	}
	if cfg.Scale == 0 {
		cfg.Scale = 1
	}
	if cfg.Scale < 0 {
		return nil, fmt.Errorf("experiment: scale %v, want a positive factor", cfg.Scale)
	}
	if cfg.Duration > 0 {
		cfg.Scenario.Duration = cfg.Duration
	}
	for _, f := range cfg.Faults {
		if err := f.check(cfg.Scenario.Topology); err != nil {
			return nil, fmt.Errorf("experiment: %w", err)
		}
		if f.Kind == FaultCut && cfg.Lab == nil {
			return nil, fmt.Errorf("experiment: fault %s: a link cut needs a lab", f)
		}
	}
	if cfg.Lab != nil {
		if cfg.Placement != nil || cfg.Links != nil {
			return nil, fmt.Errorf("experiment: a lab places the systems and counts the links itself; unset Placement and Links")
		}
		scale := cfg.Lab.BandwidthScale
		if scale == 0 {
			scale = cfg.Scale
		}
		if scale < 0 {
			return nil, fmt.Errorf("experiment: lab bandwidth scale %v, want a positive factor", scale)
		}
		cfg.Scenario.Topology = labTopology(cfg.Scenario.Topology, scale, cfg.Lab.Delay)
		cfg.logf("%s: starting lab", cfg.Scenario.Name)
		l, err := upLab(ctx, cfg)
		if err != nil {
			return nil, err
		}
		defer func() {
			if err := l.Down(context.Background()); err != nil {
				cfg.logf("%s: removing lab %s: %v", cfg.Scenario.Name, l.Name(), err)
			}
		}()
		cfg.lab, cfg.Placement, cfg.Links = l, LabPlacement{l}, labLinks{l}
		cfg.PlacementName = labPlacementName(l, cfg.Scenario.Topology, cfg.Lab.Delay)
	}
	if cfg.Placement == nil {
		cfg.Placement, cfg.PlacementName = systems.Loopback{}, "loopback"
	}
	if cfg.Dir != "" {
		// Broker processes run in their own directories: they need
		// absolute paths to the files generated for them.
		dir, err := filepath.Abs(cfg.Dir)
		if err != nil {
			return nil, fmt.Errorf("experiment: %w", err)
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("experiment: %w", err)
		}
		cfg.Dir = dir
	} else {
		dir, err := os.MkdirTemp("", "drip-experiment-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(dir)
		cfg.Dir = dir
	}
	var out []*Result
	for _, sys := range cfg.Systems {
		r := runOne(ctx, cfg, sys)
		if ctx.Err() != nil {
			return out, ctx.Err()
		}
		out = append(out, r)
	}
	return out, nil
}

func (c Config) logf(format string, args ...any) {
	if c.Progress != nil {
		fmt.Fprintf(c.Progress, format+"\n", args...)
	}
}

func runOne(ctx context.Context, cfg Config, sys systems.System) *Result {
	sc := cfg.Scenario
	r := newResult(cfg, sys.Name())
	fail := func(err error) *Result {
		r.Error = err.Error()
		cfg.logf("%s/%s: %v", sc.Name, sys.Name(), err)
		return r
	}
	if err := sys.Available(); err != nil {
		return fail(err)
	}
	dir, err := os.MkdirTemp(cfg.Dir, sc.Name+"-"+sys.Name()+"-")
	if err != nil {
		return fail(err)
	}
	cfg.logf("%s/%s: starting %d site(s)", sc.Name, sys.Name(), len(sc.Topology.Brokers))
	startCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	brokers := startBrokers()
	dep, err := sys.Start(startCtx, systems.Spec{Topology: sc.Topology, Dir: dir, Placement: cfg.Placement})
	cancel()
	if err != nil {
		return fail(err)
	}
	defer func() {
		if err := dep.Close(); err != nil {
			cfg.logf("%s/%s: stopping: %v", sc.Name, sys.Name(), err)
		}
		// Close has waited for the brokers' processes: their CPU is
		// now the children's.
		brokers.stop(r.Testbed)
	}()
	r.System = dep.Info()

	links := cfg.Links
	if links == nil {
		links = dep.Links()
	}
	sampler := &linkSampler{counter: links}
	var sites []string
	for _, b := range sc.Topology.Brokers {
		sites = append(sites, b.Name)
	}
	bc := benchConfig(cfg, sites)
	bc.Connect = dep.Connect
	bc.Ready = func(ctx context.Context) error {
		cfg.logf("%s/%s: subscriptions installed; waiting for routing to settle", sc.Name, sys.Name())
		limit := cfg.ReadyTimeout
		if limit <= 0 {
			limit = readyTimeout(len(sc.Topology.Brokers))
		}
		readyCtx, cancel := context.WithTimeout(ctx, limit)
		defer cancel()
		t0 := time.Now()
		err := dep.Ready(readyCtx)
		r.SettleSeconds = time.Since(t0).Seconds()
		if err == nil {
			sampler.baseline(ctx)
		}
		return err
	}
	cost := startCost()
	var faults *faultInjector
	bc.OnSendStart = func() {
		cost.sendStarted()
		sampler.start(ctx)
		if len(cfg.Faults) > 0 {
			var links linkCutter
			if cfg.lab != nil {
				links = cfg.lab
			}
			faults = startFaults(ctx, cfg.Faults, links, dep, time.Now(), func(format string, args ...any) {
				cfg.logf(sc.Name+"/"+sys.Name()+": "+format, args...)
			})
		}
	}
	if cfg.Progress != nil {
		bc.Progress = prefixWriter{prefix: sc.Name + "/" + sys.Name() + " ", w: cfg.Progress}
	}
	var meter *labMeter
	if cfg.lab != nil {
		meter = startLabMeter(ctx, cfg.lab)
	}
	rep, err := bench.Run(ctx, bc)
	if faults != nil {
		r.Faults = faults.wait()
	}
	samples, sampleErr := sampler.stop(ctx)
	if meter != nil {
		var labErr error
		if r.Lab, labErr = meter.stop(ctx); labErr != nil {
			cfg.logf("%s/%s: lab counters: %v", sc.Name, sys.Name(), labErr)
		}
	}
	r.Testbed = cost.stop(r.Lab)
	if err != nil {
		return fail(err)
	}
	r.fill(rep, samples, sc.Topology)
	if sampleErr != nil {
		r.LinkError = sampleErr.Error()
	}
	cfg.logf("%s/%s: sent %d, delivered %d of %d (%.1f%%), false positives %d, duplicates %d",
		sc.Name, sys.Name(), rep.Totals.Sent, rep.Totals.Delivered, rep.Totals.Ideal,
		100*ratio(rep.Totals.Delivered, rep.Totals.Ideal), rep.Totals.FalsePositives, rep.Totals.Duplicates)
	return r
}

// readyTimeout is how long a system may take to settle its routing once
// the clients have subscribed: two minutes, or 4 s per site on larger
// meshes. At 42 sites drip settled in 29–109 s and NATS in 81 s once and
// not within two minutes once (docs/results/experiments/scale).
func readyTimeout(sites int) time.Duration {
	return max(2*time.Minute, time.Duration(sites)*4*time.Second)
}

// benchConfig is the scenario as the bench runs it: every client
// subscribes and publishes, at the scaled total rate.
func benchConfig(cfg Config, sites []string) bench.Config {
	sc := cfg.Scenario
	n := float64(sc.Clients)
	bc := bench.Config{
		Brokers: sites, WorkloadName: sc.WorkloadName, Workload: sc.Workload,
		Subscribers: sc.Clients, Publishers: sc.Clients, Mode: sc.Mode,
		Rate:     sc.RateEnd * n * cfg.Scale,
		Duration: sc.Duration, Warmup: sc.Warmup, Drain: sc.Drain, Settle: 500 * time.Millisecond,
		ConnectTimeout: 30 * time.Second,
		// A system that stops taking messages under the ramp is a result
		// (Carzaniga09 §5.2.1: ActiveMQ's "instability and congestion").
		CutStuckPublishers: true,
	}
	if sc.Mode == bench.Ramp {
		bc.RateStart = sc.RateStart * n * cfg.Scale
	}
	return bc
}

func ratio(a, b uint64) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// linkSampler reads the link counters: once before sending starts (the
// baseline), once a second from the start of sending, and once more when
// the run is over, so that the reads span all of the run's traffic however
// long a read takes. A read is dated at its middle: reading every broker's
// counters took 6 s once on a loaded 2-core machine, and a read dated at
// its end then put the counters of the start of sending after the run, so
// that no second of the run saw traffic on any link.
type linkSampler struct {
	counter systems.LinkCounter

	mu     sync.Mutex
	reads  []linkRead
	t0     time.Time // when sending started
	err    error
	cancel context.CancelFunc
	done   chan struct{}
}

type linkSample struct {
	at    time.Duration // since sending started
	bytes map[systems.Direction]uint64
}

type linkRead struct {
	at    time.Time // the middle of the read
	bytes map[systems.Direction]uint64
}

func (s *linkSampler) read(ctx context.Context) {
	begin := time.Now()
	b, err := s.counter.LinkBytes(ctx)
	end := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		if s.err == nil && ctx.Err() == nil {
			s.err = err
		}
		return
	}
	s.reads = append(s.reads, linkRead{at: begin.Add(end.Sub(begin) / 2), bytes: b})
}

// baseline reads the counters before sending starts.
func (s *linkSampler) baseline(ctx context.Context) {
	if s.counter != nil {
		s.read(ctx)
	}
}

func (s *linkSampler) start(ctx context.Context) {
	if s.counter == nil {
		return
	}
	s.mu.Lock()
	s.t0 = time.Now()
	s.mu.Unlock()
	ctx, s.cancel = context.WithCancel(ctx)
	s.done = make(chan struct{})
	go func() {
		defer close(s.done)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			s.read(ctx)
			select {
			case <-tick.C:
			case <-ctx.Done():
				return
			}
		}
	}()
}

// stop ends the reads once a second and reads the counters a last time
// (unless ctx is done): the samples, dated from the start of sending.
func (s *linkSampler) stop(ctx context.Context) ([]linkSample, error) {
	if s.cancel == nil {
		return nil, nil
	}
	s.cancel()
	<-s.done
	if ctx.Err() == nil {
		s.read(ctx)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]linkSample, 0, len(s.reads))
	for _, r := range s.reads {
		out = append(out, linkSample{at: r.at.Sub(s.t0), bytes: r.bytes})
	}
	return out, s.err
}

// prefixWriter prefixes each write (the bench writes whole lines).
type prefixWriter struct {
	prefix string
	w      io.Writer
}

func (p prefixWriter) Write(b []byte) (int, error) {
	_, err := io.WriteString(p.w, p.prefix+strings.TrimPrefix(string(b), "bench: "))
	return len(b), err
}

// environment describes the machine, for the record.
func environment(placement string) Environment {
	e := Environment{Placement: placement, CPUs: runtime.NumCPU(), GoVersion: runtime.Version(), Date: time.Now().UTC().Format(time.RFC3339)}
	var u unix.Utsname
	if unix.Uname(&u) == nil {
		e.Kernel = unix.ByteSliceToString(u.Sysname[:]) + " " + unix.ByteSliceToString(u.Release[:])
	}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "model name"); ok {
				e.CPU = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
	}
	return e
}
