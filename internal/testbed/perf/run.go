package perf

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dripmesh/drip/internal/testbed/systems"
)

// RunResult is one measured run of one system: a publisher sending for
// Warmup+Duration, with counters read at the end of the warm-up and at the
// end of sending (the window), then a bounded drain for the totals.
type RunResult struct {
	System string `json:"system"`
	Rep    int    `json:"rep"`
	// Variant names the point of a case with several (Henjes07's filters
	// and replication grade).
	Variant string `json:"variant,omitempty"`
	// Window is the measured time in seconds (Duration, as it happened).
	Window Num `json:"window_s"`
	// In the window: messages published, deliveries counted by the
	// subscribers, and messages the subscribers' clients discarded as not
	// matching (NATS's client-side filtering).
	Sent      uint64 `json:"sent"`
	Delivered uint64 `json:"delivered"`
	Filtered  uint64 `json:"filtered,omitempty"`
	// Rates over the window, per second.
	PublishRate  Num `json:"publish_per_s"`
	DeliveryRate Num `json:"delivered_per_s"`
	// Over the whole run, after the drain: messages sent, accepted by the
	// system (drip's publisher summary; NATS and ActiveMQ accept what they
	// read), deliveries the accepted messages should make, deliveries made.
	SentTotal      uint64 `json:"sent_total"`
	Accepted       uint64 `json:"accepted"`
	Expected       uint64 `json:"expected"`
	DeliveredTotal uint64 `json:"delivered_total"`
	// Undelivered is Expected − DeliveredTotal; Loss is it as a fraction
	// of Expected.
	Undelivered int64 `json:"undelivered"`
	Loss        Num   `json:"loss"`
	// Lost is what the system told the subscribers it dropped (drip's Lost
	// events; nats.go's dropped count); BrokerDropped what the brokers
	// count as dropped (drip: subscriber queues, link queues, routes;
	// NATS: slow consumers cut off).
	// Stale counts deliveries of earlier runs' messages, not counted as
	// deliveries: a backlog the system was still working through.
	Stale         uint64 `json:"stale,omitempty"`
	Lost          uint64 `json:"lost_reported"`
	BrokerDropped uint64 `json:"broker_dropped"`
	// Drain is how long the harness waited for late deliveries after
	// sending, and DrainEnd why it stopped: "complete" (everything
	// expected arrived), "quiet" (nothing arrived for 500 ms) or
	// "timeout" (Config.Drain passed while deliveries still came: what is
	// undelivered may still have been queued, not lost) or "unsettled"
	// (the publisher was abandoned with messages the system had not taken:
	// the totals are unknown, Accepted, Expected and Undelivered are 0 and
	// Loss is null).
	Drain    Num    `json:"drain_s"`
	DrainEnd string `json:"drain_end"`
	// ServerCPU is the CPU seconds of the system's server processes in
	// the window, summed; ServerCores the same per second of window;
	// CPUPerDelivery the server microseconds per delivery counted.
	ServerCPU      Num `json:"server_cpu_s"`
	ServerCores    Num `json:"server_cores"`
	CPUPerDelivery Num `json:"server_cpu_us_per_delivery"`
	// SubscriberCPU is the CPU seconds of the subscriber process, when the
	// subscribers run in one of their own (content routing), in the window.
	SubscriberCPU Num `json:"subscriber_cpu_s,omitempty"`
	// HarnessCPU is this process's CPU seconds in the window: the
	// publisher and any subscribers running here.
	HarnessCPU Num             `json:"harness_cpu_s"`
	Latency    *LatencySummary `json:"latency,omitempty"`
	// Seconds is the run's wall time: setup, probes, sending, settling
	// and the drain.
	Seconds Num              `json:"seconds"`
	Error   string           `json:"error,omitempty"`
	Extra   map[string]int64 `json:"extra,omitempty"`
}

// subCounts are a subscriber set's counters.
type subCounts struct {
	Delivered uint64 `json:"delivered"`
	Lost      uint64 `json:"lost"`
	Filtered  uint64 `json:"filtered"`
	Foreign   uint64 `json:"foreign"`
	Stale     uint64 `json:"stale"`
	Probed    bool   `json:"probed"`
	Err       string `json:"error,omitempty"`
}

// subscriberSet is a run's subscribers, here or in a child process.
type subscriberSet interface {
	counts(ctx context.Context) (subCounts, error)
	// cpu is the CPU time of the process the subscribers run in when it
	// is not this one; ok is false when they run here.
	cpu() (d time.Duration, ok bool, err error)
	close() error
}

