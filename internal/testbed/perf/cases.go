package perf

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/dripmesh/drip/internal/content"
	"github.com/dripmesh/drip/internal/workload"
)

// plainPlan is a run of the plain stream: one publisher at the first
// broker, nSubs subscribers with pred at the last (NATS subscribes to the
// plain subject instead), probed before measuring.
func (h *harness) plainPlan(t *target, pred string, nSubs int, rate float64, latency bool, warmup, duration, drain time.Duration) runPlan {
	return runPlan{
		system: t.name, servers: t.servers, dropped: t.dropped,
		subs: func(ctx context.Context, clk Clock, lat *latencies) (subscriberSet, error) {
			subs := make(localSubs, nSubs)
			err := parallel(ctx, nSubs, 8, func(ctx context.Context, i int) error {
				var err error
				switch t.system {
				case sysNATS:
					subs[i], err = natsSubscribe(t.last().Client, clk, lat)
				case sysActiveMQ:
					subs[i], err = amqSubscribe(ctx, t.dep, t.last().Site, pred, clk)
				default:
					subs[i], err = dripSubscribe(ctx, t.last().Client, pred, clk, lat, t.system != sysDripMaps)
				}
				return err
			})
			if err != nil {
				_ = opened(subs).close()
				return nil, err
			}
			return subs, nil
		},
		pub: func(ctx context.Context) (pub, error) {
			switch t.system {
			case sysNATS:
				return newNATSPub(t.first().Client, stream{})
			case sysActiveMQ:
				return newAMQPub(ctx, t.first().Client)
			case sysDripMaps:
				return newDripMapPub(ctx, t.first().Client)
			default:
				return newDripPub(ctx, t.first().Client, stream{})
			}
		},
		probe: true, rate: rate, latency: latency,
		expected: func(n uint64) uint64 { return n * uint64(nSubs) },
		warmup:   warmup, duration: duration, drain: drain,
	}
}

// opened are the subscribers of subs that were opened.
func opened(subs localSubs) localSubs {
	var out localSubs
	for _, s := range subs {
		if s != nil {
			out = append(out, s)
		}
	}
	return out
}

// interleave runs each target's plan once per repetition, in turn: drip,
// NATS, drip, NATS, ...
func (h *harness) interleave(ctx context.Context, cr *CaseResult, reps int, ts []*target, plan func(*target) runPlan) error {
	for rep := 1; rep <= reps; rep++ {
		for _, t := range ts {
			r, err := plan(t).execute(ctx, h.nextRun(), rep)
			if err != nil {
				return err
			}
			h.progressRun(cr.Name, reps, r)
			cr.Runs = append(cr.Runs, r)
		}
	}
	return nil
}

// record notes what each target ran.
func record(cr *CaseResult, ts ...*target) {
	if cr.Deployments == nil {
		cr.Deployments = map[string]DeploymentInfo{}
	}
	for _, t := range ts {
		cr.Deployments[t.name] = DeploymentInfo{Version: t.info.Version, Brokers: len(t.servers), Config: t.info.Config}
	}
}

// maxRateRows are the rows of a max-rate comparison of a with b: g is
// the delivered throughput's target, cpu the server CPU per delivery's
// (nil: none).
func maxRateRows(runs []RunResult, a, b string, g, cpu *goal) []Row {
	return []Row{
		makeRow(runs, mDelivered, a, b, "", g),
		makeRow(runs, mPublished, a, b, "", nil),
		makeRow(runs, mLoss, a, b, "", worstAtMost(a+" ≤ 0.1% in every run", 0.001)),
		makeRow(runs, mLost, a, b, "", nil),
		makeRow(runs, mDropped, a, b, "", nil),
		makeRow(runs, mCPU, a, b, "", cpu),
		makeRow(runs, mCores, a, b, "", nil),
	}
}

