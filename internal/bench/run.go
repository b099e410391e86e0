package bench

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dripmesh/drip/client"
	"github.com/dripmesh/drip/internal/content"
	"github.com/dripmesh/drip/internal/workload"
)

// Run performs the experiment cfg describes and returns its report. A run
// goes on through brokers failing and draining: drip clients move to the
// next broker (Config.Brokers, from their own on), and the report counts
// the gaps and what was lost in them. It stops early with an error if no
// broker can be reached at the start, a broker rejects a predicate or a
// message, or a subscription ends for good; cancelling ctx stops it with
// ctx's error. Whenever the configuration is valid, the report is returned
// too — partial, with Error set, if the run stopped early — so a failed or
// interrupted run still leaves its numbers. Exactness violations are not
// errors: see Report.Exact.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	gen, err := workload.New(cfg.Workload)
	if err != nil {
		return nil, err
	}
	r := newRunner(cfg, gen.Predicates(cfg.Subscribers))
	err = r.run(ctx)
	rep := r.report()
	if err != nil {
		rep.Error = err.Error()
	}
	return rep, err
}

func (r *runner) run(ctx context.Context) error {
	cfg := r.cfg
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	r.cancel = cancel

	connect := cfg.Connect
	if connect == nil {
		connect = r.dripConnector()
	}
	clients := make([]Endpoint, len(cfg.Brokers))
	defer func() {
		for _, c := range clients {
			if c != nil {
				_ = c.Close()
			}
		}
	}()
	var err error
	for i, addr := range cfg.Brokers {
		if clients[i], err = connect(ctx, addr); err != nil {
			return stopped(ctx, fmt.Errorf("bench: %w", err))
		}
	}

	// Subscribe, and start reading at once so that nothing backs up while
	// the mesh settles.
	r.subs = make([]Subscriber, cfg.Subscribers)
	var readers sync.WaitGroup
	readCtx, stopReading := context.WithCancel(ctx)
	defer func() {
		stopReading()
		readers.Wait()
		for _, s := range r.subs {
			if s != nil {
				_ = s.Close()
			}
		}
	}()
	for j := range r.subs {
		b := r.oracle.brokerOf[j]
		s, err := clients[b].Subscribe(ctx, r.oracle.preds[j])
		if err != nil {
			return stopped(ctx, fmt.Errorf("bench: subscriber %d on %s: %w", j, cfg.Brokers[b], err))
		}
		r.subs[j] = s
		readers.Add(1)
		go func() {
			defer readers.Done()
			r.read(readCtx, j, s)
		}()
	}
	// Publishers open before the mesh settles (Config.Ready). A publisher
	// blocked by a mesh that stopped taking messages must not hold the run
	// past its end: publish streams are cut at Duration + Drain after
	// sending starts.
	pubCtx, cutPublishers := context.WithCancelCause(ctx)
	defer cutPublishers(nil)
	pubs := make([]Publisher, cfg.Publishers)
	for i := range pubs {
		b := i % len(clients)
		if pubs[i], err = clients[b].NewPublisher(pubCtx); err != nil {
			return stopped(ctx, fmt.Errorf("bench: publisher %d on %s: %w", i, cfg.Brokers[b], err))
		}
	}

	if cfg.Ready != nil {
		if err := cfg.Ready(ctx); err != nil {
			return stopped(ctx, fmt.Errorf("bench: waiting for routing to settle: %w", err))
		}
	}
	if err := Sleep(ctx, cfg.Warmup); err != nil {
		return context.Cause(ctx)
	}

	r.sendStart.Store(int64(r.now()))
	r.sending.Store(true)
	if cfg.OnSendStart != nil {
		cfg.OnSendStart()
	}
	errStuck := fmt.Errorf("bench: publishers still blocked %v after sending should have ended: the mesh stopped accepting messages", cfg.Drain)
	watchdog := time.AfterFunc(cfg.Duration+cfg.Drain, func() { cutPublishers(errStuck) })
	defer watchdog.Stop()
	stopProgress := r.progress(ctx)
	defer stopProgress()
	var publishers sync.WaitGroup
	var sumMu sync.Mutex
	for i, p := range pubs {
		publishers.Add(1)
		go func() {
			defer publishers.Done()
			if !r.publish(pubCtx, i, p, cfg.Workload) {
				return
			}
			// Closing sends what the publisher still holds: a mesh that
			// stopped reading blocks it here, within the watchdog's reach.
			s, err := p.Close()
			if err != nil {
				if pubCtx.Err() == nil {
					r.fail(fmt.Errorf("bench: publisher %d on %s: %w", i, cfg.Brokers[i%len(cfg.Brokers)], err))
				} else {
					r.nCut.Add(1)
				}
			}
			sumMu.Lock()
			r.sum.Accepted += s.Accepted
			r.sum.Unmatched += s.Unmatched
			sumMu.Unlock()
			if f, ok := p.(interface{ InFlightLost() uint64 }); ok {
				r.nInFlight.Add(f.InFlightLost())
			}
			if c, ok := p.(interface{ Congestion() client.CongestionStats }); ok {
				cs := c.Congestion()
				r.ccMu.Lock()
				r.cc.Controlled += cs.Controlled
				r.cc.Held += cs.Held
				r.cc.Waited += cs.Waited
				r.cc.Feedback += cs.Feedback
				r.ccMu.Unlock()
			}
		}()
	}
	publishers.Wait()
	r.sendTime = r.sinceSendStart(r.now())
	watchdog.Stop()
	if errors.Is(context.Cause(pubCtx), errStuck) && !cfg.CutStuckPublishers {
		r.fail(errStuck)
	}
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}

	drainStart := time.Now()
	r.drain(ctx, r.subs)
	r.drainTime = time.Since(drainStart)
	stopReading()
	readers.Wait()
	stopProgress()
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	return nil
}