// localSubs are subscribers in this process.
type localSubs []*sub

func (ls localSubs) counts(context.Context) (subCounts, error) {
	c := subCounts{Probed: true}
	for _, s := range ls {
		c.Delivered += s.delivered.Load()
		c.Foreign += s.foreign.Load()
		c.Stale += s.stale.Load()
		c.Filtered += s.filtered.Load()
		if s.lost != nil {
			c.Lost += s.lost()
		}
		c.Probed = c.Probed && s.probed.Load()
		if err := s.failed(); err != nil && c.Err == "" {
			c.Err = err.Error()
		}
	}
	return c, nil
}

func (localSubs) cpu() (time.Duration, bool, error) { return 0, false, nil }

func (ls localSubs) close() error {
	errs := make([]error, len(ls))
	var wg sync.WaitGroup
	for i, s := range ls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = s.close()
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// runPlan says how to make one run of one system.
type runPlan struct {
	system  string
	variant string
	servers []systems.Server // whose CPU is the system's
	// dropped reads the brokers' cumulative drop counters.
	dropped func(ctx context.Context) (uint64, error)
	subs    func(ctx context.Context, clk Clock, lat *latencies) (subscriberSet, error)
	pub     func(ctx context.Context) (pub, error)
	// probe sends probes until every subscriber has had one, so that the
	// run starts once interest has reached every broker.
	probe bool
	// rate paces the publisher at messages/s; 0 sends as fast as the
	// system accepts.
	rate float64
	// expected is how many deliveries the first n messages should make.
	expected func(n uint64) uint64
	// window, when set, holds the publisher while more than window
	// messages are outstanding: sent, and not yet delivered to (or
	// reported lost by) every subscriber they match.
	window                  uint64
	latency                 bool
	warmup, duration, drain time.Duration
}

// snapshot is the counters at one moment of a run.
type snapshot struct {
	at        time.Duration
	sent      uint64
	counts    subCounts
	serverCPU time.Duration
	subCPU    time.Duration
	self      time.Duration
}

// setupTimeout bounds opening a run's clients and probing.
const setupTimeout = 2 * time.Minute

// execute makes the run. A failure is recorded in RunResult.Error (the case goes
// on with the next run) unless ctx ended, which is returned.
func (p runPlan) execute(ctx context.Context, run uint32, rep int) (RunResult, error) {
	r := RunResult{System: p.system, Rep: rep, Variant: p.variant}
	began := time.Now()
	err := p.run(ctx, run, &r)
	r.Seconds = Num(time.Since(began).Seconds())
	if err != nil {
		if ctx.Err() != nil {
			return r, ctx.Err()
		}
		r.Error = err.Error()
	}
	return r, nil
}

func (p runPlan) run(ctx context.Context, run uint32, r *RunResult) (err error) {
	clk := NewClock(run)
	var lat *latencies
	if p.latency {
		lat = &latencies{from: p.warmup, to: p.warmup + p.duration}
	}
	setup, cancelSetup := context.WithTimeout(ctx, setupTimeout)
	defer cancelSetup()
	drops0, dropErr := p.dropped(setup)
	subs, err := p.subs(setup, clk, lat)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, subs.close()) }()
	// The publisher lives as long as the run; cancelling runCtx aborts a
	// publish blocked on a system that stopped reading.
	runCtx, cancelRun := context.WithCancel(ctx)
	defer cancelRun()
	pb, err := p.pub(runCtx)
	if err != nil {
		return err
	}
	pubClosed := false
	defer func() {
		if !pubClosed {
			cancelRun() // abandons the publisher at once
			_, _ = pb.close(runCtx)
		}
	}()
	probes := uint64(0)
	if p.probe {
		if probes, err = probeUntilHeard(setup, pb, subs, clk); err != nil {
			return err
		}
	}

	// Send for warm-up + duration, from a fresh clock origin.
	start := clk.Now()
	end := start + p.warmup + p.duration
	var sent atomic.Uint64
	pubDone := make(chan error, 1)
	var hold func(sent uint64) bool
	if p.window > 0 {
		hold = func(sent uint64) bool {
			c, err := subs.counts(runCtx)
			return err == nil && p.expected(sent) > c.Delivered+c.Lost+p.expected(p.window)
		}
	}
	go func() { pubDone <- sendUntil(runCtx, pb, clk, end, p.rate, hold, &sent) }()
	if lat != nil {
		lat.from, lat.to = start+p.warmup, end
	}

	take := func() (snapshot, error) {
		s := snapshot{at: clk.Now(), sent: sent.Load()}
		var err error
		if s.counts, err = subs.counts(ctx); err != nil {
			return s, err
		}
		for _, sv := range p.servers {
			d, err := ProcessCPU(sv.PID)
			if err != nil {
				return s, fmt.Errorf("%s at %s: %w", p.system, sv.Site, err)
			}
			s.serverCPU += d
		}
		if d, ok, err := subs.cpu(); err != nil {
			return s, err
		} else if ok {
			s.subCPU = d
		}
		s.self, err = SelfCPU()
		return s, err
	}
	// wait sleeps until the clock reads until, returning early if ctx
	// ends or the publisher fails. A publisher that returns without error
	// has reached end, which until never exceeds.
	wait := func(until time.Duration) error {
		timer := time.NewTimer(until - clk.Now())
		defer timer.Stop()
		done := pubDone
		for {
			select {
			case <-timer.C:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			case err := <-done:
				pubDone <- err
				if err != nil {
					return fmt.Errorf("%s publisher: %w", p.system, err)
				}
				done = nil
			}
		}
	}
	if err := wait(start + p.warmup); err != nil {
		return err
	}
	a, err := take()
	if err != nil {
		return err
	}
	if err := wait(end); err != nil {
		return err
	}
	b, err := take()
	if err != nil {
		return err
	}
	if err := <-pubDone; err != nil {
		return fmt.Errorf("%s publisher: %w", p.system, err)
	}
	// The publisher settles within the drain time, at least 5 s: drip's
	// has up to 8,192 messages in flight to acknowledge.
	settle, cancelSettle := context.WithTimeout(runCtx, max(p.drain, 5*time.Second))
	accepted, err := pb.close(settle)
	cancelSettle()
	pubClosed = true
	settled := !errors.Is(err, errUnsettled)
	if err != nil && settled {
		return fmt.Errorf("%s publisher: %w", p.system, err)
	}

	total := sent.Load()
	// What the system accepted, less the probes, which are no messages.
	accepted -= min(accepted, probes)
	expected := p.expected(min(accepted, total))
	drainStart := time.Now()
	var final subCounts
	why := "unsettled"
	if settled {
		final, why, err = drain(ctx, subs, expected, p.drain)
	} else {
		// The totals are unknown: count what arrived, and wait no more.
		final, err = subs.counts(ctx)
	}
	if err != nil {
		return err
	}
	r.Drain, r.DrainEnd = Num(time.Since(drainStart).Seconds()), why
	drops1, dropErr1 := p.dropped(ctx)

	w := (b.at - a.at).Seconds()
	r.Window = Num(w)
	r.Sent, r.Delivered, r.Filtered = b.sent-a.sent, b.counts.Delivered-a.counts.Delivered, b.counts.Filtered-a.counts.Filtered
	r.PublishRate, r.DeliveryRate = Num(float64(r.Sent)/w), Num(float64(r.Delivered)/w)
	r.SentTotal, r.DeliveredTotal = total, final.Delivered
	r.Loss = Num(math.NaN())
	if settled {
		r.Accepted, r.Expected = accepted, expected
		r.Undelivered = int64(expected) - int64(final.Delivered)
		r.Loss = Num(Ratio(float64(r.Undelivered), float64(expected)))
	}
	r.Lost, r.Stale = final.Lost, final.Stale
	if dropErr == nil && dropErr1 == nil {
		r.BrokerDropped = drops1 - min(drops1, drops0)
	}
	cpu := (b.serverCPU - a.serverCPU).Seconds()
	r.ServerCPU, r.ServerCores = Num(cpu), Num(cpu/w)
	r.CPUPerDelivery = Num(Ratio(cpu*1e6, float64(r.Delivered)))
	if b.subCPU > 0 {
		r.SubscriberCPU = Num((b.subCPU - a.subCPU).Seconds())
	}
	r.HarnessCPU = Num((b.self - a.self).Seconds())
	if lat != nil {
		r.Latency = lat.summary()
	}
	if final.Foreign > 0 {
		return fmt.Errorf("subscribers received %d payloads the harness did not send", final.Foreign)
	}
	if final.Err != "" {
		return errors.New(final.Err)
	}
	return errors.Join(dropErr, dropErr1)
}

