package congestion

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
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
	"github.com/dripmesh/drip/internal/testbed/systems"
	"github.com/dripmesh/drip/internal/transport"
)

// Variant is one system under test.
type Variant struct {
	Name string `json:"name"`
	// NATS runs a NATS cluster instead of drip, ActiveMQ a network of
	// ActiveMQ brokers: what a user would pick instead, without control.
	NATS     bool `json:"nats,omitempty"`
	ActiveMQ bool `json:"activemq,omitempty"`
	// Control: drip's subscriptions ask (congestion feedback) and its
	// publishers listen; otherwise publishers run without control.
	Control bool `json:"control,omitempty"`
}

// peer is whether v runs another system than drip.
func (v Variant) peer() bool { return v.NATS || v.ActiveMQ }

// Variants are drip without and with control, and NATS and ActiveMQ where
// the scenario runs them.
func Variants(s Scenario) []Variant {
	v := AllVariants()
	if !s.Peers {
		v = v[:2]
	}
	return v
}

// AllVariants are every variant a scenario can run, in the order runs take
// them.
func AllVariants() []Variant {
	return []Variant{{Name: "drip"}, {Name: "drip+cc", Control: true},
		{Name: "NATS", NATS: true}, {Name: "ActiveMQ", ActiveMQ: true}}
}

// Network is what the experiment changes and reads: the lab.
type Network interface {
	// SetBandwidth sets both directions of the link a–b to bw bytes/s.
	SetBandwidth(ctx context.Context, a, b string, bw float64) error
	// Sent is the bytes the link has serialised from a to b so far.
	Sent(ctx context.Context, a, b string) (uint64, error)
}

// Config is how to run the scenarios.
type Config struct {
	// Scale multiplies every duration of the scenarios, BandwidthScale
	// every bandwidth and rate (Scenarios).
	Scale          float64 `json:"scale"`
	BandwidthScale float64 `json:"bandwidth_scale"`
	// Bin is the width of the time series.
	Bin time.Duration `json:"bin_ns"`
	// PayloadSize is every message's payload: its number, send time and
	// random padding (incompressible, so peer compression cannot widen
	// the bottleneck).
	PayloadSize int `json:"payload_size"`
	// Warmup runs after the subscriptions are installed, before
	// publishing; Drain after it, before counting.
	Warmup time.Duration `json:"warmup_ns"`
	Drain  time.Duration `json:"drain_ns"`
	// LinkQueueBytes and DropAtLinks configure drip's brokers: a link
	// queue of that many bytes that drops when full (SlowLinks.Behind 0),
	// as the paper's routers do, instead of making the publishers wait
	// (drip's default, which loses nothing: docs/design.md §12).
	LinkQueueBytes int  `json:"link_queue_bytes"`
	DropAtLinks    bool `json:"drop_at_links"`
	// LinkMarkBytes is drip's brokers' marking threshold
	// (broker.Config.LinkMarkBytes; 0: no marks).
	LinkMarkBytes int `json:"link_mark_bytes,omitempty"`
	// NotSentLowat, when positive, bounds the bytes every TCP connection
	// of the run keeps unsent in the kernel (see shallow).
	NotSentLowat int `json:"not_sent_lowat,omitempty"`
	// PeerNotSentLowat is drip's brokers' own bound on their peer
	// connections (broker.Config.PeerNotSentLowat, 0: none), set over
	// NotSentLowat's on those connections.
	PeerNotSentLowat int `json:"peer_not_sent_lowat"`
	// RangeFilters gives the subscribers one range of k each
	// (Subscriber.RangePredicate) instead of a filter per decade.
	RangeFilters bool   `json:"range_filters,omitempty"`
	Seed         uint64 `json:"seed"`

	// Not recorded: where to run.
	Dir       string                  `json:"-"` // scratch for the systems' files
	Placement systems.Placement       `json:"-"` // the lab's sites; nil: loopback
	Network   Network                 `json:"-"` // nil: no bandwidth changes, no link counters
	NATS      systems.NATSOptions     `json:"-"`
	ActiveMQ  systems.ActiveMQOptions `json:"-"`
	Progress  io.Writer               `json:"-"` // a line per step; nil for none
}

