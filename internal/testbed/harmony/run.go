package harmony

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/dripmesh/drip/client"
	"github.com/dripmesh/drip/internal/bench"
	"github.com/dripmesh/drip/internal/broker"
	"github.com/dripmesh/drip/internal/content"
	"github.com/dripmesh/drip/internal/linkstate"
	"github.com/dripmesh/drip/internal/node"
	"github.com/dripmesh/drip/internal/testbed/lab"
	"github.com/dripmesh/drip/internal/testbed/systems"
	"github.com/dripmesh/drip/internal/topology"
)

// Scenarios: what a degraded link does for its period.
const (
	// ScenarioDelay raises the link's one-way delay to DegradedDelay
	// (Kim10 §4.1).
	ScenarioDelay = "delay"
	// ScenarioFailure drops everything on the link (Kim10 §4.2).
	ScenarioFailure = "failure"
)

// Variant is one system under test.
type Variant struct {
	Name string `json:"name"`
	// NATS runs a NATS cluster instead of drip.
	NATS bool `json:"nats,omitempty"`
	// drip: RTT link costs checked every BestPathInterval (else hop
	// counts), subscriptions with the deadline, with two paths.
	BestPath bool `json:"best_path,omitempty"`
	Deadline bool `json:"deadline,omitempty"`
	TwoPaths bool `json:"two_paths,omitempty"`
}

// Variants are Kim10's four versions as drip configurations, and NATS.
func Variants() []Variant {
	return []Variant{
		{Name: "DP"},
		{Name: "BP", BestPath: true},
		{Name: "BP+QoS", BestPath: true, Deadline: true},
		{Name: "BP+QoS+MP", BestPath: true, Deadline: true, TwoPaths: true},
		{Name: "NATS", NATS: true},
	}
}

// Network is what the experiment changes and reads: the lab.
type Network interface {
	// Degrade applies scenario to the link a–b; Restore gives it back
	// its delay from the topology, uncut.
	Degrade(ctx context.Context, scenario, a, b string, delay time.Duration) error
	Restore(ctx context.Context, a, b string, delay time.Duration) error
	// Bytes is the total the links have carried so far.
	Bytes(ctx context.Context) (uint64, error)
}

// Config is one run of one scenario.
type Config struct {
	Scenario      string        `json:"scenario"`
	Variants      []Variant     `json:"variants"`
	Periods       int           `json:"periods"`
	Period        time.Duration `json:"period_ns"`
	Probability   float64       `json:"probability"`
	DegradedDelay time.Duration `json:"degraded_delay_ns"`
	Deadline      time.Duration `json:"deadline_ns"`
	// Rate is each topic's messages per second.
	Rate float64 `json:"rate"`
	// Warmup runs before publishing (RTT costs settle); Drain after it.
	Warmup time.Duration `json:"warmup_ns"`
	Drain  time.Duration `json:"drain_ns"`
	// drip's link-state timers for every variant, and the best-path
	// period of BP and above (linkstate.Config.CostInterval).
	HelloInterval    time.Duration `json:"hello_interval_ns"`
	DeadInterval     time.Duration `json:"dead_interval_ns"`
	BestPathInterval time.Duration `json:"best_path_interval_ns"`
	// CostFloor, when positive, is the least RTT a measured link cost
	// advertises (linkstate.Config.CostFloor; zero keeps drip's 1 ms).
	// RTTs below it are taken as equal, and a delay budget as kept.
	CostFloor time.Duration `json:"cost_floor_ns,omitempty"`
	// DialBackoffMax bounds how long a broker waits before it dials a
	// neighbour again after the link failed: how soon a healed link is
	// back in routes.
	DialBackoffMax time.Duration `json:"dial_backoff_max_ns"`
	// Keepalive and SuspectMultiplier are drip's fast failure detection
	// (linkstate.Config): a link silent for SuspectMultiplier keepalives
	// is routed around. TickInterval is how often brokers judge it.
	// Zero multiplier: the dead interval alone.
	Keepalive         time.Duration `json:"keepalive_ns"`
	SuspectMultiplier int           `json:"suspect_multiplier"`
	TickInterval      time.Duration `json:"tick_interval_ns"`
	Seed              uint64        `json:"seed"`

	// Not recorded: where to run.
	Dir       string              `json:"-"` // scratch for the systems' files
	Placement systems.Placement   `json:"-"` // the lab's sites; nil: loopback
	Network   Network             `json:"-"` // nil: no degradation (a smoke run)
	NATS      systems.NATSOptions `json:"-"`
	Progress  io.Writer           `json:"-"` // a line per step; nil for none
}

