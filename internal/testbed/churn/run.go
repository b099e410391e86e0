package churn

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/dripmesh/drip/internal/bench"
	"github.com/dripmesh/drip/internal/broker"
)

// Config is one run of one scenario.
type Config struct {
	Scenario Scenario
	Seed     uint64   // the mesh's (NewPlan)
	Binary   string   // the drip binary
	Env      []string // added to the brokers' environment
	// Dir receives the topology file and the brokers' logs, one per
	// incarnation; it must exist.
	Dir string
	// The bench's load: drip bench's defaults but the rate.
	Rate         float64
	Subscribers  int
	Publishers   int
	Workload     string // bench.Preset
	WorkloadSeed int64
	Duration     time.Duration // of sending
	FaultAt      time.Duration // after sending starts
	// ConvergeTimeout bounds each wait for the mesh to agree: at the
	// start, before sending, and after the run.
	ConvergeTimeout time.Duration
	Progress        io.Writer // lines as the run goes; nil for none
	Log             *zap.Logger
}

// DefaultConfig is the measurement of docs/results/churn.md for one
// scenario.
func DefaultConfig(s Scenario) Config {
	return Config{
		Scenario: s, Seed: 1, Rate: 500, Subscribers: 80, Publishers: 80, Workload: "single", WorkloadSeed: 1,
		Duration: 40 * time.Second, FaultAt: 10 * time.Second, ConvergeTimeout: time.Minute, Log: zap.NewNop(),
	}
}

// Validate reports the first field of c that cannot work.
func (c Config) Validate() error {
	switch {
	case c.Binary == "":
		return errors.New("churn: no drip binary")
	case c.Dir == "":
		return errors.New("churn: no directory for the topology and the logs")
	case c.FaultAt <= 0 || c.FaultAt >= c.Duration:
		return fmt.Errorf("churn: fault at %v, want within the %v of sending", c.FaultAt, c.Duration)
	case c.FaultAt+c.Scenario.Down >= c.Duration:
		return fmt.Errorf("churn: restart at %v, want within the %v of sending", c.FaultAt+c.Scenario.Down, c.Duration)
	case c.ConvergeTimeout <= 0:
		return fmt.Errorf("churn: converge timeout %v, want more than 0", c.ConvergeTimeout)
	}
	return nil
}

// stopWait bounds the wait for a signalled broker to exit: a graceful
// drain ends within the broker's DrainTimeout, and a kill at once.
var stopWait = broker.DefaultConfig(0, "x").DrainTimeout + 5*time.Second

// Run runs cfg's scenario: it starts the mesh, waits until it agrees,
// runs the bench with the fault in it, waits until the mesh agrees again,
// and kills every broker. The result is returned whenever the plan could
// be drawn, also for a run that failed (Result.Error says why, and the
// error is returned too); every process is gone when Run returns.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Log == nil {
		cfg.Log = zap.NewNop()
	}
	plan, err := NewPlan(cfg.Seed)
	if err != nil {
		return nil, err
	}
	o := observation{
		plan: plan, scenario: cfg.Scenario, addrNames: map[string]string{},
		config: RunConfig{
			Rate: cfg.Rate, Subscribers: cfg.Subscribers, Publishers: cfg.Publishers, Workload: cfg.Workload,
			WorkloadSeed: cfg.WorkloadSeed, Mode: string(bench.Poisson), DurationS: cfg.Duration.Seconds(), FaultAtS: cfg.FaultAt.Seconds(),
		},
	}
	o.err = run(ctx, cfg, &o)
	r := assemble(o)
	if o.err != nil {
		return r, fmt.Errorf("churn: %s: %w", cfg.Scenario.Name, o.err)
	}
	return r, nil
}

func (c Config) progress(format string, args ...any) {
	if c.Progress != nil {
		fmt.Fprintf(c.Progress, "churn: %s: "+format+"\n", append([]any{c.Scenario.Name}, args...)...)
	}
}