// caseMaxRate is cases 1–3: one publisher sending as fast as the system
// takes messages, nSubs subscribers that only count.
func (h *harness) caseMaxRate(ctx context.Context, cr *CaseResult, brokers, nSubs int, dripSys string, g, cpu *goal) (err error) {
	var ts []*target
	defer func() { err = errors.Join(err, closeAll(ts...)) }()
	for _, s := range []struct{ name, system string }{{dripSys, dripSys}, {sysNATS, sysNATS}} {
		t, err := h.deploy(ctx, s.name, s.system, brokers)
		if err != nil {
			return err
		}
		ts = append(ts, t)
	}
	record(cr, ts...)
	cr.Systems = []string{dripSys, sysNATS}
	plan := func(t *target) runPlan {
		return h.plainPlan(t, plainPredicate, nSubs, 0, false, h.cfg.Warmup, h.cfg.Duration, h.cfg.Drain)
	}
	if err := h.interleave(ctx, cr, h.cfg.Reps, ts, plan); err != nil {
		return err
	}
	cr.Rows = maxRateRows(cr.Runs, dripSys, sysNATS, g, cpu)
	if brokers > 1 && dripSys == sysDripNoDeflat {
		// The default, compressed links, once, so that the reader sees
		// what DEFLATE costs where the link is not the bottleneck.
		t, err := h.deploy(ctx, sysDrip, sysDrip, brokers)
		if err != nil {
			return err
		}
		ts = append(ts, t)
		record(cr, t)
		r, err := plan(t).execute(ctx, h.nextRun(), 1)
		if err != nil {
			return err
		}
		h.progressRun(cr.Name, 1, r)
		cr.Runs = append(cr.Runs, r)
		cr.Systems = append(cr.Systems, sysDrip)
		row := makeRow(cr.Runs, mDelivered, sysDrip, sysDripNoDeflat, "", nil)
		row.Metric = "delivered msg/s, compressed links (default) vs --peer-compression=false (one run)"
		cpu := makeRow(cr.Runs, mCPU, sysDrip, sysDripNoDeflat, "", nil)
		cpu.Metric = "server CPU µs per delivery, compressed vs uncompressed (one run)"
		cr.Rows = append(cr.Rows, row, cpu)
	}
	return nil
}

// cpuCase is case 4, from the max-rate cases' runs: the brokers' CPU per
// delivered message, side by side. Its columns are drip (the variant each
// case ran: drip-uncompressed for two brokers) and NATS.
func cpuCase(cases []*CaseResult) *CaseResult {
	cr := &CaseResult{Name: CaseCPU, Title: "Broker CPU per delivered message", Systems: []string{sysDrip, sysNATS},
		Description: "The servers' CPU time (/proc/PID/stat, user + system, every broker of the system) over each run's window, " +
			"divided by the deliveries counted in it; from the max-rate runs above. Lower is better; the ratio is drip/NATS."}
	for _, c := range cases {
		if len(c.Systems) < 2 {
			continue
		}
		for _, m := range []metric{mCPU, mCores} {
			row := makeRow(c.Runs, m, c.Systems[0], c.Systems[1], "", nil)
			row.Metric = fmt.Sprintf("%s, %s", m.name, c.Name)
			if c.Systems[0] != sysDrip {
				row.Metric += " (" + c.Systems[0] + ")"
				row.Values[sysDrip], row.Reps[sysDrip] = row.Values[c.Systems[0]], row.Reps[c.Systems[0]]
				delete(row.Values, c.Systems[0])
				delete(row.Reps, c.Systems[0])
				row.RatioOf = sysDrip + "/" + c.Systems[1]
			}
			cr.Rows = append(cr.Rows, row)
		}
	}
	return cr
}

// caseLatency is case 5: a publisher paced at LatencyRate, one
// subscriber, latency from the payload's send time.
func (h *harness) caseLatency(ctx context.Context, cr *CaseResult) (err error) {
	var ts []*target
	defer func() { err = errors.Join(err, closeAll(ts...)) }()
	for _, s := range []string{sysDrip, sysNATS} {
		t, err := h.deploy(ctx, s, s, 1)
		if err != nil {
			return err
		}
		ts = append(ts, t)
	}
	record(cr, ts...)
	cr.Systems = []string{sysDrip, sysNATS}
	plan := func(t *target) runPlan {
		return h.plainPlan(t, plainPredicate, 1, h.cfg.LatencyRate, true, h.cfg.Warmup, h.cfg.Duration, h.cfg.Drain)
	}
	if err := h.interleave(ctx, cr, h.cfg.Reps, ts, plan); err != nil {
		return err
	}
	lat := func(name string, get func(*LatencySummary) Num) metric {
		return metric{name: name, unit: "ms", get: func(r RunResult) float64 {
			if r.Latency == nil {
				return math.NaN()
			}
			return float64(get(r.Latency))
		}}
	}
	cr.Rows = []Row{
		makeRow(cr.Runs, lat("latency p50 ms", func(l *LatencySummary) Num { return l.P50 }), sysDrip, sysNATS, "", nil),
		makeRow(cr.Runs, lat("latency p99 ms", func(l *LatencySummary) Num { return l.P99 }), sysDrip, sysNATS, "", atMost("≤ 1.5", 1.5)),
		makeRow(cr.Runs, lat("latency max ms", func(l *LatencySummary) Num { return l.Max }), sysDrip, sysNATS, "", nil),
		makeRow(cr.Runs, mPublished, sysDrip, sysNATS, "", nil),
		makeRow(cr.Runs, mLoss, sysDrip, sysNATS, "", worstAtMost("drip ≤ 0.1% in every run", 0.001)),
	}
	return nil
}