// DefaultConfig is Kim10 §4 with time scaled by 1/15 (doc.go).
func DefaultConfig(scenario string) Config {
	return Config{
		Scenario: scenario, Variants: Variants(),
		Periods: 10, Period: 12 * time.Second, Probability: 0.12,
		DegradedDelay: 100 * time.Millisecond, Deadline: 50 * time.Millisecond, Rate: 100,
		Warmup: 5 * time.Second, Drain: 3 * time.Second,
		HelloInterval: 250 * time.Millisecond, DeadInterval: time.Second, BestPathInterval: 2 * time.Second,
		DialBackoffMax: 500 * time.Millisecond,
		Keepalive:      20 * time.Millisecond, SuspectMultiplier: 3, TickInterval: 10 * time.Millisecond,
		Seed: 1,
	}
}

// Validate names the first setting that cannot run.
func (c Config) Validate() error {
	switch {
	case c.Scenario != ScenarioDelay && c.Scenario != ScenarioFailure:
		return fmt.Errorf("harmony: scenario %q, want %q or %q", c.Scenario, ScenarioDelay, ScenarioFailure)
	case len(c.Variants) == 0:
		return errors.New("harmony: no variants")
	case c.Periods < 1 || c.Period <= 0:
		return fmt.Errorf("harmony: %d periods of %v, want at least one of positive length", c.Periods, c.Period)
	case c.Probability < 0 || c.Probability > 1:
		return fmt.Errorf("harmony: probability %v, want [0, 1]", c.Probability)
	case c.Rate <= 0 || c.Rate > 10000:
		return fmt.Errorf("harmony: rate %v per topic, want (0, 10000]", c.Rate)
	case c.Deadline <= 0 || c.Deadline > node.MaxDeadline:
		return fmt.Errorf("harmony: deadline %v, want (0, %v]", c.Deadline, node.MaxDeadline)
	case c.Dir == "":
		return errors.New("harmony: no scratch directory")
	}
	return nil
}

func (c Config) progress(format string, args ...any) {
	if c.Progress != nil {
		fmt.Fprintf(c.Progress, "harmony: "+format+"\n", args...)
	}
}

// Run runs every variant of cfg, one after the other, through the same
// schedule of degradations.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	topo := Topology()
	res := &Result{Config: cfg, Pairs: Pairs(), Schedule: Schedule(topo, cfg.Periods, cfg.Probability, cfg.Seed)}
	if cfg.Network == nil {
		res.Schedule = nil
	}
	for _, v := range cfg.Variants {
		cfg.progress("%s: %s, %d periods of %v", cfg.Scenario, v.Name, cfg.Periods, cfg.Period)
		vr, err := runVariant(ctx, cfg, topo, res.Schedule, v)
		if err != nil {
			return nil, fmt.Errorf("harmony: %s: %w", v.Name, err)
		}
		cfg.progress("%s: %s: %s", cfg.Scenario, v.Name, vr.summary())
		res.Variants = append(res.Variants, *vr)
	}
	return res, nil
}

func (c Config) system(v Variant) systems.System {
	if v.NATS {
		return systems.NewNATS(c.NATS)
	}
	o := systems.DripOptions{Configure: func(b *broker.Config) {
		b.LinkState.HelloInterval, b.LinkState.DeadInterval = c.HelloInterval, c.DeadInterval
		if c.DialBackoffMax > 0 {
			b.DialBackoffMax = c.DialBackoffMax
		}
		b.LinkState.Keepalive, b.LinkState.SuspectMultiplier = c.Keepalive, c.SuspectMultiplier
		if c.TickInterval > 0 {
			b.TickInterval = c.TickInterval
		}
		if v.BestPath {
			b.LinkState.CostMode = linkstate.CostRTT
			b.LinkState.CostInterval = c.BestPathInterval
			if c.CostFloor > 0 {
				b.LinkState.CostFloor = uint32(min(c.CostFloor.Microseconds(), math.MaxUint32))
			}
		}
		// Budgets follow the traffic within a hello or two.
		b.DelayBudgetInterval = c.HelloInterval
	}}
	if v.Deadline {
		o.Subscribe = append(o.Subscribe, client.WithDeadline(c.Deadline))
	}
	if v.TwoPaths {
		o.Subscribe = append(o.Subscribe, client.WithTwoPaths())
	}
	return systems.NewDrip(o)
}