// dripConnector connects to drip brokers with the client package: the
// connection for broker i lists every broker from i on, so its clients
// fail over in turn, and their gaps and failovers are counted.
func (r *runner) dripConnector() Connector {
	cfg := r.cfg
	return func(ctx context.Context, addr string) (Endpoint, error) {
		i := slices.Index(cfg.Brokers, addr)
		order := append(append([]string(nil), cfg.Brokers[i:]...), cfg.Brokers[:i]...)
		opts := []client.Option{client.WithName("drip-bench"), client.WithGapHandler(r.gap), client.WithFailoverHandler(r.failover)}
		if cfg.FailoverWait > 0 {
			opts = append(opts, client.WithFailoverWait(cfg.FailoverWait))
		}
		opts = append(opts, cfg.ClientOptions...)
		if cfg.ConnectTimeout > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, cfg.ConnectTimeout)
			defer cancel()
		}
		c, err := client.Dial(ctx, strings.Join(order, ","), opts...)
		if err != nil {
			return nil, err
		}
		return DripEndpoint(c), nil
	}
}

// gap counts a subscription that was installed again after its broker
// failed, in the second it came back.
func (r *runner) gap(g client.Gap) {
	r.nGaps.Add(1)
	end := r.sinceSendStart(g.End.Sub(r.clock))
	r.gaps[r.second(end)].Add(1)
	r.evMu.Lock()
	if len(r.gapEvents) < MaxEvents {
		r.gapEvents = append(r.gapEvents, GapEvent{StartS: r.sinceSendStart(g.Start.Sub(r.clock)).Seconds(), EndS: end.Seconds(), From: g.From, To: g.To})
	}
	r.evMu.Unlock()
	for d := int64(g.Duration()); ; {
		cur := r.maxGap.Load()
		if d <= cur || r.maxGap.CompareAndSwap(cur, d) {
			break
		}
	}
}

// failover counts a publisher that moved to another broker.
func (r *runner) failover(f client.Failover) {
	r.nFailovers.Add(1)
	r.nResent.Add(uint64(f.Resent))
	at := r.sinceSendStart(r.now())
	r.failovers[r.second(at)].Add(1)
	r.evMu.Lock()
	if len(r.failoverEvents) < MaxEvents {
		r.failoverEvents = append(r.failoverEvents, FailoverEvent{AtS: at.Seconds(), From: f.From, To: f.To, Resent: f.Resent, InFlight: f.InFlight})
	}
	r.evMu.Unlock()
}