// DefaultConfig scales the paper's durations by a half (doc.go).
func DefaultConfig() Config {
	return Config{Scale: 1, BandwidthScale: 8, Bin: 250 * time.Millisecond, PayloadSize: 1000,
		NotSentLowat: 8 << 10, PeerNotSentLowat: transport.DefaultNotSentLowat,
		Warmup: 2 * time.Second, Drain: 3 * time.Second,
		LinkQueueBytes: 32 << 10, DropAtLinks: true, Seed: 1}
}

// Validate names the first setting that cannot run.
func (c Config) Validate() error {
	switch {
	case c.Scale <= 0 || c.Scale > 10:
		return fmt.Errorf("congestion: scale %v, want (0, 10]", c.Scale)
	case c.BandwidthScale <= 0 || c.BandwidthScale > 100:
		return fmt.Errorf("congestion: bandwidth scale %v, want (0, 100]", c.BandwidthScale)
	case c.Bin < 10*time.Millisecond:
		return fmt.Errorf("congestion: bin %v, want at least 10ms", c.Bin)
	case c.PayloadSize < payloadHeader || c.PayloadSize > 64<<10:
		return fmt.Errorf("congestion: payload size %d, want [%d, 65536]", c.PayloadSize, payloadHeader)
	case c.LinkQueueBytes <= 0:
		return fmt.Errorf("congestion: link queue of %d bytes, want a positive size", c.LinkQueueBytes)
	case c.LinkMarkBytes < 0 || c.LinkMarkBytes > c.LinkQueueBytes:
		return fmt.Errorf("congestion: link marks from %d bytes, want [0, the link queue's %d]", c.LinkMarkBytes, c.LinkQueueBytes)
	case c.Dir == "":
		return errors.New("congestion: no scratch directory")
	}
	return nil
}

func (c Config) progress(format string, args ...any) {
	if c.Progress != nil {
		fmt.Fprintf(c.Progress, "congestion: "+format+"\n", args...)
	}
}

// Run runs every variant of s, one after the other.
func Run(ctx context.Context, cfg Config, s Scenario, variants []Variant) (*Result, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	res := &Result{Scenario: s, Config: cfg}
	for _, v := range variants {
		cfg.progress("%s: %s, %v of publishing", s.Name, v.Name, s.Length())
		vr, err := runVariant(ctx, cfg, s, v)
		if err != nil {
			return nil, fmt.Errorf("congestion: %s: %s: %w", s.Name, v.Name, err)
		}
		cfg.progress("%s: %s: %s", s.Name, v.Name, vr.summary())
		res.Variants = append(res.Variants, *vr)
	}
	res.Findings = Analyse(res)
	return res, nil
}

func (c Config) system(v Variant) systems.System {
	switch {
	case v.NATS:
		return systems.NewNATS(c.NATS)
	case v.ActiveMQ:
		return systems.NewActiveMQ(c.ActiveMQ)
	}
	o := systems.DripOptions{Configure: func(b *broker.Config) {
		b.LinkQueueBytes, b.LinkMarkBytes = c.LinkQueueBytes, c.LinkMarkBytes
		b.PeerNotSentLowat = c.PeerNotSentLowat
		b.MaxFrameBytes = min(b.MaxFrameBytes, c.LinkQueueBytes)
		if c.DropAtLinks {
			b.SlowLinks.Behind = 0
		}
	}}
	if v.Control {
		o.Client = []client.Option{client.WithCongestionFeedback(true)}
	} else {
		o.Client = []client.Option{client.WithCongestionControl(false)}
	}
	return systems.NewDrip(o)
}

// payloadHeader: publisher, message number, send time.
const payloadHeader = 20

// subLog is what one subscriber received; its reader owns it until the
// readers are done.
type subLog struct {
	seen     [][]bool // by publisher, message number
	arrived  []float64
	latency  []time.Duration
	extra    uint64 // deliveries it should not have had, or twice
	congest  client.CongestionStats
	hasStats bool
	// Sampled by the run's clock (control only): see GroupResult.
	rtt, lossRate, allowed []float64
}

// pubLog is what one publisher sent; its goroutine owns it until done.
type pubLog struct {
	bins             []uint32 // the bin each message was sent in, by number
	offered, skipped uint64
	congest          client.CongestionStats
	hasStats         bool
	err              error
	quota            []float64 // sampled by the run's clock (control only)
}