// payloadSize: sequence number and send time.
const payloadSize = 16

type pairLog struct {
	mu        sync.Mutex
	latencies []time.Duration
	seen      map[uint64]bool
	dups      int
}

func runVariant(ctx context.Context, cfg Config, topo *topology.Topology, sched []Degradation, v Variant) (*VariantResult, error) {
	dir := filepath.Join(cfg.Dir, v.Name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if err := restoreAll(ctx, cfg, topo); err != nil {
		return nil, err
	}
	dep, err := cfg.system(v).Start(ctx, systems.Spec{Topology: topo, Dir: dir, Placement: cfg.Placement})
	if err != nil {
		return nil, err
	}
	defer dep.Close()
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()

	var endpoints []bench.Endpoint
	defer func() {
		for _, e := range endpoints {
			_ = e.Close()
		}
	}()
	connect := func(site string) (bench.Endpoint, error) {
		e, err := dep.Connect(ctx, site)
		if err == nil {
			endpoints = append(endpoints, e)
		}
		return e, err
	}
	pairs := Pairs()
	logs := make([]*pairLog, len(pairs))
	var readers sync.WaitGroup
	for i, p := range pairs {
		e, err := connect(p.Subscriber)
		if err != nil {
			return nil, err
		}
		sub, err := e.Subscribe(ctx, content.MustParse(fmt.Sprintf("topic = %d", p.Topic)))
		if err != nil {
			return nil, fmt.Errorf("subscribing %s: %w", p, err)
		}
		logs[i] = &pairLog{seen: map[uint64]bool{}}
		readers.Add(1)
		go func() {
			defer readers.Done()
			read(runCtx, sub, logs[i])
		}()
	}
	if err := dep.Ready(ctx); err != nil {
		return nil, err
	}
	if err := sleep(ctx, cfg.Warmup); err != nil {
		return nil, err
	}
	before, err := bytesOf(ctx, cfg)
	if err != nil {
		return nil, err
	}

	published := map[int]*sentLog{}
	start := time.Now()
	var pubs sync.WaitGroup
	pubCtx, stopPublishing := context.WithCancel(runCtx)
	defer stopPublishing()
	pubErr := make(chan error, len(publishers))
	for topic, site := range publishers {
		e, err := connect(site)
		if err != nil {
			return nil, err
		}
		p, err := e.NewPublisher(runCtx)
		if err != nil {
			return nil, err
		}
		n := &sentLog{start: start}
		published[topic] = n
		pubs.Add(1)
		go func() {
			defer pubs.Done()
			pubErr <- publish(pubCtx, p, topic, cfg.Rate, n)
		}()
	}

	var detections []Detection
	for k := range cfg.Periods {
		cuts, err := applyPeriod(ctx, cfg, topo, sched, k)
		if err != nil {
			return nil, err
		}
		if err := sleep(ctx, time.Until(start.Add(time.Duration(k+1)*cfg.Period))); err != nil {
			return nil, err
		}
		if mr, ok := dep.(systems.MetricReader); ok && cfg.Scenario == ScenarioFailure {
			d, err := detected(ctx, mr, k, cuts)
			if err != nil {
				return nil, err
			}
			detections = append(detections, d...)
		}
	}
	stopPublishing()
	pubs.Wait()
	close(pubErr)
	for err := range pubErr {
		if err != nil && !errors.Is(err, context.Canceled) {
			return nil, fmt.Errorf("publishing: %w", err)
		}
	}
	if err := restoreAll(ctx, cfg, topo); err != nil {
		return nil, err
	}
	if err := sleep(ctx, cfg.Drain); err != nil {
		return nil, err
	}
	after, err := bytesOf(ctx, cfg)
	if err != nil {
		return nil, err
	}
	cancel()
	readers.Wait()

	vr := &VariantResult{Variant: v, Info: dep.Info(), LinkBytes: after - before, Detections: detections}
	if mr, ok := dep.(systems.MetricReader); ok {
		if vr.Suspicions, err = suspicions(ctx, mr, topo); err != nil {
			return nil, err
		}
		if vr.Counters, err = counters(ctx, mr, topo); err != nil {
			return nil, err
		}
	}
	for i, p := range pairs {
		vr.Pairs = append(vr.Pairs, pairStats(p, published[p.Topic], logs[i], cfg))
		vr.latencies = append(vr.latencies, logs[i].latencies...)
	}
	vr.total(cfg.Deadline)
	return vr, nil
}

// read records every delivery of sub until ctx ends.
func read(ctx context.Context, sub bench.Subscriber, l *pairLog) {
	defer sub.Close()
	for {
		payload, err := sub.Next(ctx)
		if err != nil {
			return
		}
		now := time.Now()
		if len(payload) != payloadSize {
			continue
		}
		seq := binary.BigEndian.Uint64(payload)
		sent := time.Unix(0, int64(binary.BigEndian.Uint64(payload[8:])))
		l.mu.Lock()
		if l.seen[seq] {
			l.dups++
		} else {
			l.seen[seq] = true
			l.latencies = append(l.latencies, now.Sub(sent))
		}
		l.mu.Unlock()
	}
}

// sentLog is when each of a topic's messages was sent, by sequence
// number, from the start of publishing.
type sentLog struct {
	start time.Time
	mu    sync.Mutex
	at    []time.Duration
}

func (l *sentLog) next() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return uint64(len(l.at))
}