// run fills o as the run goes, so that a failure leaves what was seen.
func run(ctx context.Context, cfg Config, o *observation) (err error) {
	workload, err := bench.Preset(cfg.Workload)
	if err != nil {
		return err
	}
	workload.Seed = cfg.WorkloadSeed
	addrs, err := FreeAddrs(Brokers)
	if err != nil {
		return err
	}
	topo, err := o.plan.Topology(addrs)
	if err != nil {
		return err
	}
	b, err := topo.Marshal()
	if err != nil {
		return err
	}
	o.topology = string(b)
	victim := cfg.Scenario.victim(o.plan)
	clients := make([]string, len(o.plan.Clients))
	for i, v := range o.plan.Clients {
		clients[i] = addrs[v].Client
	}
	for v, a := range addrs {
		o.addrNames[a.Client] = Name(v)
	}

	o.processesStarted = time.Now()
	mesh, err := NewMesh(ctx, MeshConfig{Binary: cfg.Binary, Env: cfg.Env, Dir: cfg.Dir, Topology: topo, Log: cfg.Log})
	if err != nil {
		return err
	}
	defer func() {
		if cerr := mesh.Close(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	metrics := make([]string, len(addrs))
	for i, a := range addrs {
		metrics[i] = a.Metrics
	}
	mon := NewMonitor(metrics, mesh.Incarnation)
	monCtx, stopMonitor := context.WithCancel(ctx)
	var monDone sync.WaitGroup
	monDone.Add(1)
	go func() {
		defer monDone.Done()
		mon.Run(monCtx)
	}()
	defer func() {
		stopMonitor()
		monDone.Wait()
		o.rounds, o.counters, o.drops = mon.Rounds(), mon.Counters(), mon.DropsByBroker()
	}()
	all := o.plan.Graph.Components()
	if _, err := waitAgree(ctx, cfg, mon, 3, func(r Round) bool { return Agree(r, all) }); err != nil {
		return fmt.Errorf("the mesh did not converge at the start: %w", err)
	}
	o.converged = time.Now()
	cfg.progress("%d broker processes (%s) converged in %.1f s; topology %s; victim %s (%s), clients on %v",
		Brokers, cfg.Binary, o.converged.Sub(o.processesStarted).Seconds(), mesh.TopologyPath(), Name(victim), cfg.Scenario.Victim, names(o.plan.Clients))

	// The fault runs beside the bench, from when sending starts; it
	// records its times in f and closes faultDone.
	faultCtx, cancelFault := context.WithCancel(ctx)
	defer cancelFault()
	faultDone := make(chan struct{})
	var f faultTimes
	injected := false
	bc := bench.Config{
		Brokers: clients, WorkloadName: cfg.Workload, Workload: workload,
		Subscribers: cfg.Subscribers, Publishers: cfg.Publishers, Mode: bench.Poisson, Rate: cfg.Rate,
		Duration: cfg.Duration, Warmup: 2 * time.Second, Drain: 10 * time.Second, Settle: time.Second,
		ConnectTimeout: 10 * time.Second, FailoverWait: 30 * time.Second, Progress: cfg.Progress,
		Ready: func(ctx context.Context) error {
			_, err := waitAgree(ctx, cfg, mon, 3, func(r Round) bool { return Agree(r, all) && predicatesKnown(r) })
			return err
		},
		OnSendStart: func() {
			o.sendStart, injected = time.Now(), true
			go func() {
				defer close(faultDone)
				f.inject(faultCtx, cfg, mesh, victim, o.sendStart)
			}()
		},
	}
	rep, benchErr := bench.Run(ctx, bc)
	o.report = rep
	if injected {
		cancelFault() // a bench that ended early must not wait for the restart
		<-faultDone
		o.fault, o.exit, o.start = f.fault, f.exit, f.start
	}
	if benchErr != nil {
		return errors.Join(benchErr, f.err) // the bench's errors say "bench:"
	}
	if f.err != nil {
		return f.err
	}
	// The bench ends well after the restart; wait, bounded, for the
	// mesh to agree if it does not yet, so that the time is measured.
	if _, err := waitAgree(ctx, cfg, mon, 1, func(r Round) bool { return Agree(r, all) }); err != nil {
		return fmt.Errorf("the mesh did not converge after the restart: %w", err)
	}
	cfg.progress("done: %d undelivered of %d, %d duplicates", rep.Totals.Undelivered, rep.Totals.Ideal, rep.Totals.Duplicates)
	return nil
}

func names(vs []int) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = Name(v)
	}
	return out
}

// waitAgree waits up to cfg.ConvergeTimeout for stable rounds that
// satisfy ok.
func waitAgree(ctx context.Context, cfg Config, mon *Monitor, stable int, ok func(Round) bool) (Round, error) {
	ctx, cancel := context.WithTimeoutCause(ctx, cfg.ConvergeTimeout, fmt.Errorf("no agreement within %v", cfg.ConvergeTimeout))
	defer cancel()
	return mon.WaitFor(ctx, stable, ok)
}

// predicatesKnown reports whether every broker holds the same number of
// link-state entries, at least one LSA per router and one predicate
// advertisement per broker that has subscribers (a broker without may
// advertise an empty predicate).
func predicatesKnown(r Round) bool {
	advertisers := 0.0
	for _, b := range r.Brokers {
		if b.Advertised > 0 {
			advertisers++
		}
	}
	for _, b := range r.Brokers {
		if b.LSDBEntries != r.Brokers[0].LSDBEntries || b.LSDBEntries < float64(len(r.Brokers))+advertisers {
			return false
		}
	}
	return true
}

// faultTimes are the times of one fault, written by inject before it
// returns.
type faultTimes struct {
	fault, exit, start time.Time
	err                error
}

// inject signals the victim at cfg.FaultAt after sendStart, waits for it
// to exit, and starts it again cfg.Scenario.Down after the signal (or
// when it has exited, if later).
func (f *faultTimes) inject(ctx context.Context, cfg Config, mesh *Mesh, victim int, sendStart time.Time) {
	s := cfg.Scenario
	if sleepUntil(ctx, sendStart.Add(cfg.FaultAt)) != nil {
		return
	}
	f.fault = time.Now()
	if f.err = mesh.Signal(victim, s.Signal); f.err != nil {
		return
	}
	cfg.progress("%s to %s at %.1f s", signalName(s.Signal), Name(victim), f.fault.Sub(sendStart).Seconds())
	if f.exit, f.err = mesh.WaitExit(ctx, victim, stopWait); f.err != nil {
		return
	}
	cfg.progress("%s exited %.1f s after the signal", Name(victim), f.exit.Sub(f.fault).Seconds())
	if sleepUntil(ctx, f.fault.Add(s.Down)) != nil {
		return
	}
	f.start = time.Now()
	if f.err = mesh.Start(victim); f.err != nil {
		return
	}
	cfg.progress("%s started again at %.1f s", Name(victim), f.start.Sub(sendStart).Seconds())
}

func sleepUntil(ctx context.Context, t time.Time) error {
	timer := time.NewTimer(time.Until(t))
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