// probeUntilHeard publishes probes every 20 ms until every subscriber has
// received one, and returns how many it sent.
func probeUntilHeard(ctx context.Context, pb pub, subs subscriberSet, clk Clock) (uint64, error) {
	n := uint64(0)
	for {
		if err := pb.publish(probeSeq, clk.payload(probeSeq)); err != nil {
			return n, fmt.Errorf("probing: %w", err)
		}
		n++
		c, err := subs.counts(ctx)
		if err != nil {
			return n, err
		}
		if c.Err != "" {
			return n, errors.New(c.Err)
		}
		if c.Probed {
			return n, nil
		}
		select {
		case <-ctx.Done():
			return n, fmt.Errorf("probing: not every subscriber heard a probe (%d sent): %w", n, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// sendUntil publishes the stream until the clock reaches end: as fast as
// the publisher takes messages (and hold, when set, lets it: it is asked
// every 64 messages), or paced at rate messages/s (a schedule of evenly
// spaced send times; late sends catch up, so the mean rate holds when a
// sleep overshoots).
func sendUntil(ctx context.Context, pb pub, clk Clock, end time.Duration, rate float64, hold func(sent uint64) bool, sent *atomic.Uint64) error {
	seq := uint64(0)
	if rate <= 0 {
		for {
			if clk.Now() >= end {
				return nil
			}
			if seq%64 == 0 {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				for hold != nil && hold(seq) {
					if clk.Now() >= end {
						return nil
					}
					select {
					case <-ctx.Done():
						return ctx.Err()
					case <-time.After(100 * time.Microsecond):
					}
				}
			}
			if err := pb.publish(seq, clk.payload(seq)); err != nil {
				return err
			}
			seq++
			sent.Store(seq)
		}
	}
	interval := time.Duration(float64(time.Second) / rate)
	next := clk.Now()
	for next < end {
		now := clk.Now()
		for next <= now && next < end {
			if err := pb.publish(seq, clk.payload(seq)); err != nil {
				return err
			}
			seq++
			sent.Store(seq)
			next += interval
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(next - clk.Now()):
		}
	}
	return nil
}

// drain waits until the subscribers have counted want deliveries, nothing
// has arrived for a while, or max has passed, and returns the final counts
// and which of the three ended it.
func drain(ctx context.Context, subs subscriberSet, want uint64, max time.Duration) (subCounts, string, error) {
	const quiet = 500 * time.Millisecond
	deadline := time.Now().Add(max)
	var last uint64
	lastChange := time.Now()
	for {
		c, err := subs.counts(ctx)
		if err != nil {
			return c, "", err
		}
		if c.Delivered != last {
			last, lastChange = c.Delivered, time.Now()
		}
		switch {
		case c.Delivered >= want:
			return c, "complete", nil
		case time.Since(lastChange) > quiet:
			return c, "quiet", nil
		case time.Now().After(deadline):
			return c, "timeout", nil
		}
		select {
		case <-ctx.Done():
			return c, "", ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// latencies records the latency of deliveries of messages sent in the
// window [from, to) of the run's clock.
type latencies struct {
	from, to time.Duration
	mu       sync.Mutex
	ms       []float64
}

func (l *latencies) record(sent, now time.Duration) {
	if sent < l.from || sent >= l.to {
		return
	}
	l.mu.Lock()
	l.ms = append(l.ms, float64(now-sent)/float64(time.Millisecond))
	l.mu.Unlock()
}

// LatencySummary is the distribution of end-to-end latencies, in ms.
type LatencySummary struct {
	N   int `json:"n"`
	P50 Num `json:"p50_ms"`
	P90 Num `json:"p90_ms"`
	P99 Num `json:"p99_ms"`
	Max Num `json:"max_ms"`
	// Quantiles are the latencies at QuantileLevels, for plotting.
	Quantiles []Num `json:"quantiles_ms"`
}

// QuantileLevels are the levels of LatencySummary.Quantiles.
var QuantileLevels = []float64{0, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 0.995, 0.999, 1}

func (l *latencies) summary() *LatencySummary {
	l.mu.Lock()
	v := slices.Clone(l.ms)
	l.mu.Unlock()
	slices.Sort(v)
	s := &LatencySummary{N: len(v), P50: Num(Quantile(v, 0.5)), P90: Num(Quantile(v, 0.9)), P99: Num(Quantile(v, 0.99)), Max: Num(math.NaN())}
	if len(v) > 0 {
		s.Max = Num(v[len(v)-1])
	}
	for _, q := range QuantileLevels {
		s.Quantiles = append(s.Quantiles, Num(Quantile(v, q)))
	}
	return s
}