// congestionStats is what drip's publishers and subscriptions tell of
// congestion control.
type congestionStats interface {
	Congestion() client.CongestionStats
}

// sampleControl records, for bin b, the publishers' least quota and the
// subscribers' first session's measurements. Both calls are cheap: a
// publisher's lock, a subscription's atomics.
func sampleControl(b, bins int, publishers []bench.Publisher, pubs []*pubLog, handles []bench.Subscriber, subs []*subLog) {
	for i, p := range publishers {
		c, ok := p.(congestionStats)
		if !ok {
			continue
		}
		if pubs[i].quota == nil {
			pubs[i].quota = make([]float64, bins)
		}
		if fl := c.Congestion().Flows; len(fl) > 0 {
			pubs[i].quota[b] = fl[0].Quota // least first
		}
	}
	for j, h := range handles {
		c, ok := h.(congestionStats)
		if !ok {
			continue
		}
		l := subs[j]
		if l.rtt == nil {
			l.rtt, l.lossRate, l.allowed = make([]float64, bins), make([]float64, bins), make([]float64, bins)
		}
		ss := c.Congestion().Sessions
		if len(ss) == 0 {
			continue
		}
		l.rtt[b] = float64(ss[0].RTT) / float64(time.Millisecond)
		l.lossRate[b] = ss[0].LossEventRate
		if !math.IsInf(ss[0].Allowed, 0) {
			l.allowed[b] = ss[0].Allowed
		}
	}
}