// dripInert is the name of the drip broker that holds the inert filters.
const dripInert = "drip+inert"

// caseInert is case 6: the 1→1 max-rate run against a broker that holds
// InertFilters inert filters and against one that holds none, interleaved.
func (h *harness) caseInert(ctx context.Context, cr *CaseResult) (err error) {
	var ts []*target
	var inert *inertSet
	defer func() {
		if inert != nil {
			err = errors.Join(err, inert.close())
		}
		err = errors.Join(err, closeAll(ts...))
	}()
	for _, name := range []string{sysDrip, dripInert} {
		// Both with the same budget, so that the ratio is the filters'.
		t, err := h.deploy(ctx, name, sysDrip, 1, manyStreamsArgs...)
		if err != nil {
			return err
		}
		ts = append(ts, t)
	}
	record(cr, ts...)
	inert = newInertSet(ts[1])
	began := time.Now()
	if err := inert.grow(ctx, h.cfg.InertFilters); err != nil {
		return err
	}
	h.progress("  installed %d inert filters at %s in %v", h.cfg.InertFilters, dripInert, time.Since(began).Round(time.Millisecond))
	cr.Notes = append(cr.Notes, fmt.Sprintf("Installing the %d inert filters (one subscription each) took %.1f s.", h.cfg.InertFilters, time.Since(began).Seconds()))
	cr.Systems = []string{dripInert, sysDrip}
	plan := func(t *target) runPlan {
		return h.plainPlan(t, plainPredicate, 1, 0, false, h.cfg.Warmup, h.cfg.Duration, h.cfg.Drain)
	}
	// The plain broker first, as drip runs first elsewhere.
	if err := h.interleave(ctx, cr, h.cfg.Reps, []*target{ts[0], ts[1]}, plan); err != nil {
		return err
	}
	cr.Rows = []Row{
		makeRow(cr.Runs, mDelivered, dripInert, sysDrip, "", atLeast("≥ 0.7", 0.7)),
		makeRow(cr.Runs, mPublished, dripInert, sysDrip, "", nil),
		makeRow(cr.Runs, mLoss, dripInert, sysDrip, "", worstAtMost("≤ 0.1% in every run", 0.001)),
		makeRow(cr.Runs, mCPU, dripInert, sysDrip, "", nil),
	}
	return nil
}

// contentWorkload is the content-routing case's predicates and messages:
// Carzaniga09's single-constraint workload (workload.SingleConstraint), and
// for each message the number of subscribers whose predicate it matches.
type contentWorkload struct {
	preds   []string
	msgs    []content.Message
	matches []uint64 // per message
	prefix  []uint64 // prefix[i] = matches of msgs[:i]
}

func newContentWorkload(subscribers, messages int) (*contentWorkload, error) {
	g, err := workload.New(workload.SingleConstraint())
	if err != nil {
		return nil, err
	}
	w := &contentWorkload{msgs: g.Messages(messages)}
	preds := g.Predicates(subscribers)
	for _, p := range preds {
		w.preds = append(w.preds, p.String())
	}
	w.prefix = make([]uint64, len(w.msgs)+1)
	for i, m := range w.msgs {
		n := uint64(0)
		for _, p := range preds {
			if p.Matches(m) {
				n++
			}
		}
		w.matches = append(w.matches, n)
		w.prefix[i+1] = w.prefix[i] + n
	}
	return w, nil
}

// expected is the matching deliveries of the first n messages sent.
func (w *contentWorkload) expected(n uint64) uint64 {
	l := uint64(len(w.msgs))
	return n/l*w.prefix[l] + w.prefix[n%l]
}

// replication is the mean fraction of subscribers a message matches.
func (w *contentWorkload) replication() float64 {
	return float64(w.prefix[len(w.msgs)]) / float64(len(w.msgs)) / float64(len(w.preds))
}