// runner is the shared state of one run.
type runner struct {
	cfg    Config
	oracle *oracle
	ledger *ledger
	runID  uint32
	cancel context.CancelCauseFunc

	// clock is the origin of the bench's monotonic clock, which payload
	// stamps and latencies use; sending starts sendStart nanoseconds after
	// it, and the series counts seconds from there.
	clock     time.Time
	sendStart atomic.Int64

	// series counters, one slot per second of sending and draining
	sent, ideal, delivered []atomic.Uint64
	gaps, failovers        []atomic.Uint64
	sending                atomic.Bool // sendStart is set

	// what the run gathered, for the report
	subs                []Subscriber
	sum                 client.Summary
	sendTime, drainTime time.Duration

	// totals
	nSent, nIdeal, nBrokers, nUnmatched atomic.Uint64
	nDelivered, nFalse, nDup, nForeign  atomic.Uint64
	nCut                                atomic.Uint64 // publishers cut while blocked
	nGaps, nFailovers, nResent          atomic.Uint64
	nInFlight                           atomic.Uint64
	ccMu                                sync.Mutex
	cc                                  client.CongestionStats // the publishers' congestion control, summed
	maxGap                              atomic.Int64           // nanoseconds
	evMu                                sync.Mutex             // guards the event lists
	gapEvents                           []GapEvent
	failoverEvents                      []FailoverEvent
	dups                                []atomic.Uint64

	subIdeal []atomic.Uint64 // per subscriber, at send time
	subStats []subCounts     // per subscriber, owned by its reader goroutine until it exits
	latency  histogram
}

type subCounts struct{ delivered, falsePositives, duplicates uint64 }

// seriesSeconds is how many seconds the series holds: publishers may send
// until Duration + Drain (the watchdog), then deliveries may arrive for
// another Drain, and Settle. A delivery later than that counts in the
// last second; with a shorter series, a drain that caught up after a late
// end of sending landed there whole (577,441 deliveries in one second of a
// 42-broker run), inside the sending time the experiments read.
func seriesSeconds(cfg Config) int {
	return int((cfg.Duration+2*cfg.Drain+cfg.Settle)/time.Second) + 2
}

func newRunner(cfg Config, preds []content.Predicate) *runner {
	seconds := seriesSeconds(cfg)
	return &runner{
		cfg:       cfg,
		oracle:    newOracle(preds, workload.RoundRobin(len(preds), len(cfg.Brokers))),
		ledger:    newLedger(cfg.Publishers),
		runID:     rand.Uint32(),
		clock:     time.Now(),
		sent:      make([]atomic.Uint64, seconds),
		ideal:     make([]atomic.Uint64, seconds),
		delivered: make([]atomic.Uint64, seconds),
		dups:      make([]atomic.Uint64, seconds),
		gaps:      make([]atomic.Uint64, seconds),
		failovers: make([]atomic.Uint64, seconds),
		subIdeal:  make([]atomic.Uint64, len(preds)),
		subStats:  make([]subCounts, len(preds)),
	}
}

// now reads the bench's clock.
func (r *runner) now() time.Duration { return time.Since(r.clock) }

// sinceSendStart is a time on the bench's clock measured from when sending
// started (before that, negative; the series puts it in second 0).
func (r *runner) sinceSendStart(now time.Duration) time.Duration {
	if !r.sending.Load() {
		return 0
	}
	return now - time.Duration(r.sendStart.Load())
}

// second returns the series slot of d, a time since sending started.
func (r *runner) second(d time.Duration) int {
	return min(max(int(d/time.Second), 0), len(r.sent)-1)
}

func (r *runner) fail(err error) { r.cancel(err) }