func (l *sentLog) sent(at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.at = append(l.at, at.Sub(l.start))
}

// publish sends topic's messages at rate until ctx ends, logging them.
func publish(ctx context.Context, p bench.Publisher, topic int, rate float64, n *sentLog) error {
	defer p.Close()
	m := content.MessageFrom(map[string]content.Value{"topic": content.Int(int64(topic))})
	tick := time.NewTicker(time.Duration(float64(time.Second) / rate))
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
		payload := make([]byte, payloadSize)
		now := time.Now()
		binary.BigEndian.PutUint64(payload, n.next())
		binary.BigEndian.PutUint64(payload[8:], uint64(now.UnixNano()))
		if err := p.Publish(m, payload); err != nil {
			return err
		}
		n.sent(now)
	}
}

// applyPeriod degrades the links of period k and restores those of k−1
// that are not degraded again.
// applyPeriod degrades the links of period k and restores those of k−1
// that are not degraded again, and returns when each fresh degradation
// was applied.
func applyPeriod(ctx context.Context, cfg Config, topo *topology.Topology, sched []Degradation, k int) (map[[2]string]time.Time, error) {
	if cfg.Network == nil {
		return nil, nil
	}
	applied := map[[2]string]time.Time{}
	now, prev := degradedIn(sched, k), degradedIn(sched, k-1)
	for _, l := range topo.Links {
		key := [2]string{l.A, l.B}
		switch {
		case now[key] && !prev[key]:
			at := time.Now()
			if err := cfg.Network.Degrade(ctx, cfg.Scenario, l.A, l.B, cfg.DegradedDelay); err != nil {
				return nil, err
			}
			applied[key] = at
		case prev[key] && !now[key]:
			if err := cfg.Network.Restore(ctx, l.A, l.B, time.Duration(l.Delay)); err != nil {
				return nil, err
			}
		}
	}
	return applied, nil
}

// detected reads, at both ends of each link cut in period k, when the
// broker last suspected the link (drip_link_suspected_timestamp_seconds),
// and returns how long after the cut that was.
func detected(ctx context.Context, mr systems.MetricReader, k int, cuts map[[2]string]time.Time) ([]Detection, error) {
	var out []Detection
	for _, key := range slices.SortedFunc(maps.Keys(cuts), func(a, b [2]string) int { return cmp.Compare(a[0]+" "+a[1], b[0]+" "+b[1]) }) {
		at := cuts[key]
		d := Detection{Period: k, A: key[0], B: key[1]}
		for i, end := range [][2]string{{key[0], key[1]}, {key[1], key[0]}} {
			got, err := mr.Metric(ctx, end[0], "drip_link_suspected_timestamp_seconds", "peer")
			if err != nil {
				return nil, err
			}
			ms := -1.0 // not suspected since the cut
			if ts := got[end[1]]; ts > 0 {
				if since := time.Unix(0, int64(ts*1e9)).Sub(at); since >= 0 {
					ms = float64(since.Microseconds()) / 1000
				}
			}
			d.Ms[i] = ms
		}
		out = append(out, d)
	}
	return out, nil
}