func runVariant(ctx context.Context, cfg Config, s Scenario, v Variant) (*VariantResult, error) {
	dir := filepath.Join(cfg.Dir, s.Name, v.Name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if err := cfg.setBandwidth(ctx, s, s.Steps[0].Bandwidth); err != nil {
		return nil, err
	}
	place := cfg.Placement
	if place == nil {
		place = systems.Loopback{}
	}
	if cfg.NotSentLowat > 0 {
		place = shallow{place, cfg.NotSentLowat}
	}
	dep, err := cfg.system(v).Start(ctx, systems.Spec{Topology: s.Topology, Dir: dir, Placement: place})
	if err != nil {
		return nil, err
	}
	defer dep.Close()
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()

	endpoints := map[string]bench.Endpoint{}
	defer func() {
		for _, e := range endpoints {
			_ = e.Close()
		}
	}()
	connect := func(site string) (bench.Endpoint, error) {
		if e, ok := endpoints[site]; ok {
			return e, nil
		}
		e, err := dep.Connect(ctx, site)
		if err == nil {
			endpoints[site] = e
		}
		return e, err
	}
	length := s.Length()
	bins := int((length+cfg.Drain)/cfg.Bin) + 1
	var start time.Time
	started := make(chan struct{})
	subs := make([]*subLog, len(s.Subscribers))
	handles := make([]bench.Subscriber, len(s.Subscribers))
	var readers sync.WaitGroup
	for i, sp := range s.Subscribers {
		e, err := connect(sp.Site)
		if err != nil {
			return nil, err
		}
		text := sp.Predicate()
		if cfg.RangeFilters {
			text = sp.RangePredicate()
		}
		pred, err := content.Parse(text)
		if err != nil {
			return nil, err
		}
		sub, err := e.Subscribe(ctx, pred)
		if err != nil {
			return nil, fmt.Errorf("subscribing at %s: %w", sp.Site, err)
		}
		subs[i] = &subLog{seen: make([][]bool, len(s.Publishers)), arrived: make([]float64, bins)}
		handles[i] = sub
		readers.Add(1)
		go func() {
			defer readers.Done()
			<-started
			read(runCtx, sub, sp, subs[i], start, cfg.Bin)
		}()
	}
	if err := dep.Ready(ctx); err != nil {
		return nil, err
	}
	if err := bench.Sleep(ctx, cfg.Warmup); err != nil {
		return nil, err
	}

	pubs := make([]*pubLog, len(s.Publishers))
	var publishers []bench.Publisher
	// The publishers stop halfway through the drain: a message congestion
	// control still holds then never reaches the network (a flow held to a
	// few messages a second could keep Publish waiting for minutes), and
	// counts as lost.
	pubCtx, stopPublishers := context.WithCancel(runCtx)
	defer stopPublishers()
	for i, ps := range s.Publishers {
		e, err := connect(ps.Site)
		if err != nil {
			return nil, err
		}
		p, err := e.NewPublisher(pubCtx)
		if err != nil {
			return nil, err
		}
		publishers = append(publishers, p)
		pubs[i] = &pubLog{}
	}
	before, err := cfg.sent(ctx, s)
	if err != nil {
		return nil, err
	}
	start = time.Now()
	close(started)
	var wg sync.WaitGroup
	for i, p := range publishers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			publish(pubCtx, p, i, s.Publishers[i].Schedule, pubs[i], start, cfg)
		}()
	}
	link := make([]float64, bins)
	var tcp *tcpFlow
	var tcpBytes []float64
	if s.TCPFrom > 0 {
		tcp = &tcpFlow{}
		tcpBytes = make([]float64, bins)
		defer tcp.stop()
	}
	// The clock of the run: bandwidth steps, the TCP flow, link samples.
	prevSent, prevTCP := before, uint64(0)
	steps := slices.Clone(s.Steps[1:])
	for b := range bins {
		if err := bench.Sleep(ctx, time.Until(start.Add(time.Duration(b+1)*cfg.Bin))); err != nil {
			return nil, err
		}
		at := time.Duration(b+1) * cfg.Bin
		for len(steps) > 0 && steps[0].At <= at {
			cfg.progress("%s: %s: bottleneck to %.0f kbit/s", s.Name, v.Name, steps[0].Bandwidth*8/1000)
			if err := cfg.setBandwidth(ctx, s, steps[0].Bandwidth); err != nil {
				return nil, err
			}
			steps = steps[1:]
		}
		if tcp != nil && !tcp.started() && at >= s.TCPFrom && at < length {
			if err := tcp.start(runCtx, cfg.Placement, s.Bottleneck[0], s.Bottleneck[1]); err != nil {
				return nil, fmt.Errorf("TCP flow: %w", err)
			}
		}
		if tcp != nil && at >= length {
			tcp.stop()
		}
		if at >= length+cfg.Drain/2 {
			stopPublishers()
		}
		if cfg.Network != nil {
			n, err := cfg.Network.Sent(ctx, s.Bottleneck[0], s.Bottleneck[1])
			if err != nil {
				return nil, err
			}
			link[b] = float64(n-prevSent) / cfg.Bin.Seconds()
			prevSent = n
		}
		if tcp != nil {
			n := tcp.received()
			tcpBytes[b] = float64(n-prevTCP) / cfg.Bin.Seconds()
			prevTCP = n
		}
		if v.Control {
			sampleControl(b, bins, publishers, pubs, handles, subs)
		}
	}
	wg.Wait()
	for i, p := range publishers {
		if c, ok := p.(interface{ Congestion() client.CongestionStats }); ok {
			pubs[i].congest, pubs[i].hasStats = c.Congestion(), true
		}
		if _, err := p.Close(); err != nil && pubs[i].err == nil {
			pubs[i].err = err
		}
		if err := pubs[i].err; err != nil && !errors.Is(err, context.Canceled) {
			if !v.peer() {
				return nil, fmt.Errorf("publisher %d: %w", i, err)
			}
			// A peer that fails a publisher under overload (NATS's has
			// returned "connection closed") does what a user of it would
			// see: the run goes on and the result says so.
			cfg.progress("%s: %s: publisher %d stopped after %d messages: %v", s.Name, v.Name, i, len(pubs[i].bins), err)
		}
	}
	cancel()
	readers.Wait()
	vr := account(cfg, s, v, pubs, subs, bins)
	vr.Info = dep.Info()
	if cfg.Network != nil {
		vr.Bottleneck = link
	}
	vr.TCP = tcpBytes
	if mr, ok := dep.(systems.MetricReader); ok {
		if vr.Brokers, err = brokerCounters(ctx, mr, s); err != nil {
			return nil, err
		}
		cfg.progress("%s: %s: brokers dropped %v at full link queues, %v at ended links, %v at slow subscribers; marked %v", s.Name, v.Name,
			vr.Brokers["link_queue_full"], vr.Brokers["link_down"], vr.Brokers["subscriber_dropped"], vr.Brokers["marked"])
	}
	return vr, nil
}