// publish sends publisher i's messages on its schedule until the duration
// has passed, and says whether the publisher may be closed normally. A
// publisher that falls behind its schedule sends late rather than
// skipping: the input rate the report shows is what was sent.
func (r *runner) publish(ctx context.Context, i int, p Publisher, wc workload.Config) bool {
	wc.Seed += 1 + int64(i) // each publisher its own reproducible message stream
	gen, err := workload.New(wc)
	if err != nil {
		r.fail(err)
		return false
	}
	n := float64(r.cfg.Publishers)
	arr := &arrivals{
		mode:    r.cfg.Mode,
		r0:      r.cfg.Rate / n,
		horizon: r.cfg.Duration.Seconds(),
		rng:     rand.New(rand.NewPCG(uint64(r.cfg.Workload.Seed), uint64(i))),
	}
	switch r.cfg.Mode {
	case Constant:
		// Stagger publishers so that the total is evenly spaced too.
		arr.phase = float64(i) / r.cfg.Rate
	case Ramp:
		arr.r0, arr.r1 = r.cfg.RateStart/n, r.cfg.Rate/n
	}
	scratch := r.oracle.scratch(len(r.cfg.Brokers))
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	// until waits for the send clock to reach at.
	until := func(at time.Duration) bool {
		if wait := at - r.sinceSendStart(r.now()); wait > 0 {
			timer.Reset(wait)
			select {
			case <-timer.C:
			case <-ctx.Done():
				return false
			}
		}
		return true
	}
	for seq := uint64(0); ; seq++ {
		at := time.Duration(arr.next() * float64(time.Second))
		if at >= r.cfg.Duration || at < 0 { // < 0: +Inf overflowed
			// The publisher stays open until sending ends for all: closing
			// ends its congestion-feedback subscription, a change of
			// subscriptions every broker re-advertises and re-indexes.
			// Sparse Poisson schedules end seconds early, so closing at the
			// last arrival made a wave of such changes at the top of a
			// ramp (docs/results/experiments/scale).
			return until(r.cfg.Duration)
		}
		if !until(at) {
			return false
		}
		m := gen.Message()
		expected, brokers := r.oracle.expect(m, scratch)
		sentAt := r.now()
		since := r.sinceSendStart(sentAt)
		sec := r.second(since)
		// Recorded before sending: a delivery can overtake the return of
		// Publish.
		r.ledger.add(i, seq, since, expected)
		payload := stamp{run: r.runID, pub: uint32(i), seq: seq, sent: sentAt}.encode()
		if err := p.Publish(m, payload); err != nil {
			if ctx.Err() == nil {
				r.fail(fmt.Errorf("bench: publisher %d: %w", i, err))
			} else {
				r.nCut.Add(1) // blocked until cut
			}
			return false
		}
		r.sent[sec].Add(1)
		r.ideal[sec].Add(uint64(len(expected)))
		r.nSent.Add(1)
		r.nIdeal.Add(uint64(len(expected)))
		r.nBrokers.Add(uint64(brokers))
		if len(expected) == 0 {
			r.nUnmatched.Add(1)
		}
		for _, j := range expected {
			r.subIdeal[j].Add(1)
		}
	}
}

// AppendFields appends m's attributes to fs, as the drip client publishes
// them without a map per message.
func AppendFields(fs client.Fields, m content.Message) client.Fields {
	for _, a := range m.Attributes() {
		switch a.Value.Kind() {
		case content.KindString:
			fs.Str(a.Name, a.Value.Str())
		case content.KindInt:
			fs.Int(a.Name, a.Value.Int())
		case content.KindFloat:
			fs.Float(a.Name, a.Value.Float())
		case content.KindBool:
			fs.Bool(a.Name, a.Value.Bool())
		}
	}
	return fs
}