// countedDrops are the counters whose sum over the brokers accounts for
// what a variant lost, or sent twice, with the label each is split by.
var countedDrops = []struct{ name, label string }{
	{"drip_bundles_refused_total", "reason"},
	{"drip_route_dropped_destinations_total", "reason"},
	{"drip_link_dropped_bundles_total", "reason"},
	{"drip_subscriber_dropped_total", ""},
	{"drip_deadline_missed_total", ""},
	{"drip_bounced_bundles_total", "outcome"},
	{"drip_bundles_held_for_link_total", ""},
	{"drip_bundles_replayed_total", ""},
	{"drip_duplicates_suppressed_total", "verdict"},
	{"drip_redundant_copies_suppressed_total", ""},
}

// counters sums countedDrops over every broker, as name{label="value"},
// leaving out what is zero.
func counters(ctx context.Context, mr systems.MetricReader, topo *topology.Topology) (map[string]float64, error) {
	out := map[string]float64{}
	for _, c := range countedDrops {
		got, err := systems.SumOverBrokers(ctx, mr, topo, c.name, c.label)
		if err != nil {
			return nil, err
		}
		for k, v := range got {
			key := c.name
			if c.label != "" {
				key += "{" + c.label + "=\"" + k + "\"}"
			}
			if v != 0 {
				out[key] = v
			}
		}
	}
	return out, nil
}

// suspicions sums drip_link_suspected_total over every broker: with the
// detections, it tells false alarms from failures.
func suspicions(ctx context.Context, mr systems.MetricReader, topo *topology.Topology) (float64, error) {
	got, err := systems.SumOverBrokers(ctx, mr, topo, "drip_link_suspected_total", "peer")
	var total float64
	for _, v := range got {
		total += v
	}
	return total, err
}

func degradedIn(sched []Degradation, k int) map[[2]string]bool {
	out := map[[2]string]bool{}
	for _, d := range sched {
		if d.Period == k {
			out[[2]string{d.A, d.B}] = true
		}
	}
	return out
}

func restoreAll(ctx context.Context, cfg Config, topo *topology.Topology) error {
	if cfg.Network == nil {
		return nil
	}
	for _, l := range topo.Links {
		if err := cfg.Network.Restore(ctx, l.A, l.B, time.Duration(l.Delay)); err != nil {
			return err
		}
	}
	return nil
}

func bytesOf(ctx context.Context, cfg Config) (uint64, error) {
	if cfg.Network == nil {
		return 0, nil
	}
	return cfg.Network.Bytes(ctx)
}

func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// LabNetwork degrades the links of a lab.
type LabNetwork struct{ Lab *lab.Lab }

// Degrade raises the link's delay (ScenarioDelay) or cuts it.
func (n LabNetwork) Degrade(ctx context.Context, scenario, a, b string, delay time.Duration) error {
	if scenario == ScenarioFailure {
		return n.Lab.Cut(ctx, a, b)
	}
	return n.Lab.Set(ctx, a, b, lab.Change{Delay: &delay})
}

// Restore heals the link and gives it back its delay.
func (n LabNetwork) Restore(ctx context.Context, a, b string, delay time.Duration) error {
	if err := n.Lab.Heal(ctx, a, b); err != nil {
		return err
	}
	return n.Lab.Set(ctx, a, b, lab.Change{Delay: &delay})
}

// Bytes sums what every link direction has serialised.
func (n LabNetwork) Bytes(ctx context.Context) (uint64, error) {
	st, err := n.Lab.Status(ctx)
	if err != nil {
		return 0, err
	}
	var total uint64
	for _, l := range st.Links {
		total += l.Sent
	}
	return total, nil
}