// brokerCounters sums, over the scenario's brokers, where drip dropped
// what it dropped and how much it marked, so that a run's losses can be
// told apart: a full link queue, an ended link, a slow subscriber.
func brokerCounters(ctx context.Context, mr systems.MetricReader, s Scenario) (map[string]float64, error) {
	drops, err := systems.SumOverBrokers(ctx, mr, s.Topology, "drip_link_dropped_bundles_total", "reason")
	if err != nil {
		return nil, err
	}
	out := map[string]float64{"link_queue_full": drops["queue_full"], "link_down": drops["link_down"]}
	for key, name := range map[string]string{"subscriber_dropped": "drip_subscriber_dropped_total", "marked": "drip_bundles_marked_total"} {
		got, err := systems.SumOverBrokers(ctx, mr, s.Topology, name, "")
		if err != nil {
			return nil, err
		}
		out[key] = got[""]
	}
	return out, nil
}

// publish sends i's schedule, numbering its messages. A publisher held
// back by congestion control falls behind its schedule; it keeps at most
// a tenth of a second's messages to catch up on and counts the rest as
// skipped (the application's messages that were never produced).
func publish(ctx context.Context, p bench.Publisher, i int, sched Schedule, l *pubLog, start time.Time, cfg Config) {
	payload := make([]byte, cfg.PayloadSize)
	rng := newPadding(cfg.Seed, i)
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	due, last := 0.0, time.Duration(0)
	length := sched.Length()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		now := time.Since(start)
		if now >= length {
			now = length
		}
		rate := sched.Rate(last)
		due += rate * (now - last).Seconds()
		last = now
		n := uint64(len(l.bins))
		if backlog := max(1, rate/10); due-float64(n) > backlog {
			skip := math.Floor(due - float64(n) - backlog)
			l.skipped += uint64(skip)
			due -= skip
		}
		for ; float64(n) < due; n++ {
			binary.BigEndian.PutUint32(payload, uint32(i))
			binary.BigEndian.PutUint64(payload[4:], n)
			binary.BigEndian.PutUint64(payload[12:], uint64(time.Now().UnixNano()))
			rng.fill(payload[payloadHeader:])
			m := content.MessageFrom(map[string]content.Value{"pub": content.Int(int64(i)), "k": content.Int(int64(K(n))), "d": content.Int(int64(K(n) / 10))})
			if err := p.Publish(m, payload); err != nil {
				l.err = err
				return
			}
			l.bins = append(l.bins, uint32(time.Since(start)/cfg.Bin))
		}
		l.offered = uint64(len(l.bins)) + l.skipped
		if now >= length {
			return
		}
	}
}

// read records sub's deliveries until ctx ends.
func read(ctx context.Context, sub bench.Subscriber, sp Subscriber, l *subLog, start time.Time, bin time.Duration) {
	defer func() {
		if c, ok := sub.(interface{ Congestion() client.CongestionStats }); ok {
			l.congest, l.hasStats = c.Congestion(), true
		}
		_ = sub.Close()
	}()
	for {
		payload, err := sub.Next(ctx)
		if err != nil {
			return
		}
		now := time.Now()
		if len(payload) < payloadHeader {
			l.extra++
			continue
		}
		p := int(binary.BigEndian.Uint32(payload))
		n := binary.BigEndian.Uint64(payload[4:])
		sent := time.Unix(0, int64(binary.BigEndian.Uint64(payload[12:])))
		if p >= len(l.seen) || n > math.MaxInt32 || !sp.Matches(p, n) {
			l.extra++
			continue
		}
		for uint64(len(l.seen[p])) <= n {
			l.seen[p] = append(l.seen[p], false)
		}
		if l.seen[p][n] {
			l.extra++
			continue
		}
		l.seen[p][n] = true
		if b := int(now.Sub(start) / bin); b >= 0 && b < len(l.arrived) {
			l.arrived[b]++
		}
		l.latency = append(l.latency, now.Sub(sent))
	}
}

func (c Config) setBandwidth(ctx context.Context, s Scenario, bw float64) error {
	if c.Network == nil {
		return nil
	}
	return c.Network.SetBandwidth(ctx, s.Bottleneck[0], s.Bottleneck[1], bw)
}

func (c Config) sent(ctx context.Context, s Scenario) (uint64, error) {
	if c.Network == nil {
		return 0, nil
	}
	return c.Network.Sent(ctx, s.Bottleneck[0], s.Bottleneck[1])
}