// read classifies subscriber j's deliveries until ctx ends.
func (r *runner) read(ctx context.Context, j int, s Subscriber) {
	c := &r.subStats[j]
	for {
		payload, err := s.Next(ctx)
		if err != nil {
			if ctx.Err() == nil {
				r.fail(fmt.Errorf("bench: subscriber %d on %s: %w", j, r.cfg.Brokers[r.oracle.brokerOf[j]], err))
			}
			return
		}
		now := r.now()
		st, ok := decodeStamp(payload)
		if !ok || st.run != r.runID {
			r.nForeign.Add(1)
			continue
		}
		switch r.ledger.deliver(st.pub, st.seq, int32(j)) {
		case expected:
			c.delivered++
			r.nDelivered.Add(1)
			r.delivered[r.second(r.sinceSendStart(now))].Add(1)
			r.latency.record(now - st.sent)
		case duplicate:
			c.duplicates++
			r.nDup.Add(1)
			r.dups[r.second(r.sinceSendStart(now))].Add(1)
		case falsePositive:
			c.falsePositives++
			r.nFalse.Add(1)
		case unknown:
			r.nForeign.Add(1)
		}
	}
}

// drain waits until every expected delivery has arrived or been reported
// lost and then for the settle time, or until the drain timeout passes.
func (r *runner) drain(ctx context.Context, subs []Subscriber) {
	deadline := time.NewTimer(r.cfg.Drain)
	defer deadline.Stop()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		var lost uint64
		for _, s := range subs {
			lost += s.Lost()
		}
		if r.nDelivered.Load()+lost >= r.nIdeal.Load() {
			_ = Sleep(ctx, r.cfg.Settle)
			return
		}
		select {
		case <-tick.C:
		case <-deadline.C:
			return
		case <-ctx.Done():
			return
		}
	}
}

// progress prints a line per second until the returned function is called
// (or ctx ends); that function waits for the printing goroutine to stop and
// may be called more than once.
func (r *runner) progress(ctx context.Context) (stop func()) {
	if r.cfg.Progress == nil {
		return func() {}
	}
	done, exited := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(exited)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-tick.C:
			case <-done:
				return
			case <-ctx.Done():
				return
			}
			s := r.second(r.sinceSendStart(r.now())) - 1 // the last complete second
			if s < 0 {
				continue
			}
			churn := ""
			if g, f, d := r.gaps[s].Load(), r.failovers[s].Load(), r.dups[s].Load(); g+f+d > 0 {
				churn = fmt.Sprintf("  | gaps %d, failovers %d, duplicates %d", g, f, d)
			}
			fmt.Fprintf(r.cfg.Progress, "bench: %3ds  sent %6d/s  delivered %7d/s  ideal %7d/s  | total sent %d, delivered %d of %d%s\n",
				s+1, r.sent[s].Load(), r.delivered[s].Load(), r.ideal[s].Load(),
				r.nSent.Load(), r.nDelivered.Load(), r.nIdeal.Load(), churn)
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() { close(done) })
		<-exited
	}
}