// caseContent is case 7: one broker, ContentSubscribers subscribers with
// single-constraint predicates. drip matches at the broker; NATS sends
// every message to every subscriber, which filters it (systems.NATSFilter).
// The subscribers run in a child process, whose CPU is counted with the
// server's.
func (h *harness) caseContent(ctx context.Context, cr *CaseResult) (err error) {
	if len(h.cfg.SubscriberCommand) == 0 {
		return errors.New("content routing runs its subscribers in a child driplab process, and no SubscriberCommand is set")
	}
	w, err := newContentWorkload(h.cfg.ContentSubscribers, h.cfg.ContentMessages)
	if err != nil {
		return err
	}
	cr.Notes = append(cr.Notes, fmt.Sprintf("Workload: %d predicates and %d messages of workload.SingleConstraint (seed %d); a message matches %.2f%% of the subscribers on average (Carzaniga09 §5.2.1's ≈5%%).",
		len(w.preds), len(w.msgs), workload.SingleConstraint().Seed, 100*w.replication()))
	var ts []*target
	defer func() { err = errors.Join(err, closeAll(ts...)) }()
	for _, s := range []string{sysDrip, sysNATS} {
		t, err := h.deploy(ctx, s, s, 1)
		if err != nil {
			return err
		}
		ts = append(ts, t)
	}
	record(cr, ts...)
	cr.Systems = []string{sysDrip, sysNATS}
	plan := func(t *target) runPlan {
		return runPlan{
			system: t.name, servers: t.servers, dropped: t.dropped,
			subs: func(ctx context.Context, clk Clock, _ *latencies) (subscriberSet, error) {
				return startChild(ctx, h.cfg.SubscriberCommand, h.cfg.SubscriberEnv, h.dir,
					SubscribersSpec{System: t.system, Addr: t.first().Client, Predicates: w.preds, Run: clk.run})
			},
			pub: func(ctx context.Context) (pub, error) {
				if t.system == sysNATS {
					return newNATSPub(t.first().Client, stream{msgs: w.msgs})
				}
				return newDripPub(ctx, t.first().Client, stream{msgs: w.msgs})
			},
			expected: w.expected,
			warmup:   h.cfg.Warmup, duration: h.cfg.Duration, drain: h.cfg.Drain,
		}
	}
	if err := h.interleave(ctx, cr, h.cfg.Reps, ts, plan); err != nil {
		return err
	}
	matched := mDelivered
	matched.name = "matched deliveries/s"
	perCPU := metric{name: "matched deliveries per CPU second (server + subscribers)", unit: "rate", get: func(r RunResult) float64 {
		return Ratio(float64(r.Delivered), float64(r.ServerCPU+r.SubscriberCPU))
	}}
	totalCPU := metric{name: "CPU µs per matched delivery (server + subscribers)", unit: "us", get: func(r RunResult) float64 {
		return Ratio(1e6*float64(r.ServerCPU+r.SubscriberCPU), float64(r.Delivered))
	}}
	serverCPU := mCPU
	serverCPU.name = "server CPU µs per matched delivery"
	subCores := metric{name: "subscriber process cores busy", unit: "cores", get: func(r RunResult) float64 {
		return Ratio(float64(r.SubscriberCPU), float64(r.Window))
	}}
	cr.Rows = []Row{
		makeRow(cr.Runs, matched, sysDrip, sysNATS, "", atLeast("≥ 5", 5)),
		makeRow(cr.Runs, perCPU, sysDrip, sysNATS, "", atLeast("≥ 5", 5)),
		makeRow(cr.Runs, totalCPU, sysDrip, sysNATS, "", nil),
		makeRow(cr.Runs, serverCPU, sysDrip, sysNATS, "", nil),
		makeRow(cr.Runs, mCores, sysDrip, sysNATS, "", nil),
		makeRow(cr.Runs, subCores, sysDrip, sysNATS, "", nil),
		makeRow(cr.Runs, mPublished, sysDrip, sysNATS, "", nil),
		makeRow(cr.Runs, mLoss, sysDrip, sysNATS, "", worstAtMost("drip ≤ 0.1% in every run", 0.001)),
		makeRow(cr.Runs, mLost, sysDrip, sysNATS, "", nil),
		makeRow(cr.Runs, mDropped, sysDrip, sysNATS, "", nil),
	}
	return nil
}