func (r *runner) report() *Report {
	cfg, sum, subs, sendTime, drainTime := r.cfg, r.sum, r.subs, r.sendTime, r.drainTime
	wc := cfg.Workload
	rep := &Report{
		Config: ReportConfig{
			Brokers: cfg.Brokers, WorkloadName: cfg.WorkloadName,
			Workload: WorkloadConfig{
				Seed: wc.Seed, Names: wc.Names, AttrsPerMessage: wc.AttrsPerMessage, StringFraction: wc.StringFraction,
				Terms: wc.Terms, IntMax: wc.IntMax, FiltersPerPredicate: wc.FiltersPerPredicate,
				MinConstraints: wc.MinConstraints, MaxConstraints: wc.MaxConstraints,
			},
			Subscribers: cfg.Subscribers, Publishers: cfg.Publishers, Mode: cfg.Mode,
			Rate: cfg.Rate, Duration: cfg.Duration.Seconds(), Warmup: cfg.Warmup.Seconds(), Drain: cfg.Drain.Seconds(),
			Settle: cfg.Settle.Seconds(),
		},
		SendSeconds:  sendTime.Seconds(),
		DrainSeconds: drainTime.Seconds(),
	}
	if r.sending.Load() {
		rep.SendingStarted = r.clock.Add(time.Duration(r.sendStart.Load())).UTC().Format(time.RFC3339Nano)
	}
	if cfg.Mode == Ramp {
		rep.Config.RateStart = cfg.RateStart
	}
	undelivered, undeliveredBySec := r.ledger.undelivered(len(subs), len(r.sent))
	last := r.second(sendTime + drainTime)
	for s := 0; s <= last; s++ {
		rep.Series = append(rep.Series, Second{
			T: s, Sent: r.sent[s].Load(), Delivered: r.delivered[s].Load(), Ideal: r.ideal[s].Load(),
			Undelivered: undeliveredBySec[s], Duplicates: r.dups[s].Load(),
			Gaps: r.gaps[s].Load(), Failovers: r.failovers[s].Load(),
		})
	}
	rep.Misses = r.ledger.misses(MaxMisses)
	for k := range rep.Misses {
		m := &rep.Misses[k]
		m.SubscriberBroker = cfg.Brokers[r.oracle.brokerOf[m.Subscriber]]
		m.PublisherBroker = cfg.Brokers[m.Publisher%len(cfg.Brokers)]
	}
	r.evMu.Lock()
	rep.GapEvents = slices.Clone(r.gapEvents)
	rep.FailoverEvents = slices.Clone(r.failoverEvents)
	r.evMu.Unlock()
	t := &rep.Totals
	t.Sent, t.Ideal, t.Unmatched = r.nSent.Load(), r.nIdeal.Load(), r.nUnmatched.Load()
	t.Accepted, t.BrokerUnmatched = sum.Accepted, sum.Unmatched
	t.Delivered, t.FalsePositives, t.Duplicates, t.Foreign = r.nDelivered.Load(), r.nFalse.Load(), r.nDup.Load(), r.nForeign.Load()
	t.Undelivered = t.Ideal - t.Delivered
	t.PublishersCut = r.nCut.Load()
	t.Gaps, t.MaxGapMs = r.nGaps.Load(), ms(time.Duration(r.maxGap.Load()))
	t.Failovers, t.Resent, t.InFlightLost = r.nFailovers.Load(), r.nResent.Load(), r.nInFlight.Load()
	r.ccMu.Lock()
	t.CongestionControlled, t.CongestionHeld, t.CongestionWaitedMs, t.CongestionFeedback = r.cc.Controlled, r.cc.Held, ms(r.cc.Waited), r.cc.Feedback
	r.ccMu.Unlock()
	if t.Sent > 0 {
		rep.Replication = Replication{Client: float64(t.Ideal) / float64(t.Sent), Broker: float64(r.nBrokers.Load()) / float64(t.Sent)}
	}
	for j, s := range subs {
		if s == nil {
			continue // the run stopped while subscribing
		}
		if d, ok := s.(interface{ Duplicates() uint64 }); ok {
			t.ClientSuppressed += d.Duplicates()
		}
		if c, ok := s.(interface{ Congestion() client.CongestionStats }); ok {
			cs := c.Congestion()
			t.CongestionLossEvents += cs.LossEvents
			t.CongestionStamped += cs.Stamped
		}
		c := r.subStats[j]
		st := SubscriberStats{
			Index: j, Broker: cfg.Brokers[r.oracle.brokerOf[j]], Ideal: r.subIdeal[j].Load(),
			Delivered: c.delivered, Undelivered: undelivered[j], FalsePositives: c.falsePositives,
			Duplicates: c.duplicates, Lost: s.Lost(),
		}
		t.Lost += st.Lost
		rep.Subscribers = append(rep.Subscribers, st)
	}
	rep.Latency = Latency{
		Count: r.latency.n.Load(),
		P50:   ms(r.latency.quantile(0.50)), P90: ms(r.latency.quantile(0.90)), P99: ms(r.latency.quantile(0.99)),
		Max: ms(time.Duration(r.latency.max.Load())),
	}
	return rep
}

// stopped returns why ctx ended if it has (the caller's cancellation or the
// first failure of the run), since err is then only a consequence; else err.
func stopped(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	return err
}

// Sleep waits d, or until ctx ends (its error then).
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
