package perf

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/dripmesh/drip/client"
	"github.com/dripmesh/drip/internal/bench"
	"github.com/dripmesh/drip/internal/content"
	"github.com/dripmesh/drip/internal/testbed/stomp"
	"github.com/dripmesh/drip/internal/testbed/systems"
)

// The harness reaches each system with its own client, the way an
// application would: drip through the client package, NATS through
// nats.go, ActiveMQ over STOMP (through internal/testbed/systems, with JMS
// selectors). Every subscriber and every publisher has a connection of its
// own. Subscribers only count; a subscriber's counting is the cheapest
// reader its client allows, so that a system that cannot keep up with it
// is a system that drops.

// clientName is what the harness's connections call themselves.
const clientName = "driplab-perf"

// natsPlainSubject carries the plain stream on NATS: routing by subject is
// what NATS does, so its plain messages are the 16-byte payload alone.
const natsPlainSubject = "perf"

// The plain stream's messages carry a few attributes: symbol = "DRIP", n
// (the sequence number, never negative) and class = 0. The plain
// subscription selects them all; the inert filters share their names and
// fail on a range; Henjes07's matching filters select class = 0.
const (
	plainPredicate = `symbol = "DRIP"`
	classPredicate = `class = 0`
)

// inertPredicate is the k-th inert filter (k ≥ 1): it shares every
// message's attributes and fails on the range, each with a distinct bound
// so that no broker can fold them into one.
func inertPredicate(k int) string { return fmt.Sprintf(`symbol = "DRIP" && n < -%d`, k) }

// plainMessage is the content.Message of the plain stream for seq.
func plainMessage(seq uint64) content.Message {
	m, _ := content.NewMessage([]content.Attribute{
		{Name: "symbol", Value: content.String("DRIP")},
		{Name: "n", Value: content.Int(int64(uint32(seq)))},
		{Name: "class", Value: content.Int(0)},
	}, nil)
	return m
}

// sub is one counting subscriber.
type sub struct {
	clk       Clock
	delivered atomic.Uint64
	probed    atomic.Bool
	foreign   atomic.Uint64 // payloads that are not the harness's
	stale     atomic.Uint64 // an earlier run's messages
	filtered  atomic.Uint64 // discarded by client-side filtering (NATS)
	lat       *latencies    // nil unless the run measures latency
	lost      func() uint64 // drops the system reported to the subscriber
	stop      func() error

	mu  sync.Mutex
	err error
}

// receive counts one delivered payload.
func (s *sub) receive(payload []byte) {
	run, seq, sent, ok := readStamp(payload)
	switch {
	case !ok:
		s.foreign.Add(1)
	case run != s.clk.run:
		s.stale.Add(1)
	case seq == probeSeq:
		s.probed.Store(true)
	default:
		s.delivered.Add(1)
		if s.lat != nil {
			s.lat.record(sent, s.clk.Now())
		}
	}
}

func (s *sub) fail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err == nil {
		s.err = err
	}
}

func (s *sub) failed() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// close ends the subscriber and its connection.
func (s *sub) close() error { return s.stop() }

// pub is one publisher.
type pub interface {
	// publish sends message seq of the publisher's stream with payload.
	// It blocks while the system pushes back.
	publish(seq uint64, payload []byte) error
	// close hands over what was sent and returns how many messages the
	// system accepted. If the system has not taken everything by the end
	// of ctx, close abandons the publisher and returns errUnsettled.
	close(ctx context.Context) (accepted uint64, err error)
}

// errUnsettled says a publisher was abandoned with messages the system
// had not yet taken (ActiveMQ with 10,000 selectors works through its
// backlog at a few hundred messages/s): the run's rates stand, its totals
// are unknown.
var errUnsettled = errors.New("the system had not taken everything sent when the harness stopped waiting")

// closeWithin runs a blocking close, giving up when ctx ends; abandon
// then unblocks it.
func closeWithin(ctx context.Context, close func() (uint64, error), abandon func()) (uint64, error) {
	type result struct {
		n   uint64
		err error
	}
	done := make(chan result, 1)
	go func() {
		n, err := close()
		done <- result{n, err}
	}()
	select {
	case r := <-done:
		return r.n, r.err
	case <-ctx.Done():
		abandon()
		<-done
		return 0, errUnsettled
	}
}

// stream is what a publisher sends: the plain stream, or the messages of a
// workload (content routing), cycled.
type stream struct {
	msgs []content.Message // nil: the plain stream
}

func (st stream) message(seq uint64) content.Message {
	if st.msgs == nil {
		return plainMessage(seq)
	}
	return st.msgs[seq%uint64(len(st.msgs))]
}

// dripDial connects to one drip broker.
func dripDial(ctx context.Context, addr string, opts ...client.Option) (*client.Client, error) {
	c, err := client.Dial(ctx, addr, append([]client.Option{client.WithName(clientName)}, opts...)...)
	if err != nil {
		return nil, fmt.Errorf("drip: connecting to %s: %w", addr, err)
	}
	return c, nil
}

// dripSubscribe opens a subscriber with predicate pred on its own
// connection to addr.
// connection to addr; with fields its deliveries come as client.Fields,
// else as Attrs maps.
func dripSubscribe(ctx context.Context, addr, pred string, clk Clock, lat *latencies, fields bool) (*sub, error) {
	c, err := dripDial(ctx, addr)
	if err != nil {
		return nil, err
	}
	sctx, cancel := context.WithCancel(context.Background())
	var opts []client.SubscribeOption
	if fields {
		opts = append(opts, client.WithFields())
	}
	s, err := c.Subscribe(sctx, pred, opts...)
	if err != nil {
		cancel()
		c.Close()
		return nil, fmt.Errorf("drip: subscribing to %q at %s: %w", pred, addr, err)
	}
	sb := &sub{clk: clk, lat: lat, lost: s.Lost}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			d, err := s.Next(sctx)
			if err != nil {
				if sctx.Err() == nil {
					sb.fail(fmt.Errorf("drip subscriber at %s: %w", addr, err))
				}
				return
			}
			sb.receive(d.Payload)
		}
	}()
	sb.stop = func() error {
		cancel()
		<-done
		return errors.Join(ignoreClosed(s.Close()), c.Close())
	}
	return sb, nil
}

// ignoreClosed drops the error of closing what its context already ended.
func ignoreClosed(err error) error {
	if errors.Is(err, client.ErrClosed) || errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// dripPub publishes on its own connection to a drip broker.
type dripPub struct {
	c      *client.Client
	cancel context.CancelFunc // aborts the publisher
	p      *client.Publisher
	st     stream
	fields client.Fields   // the plain stream's, reused: Publish encodes before it returns
	pre    []client.Fields // a workload's, converted once
	maps   bool            // a fresh Attrs map per message instead (sysDripMaps)
}

func newDripPub(ctx context.Context, addr string, st stream) (*dripPub, error) {
	c, err := dripDial(ctx, addr)
	if err != nil {
		return nil, err
	}
	pctx, cancel := context.WithCancel(ctx)
	p, err := c.NewPublisher(pctx)
	if err != nil {
		cancel()
		c.Close()
		return nil, fmt.Errorf("drip: opening a publisher at %s: %w", addr, err)
	}
	dp := &dripPub{c: c, cancel: cancel, p: p, st: st}
	for _, m := range st.msgs {
		dp.pre = append(dp.pre, bench.AppendFields(nil, m))
	}
	return dp, nil
}

// newDripMapPub is a publisher of the plain stream that builds a fresh
// Attrs map for every message (sysDripMaps).
func newDripMapPub(ctx context.Context, addr string) (*dripPub, error) {
	dp, err := newDripPub(ctx, addr, stream{})
	if err == nil {
		dp.maps = true
	}
	return dp, err
}

func (d *dripPub) publish(seq uint64, payload []byte) error {
	switch {
	case d.maps:
		return d.p.Publish(client.Message{Attrs: client.Attrs{"symbol": "DRIP", "n": int64(uint32(seq)), "class": int64(0)}, Payload: payload})
	case d.pre != nil:
		return d.p.Publish(client.Message{Fields: d.pre[seq%uint64(len(d.pre))], Payload: payload})
	}
	d.fields.Reset()
	d.fields.Str("symbol", "DRIP").Int("n", int64(uint32(seq))).Int("class", 0)
	return d.p.Publish(client.Message{Fields: d.fields, Payload: payload})
}

func (d *dripPub) close(ctx context.Context) (uint64, error) {
	defer d.c.Close()
	defer d.cancel()
	return closeWithin(ctx, func() (uint64, error) {
		sum, err := d.p.Close()
		return sum.Accepted, err
	}, d.cancel)
}

// natsConnect connects to one nats-server. Errors the connection reports
// asynchronously (a slow consumer) go to onErr.
func natsConnect(addr string, onErr func(error), extra ...nats.Option) (*nats.Conn, error) {
	opts := append([]nats.Option{nats.Name(clientName), nats.NoReconnect(), nats.Timeout(10 * time.Second)}, extra...)
	if onErr != nil {
		opts = append(opts, nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { onErr(err) }))
	}
	nc, err := nats.Connect("nats://"+addr, opts...)
	if err != nil {
		return nil, fmt.Errorf("nats: connecting to %s: %w", addr, err)
	}
	return nc, nil
}

// natsSubscribe opens a counting subscriber to the plain subject on its
// own connection to addr.
func natsSubscribe(addr string, clk Clock, lat *latencies) (*sub, error) {
	sb := &sub{clk: clk, lat: lat}
	nc, err := natsConnect(addr, func(err error) { sb.fail(fmt.Errorf("nats subscriber at %s: %w", addr, err)) })
	if err != nil {
		return nil, err
	}
	s, err := nc.Subscribe(natsPlainSubject, func(m *nats.Msg) { sb.receive(m.Data) })
	if err == nil {
		err = nc.FlushTimeout(10 * time.Second)
	}
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("nats: subscribing at %s: %w", addr, err)
	}
	sb.lost = func() uint64 {
		n, _ := s.Dropped()
		return uint64(max(n, 0))
	}
	sb.stop = func() error {
		nc.Close() // stops the handler goroutine; Close waits for nothing, so nothing to report
		return nil
	}
	return sb, nil
}

// natsPub publishes on its own connection: the plain stream as bare
// payloads on natsPlainSubject, a workload as the NATS system carries it
// (systems.EncodeNATS on systems.NATSSubject).
type natsPub struct {
	nc   *nats.Conn
	st   stream
	sent uint64
}

func newNATSPub(addr string, st stream) (*natsPub, error) {
	// A write the server does not take within the timeout fails the
	// connection instead of blocking the run past its bounds.
	nc, err := natsConnect(addr, nil, nats.FlusherTimeout(10*time.Second))
	if err != nil {
		return nil, err
	}
	return &natsPub{nc: nc, st: st}, nil
}

func (n *natsPub) publish(seq uint64, payload []byte) error {
	subject, data := natsPlainSubject, payload
	if n.st.msgs != nil {
		var err error
		if data, err = systems.EncodeNATS(n.st.message(seq), payload); err != nil {
			return err
		}
		subject = systems.NATSSubject
	}
	if err := n.nc.Publish(subject, data); err != nil {
		return fmt.Errorf("nats: publishing: %w", err)
	}
	n.sent++
	return nil
}

// close flushes: the server answers the PING once it has read everything
// before it, so everything sent was accepted.
func (n *natsPub) close(ctx context.Context) (uint64, error) {
	defer n.nc.Close()
	if err := n.nc.FlushWithContext(ctx); err != nil {
		if ctx.Err() != nil {
			return 0, errUnsettled
		}
		return 0, fmt.Errorf("nats: flushing the publisher: %w", err)
	}
	return n.sent, nil
}

// amqSubscribe opens a counting subscriber with pred (translated to a JMS
// selector by the systems adapter) on its own STOMP connection.
func amqSubscribe(ctx context.Context, dep systems.Deployment, site, pred string, clk Clock) (*sub, error) {
	p, err := content.Parse(pred)
	if err != nil {
		return nil, fmt.Errorf("activemq: predicate %q: %w", pred, err)
	}
	ep, err := dep.Connect(ctx, site)
	if err != nil {
		return nil, err
	}
	s, err := ep.Subscribe(ctx, p)
	if err != nil {
		ep.Close()
		return nil, err
	}
	sb := &sub{clk: clk, lost: s.Lost}
	sctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			b, err := s.Next(sctx)
			if err != nil {
				if sctx.Err() == nil {
					sb.fail(fmt.Errorf("activemq subscriber: %w", err))
				}
				return
			}
			sb.receive(b)
		}
	}()
	sb.stop = func() error {
		cancel()
		<-done
		return errors.Join(s.Close(), ep.Close())
	}
	return sb, nil
}

// amqPub publishes the plain stream over STOMP, each attribute a message
// property (systems.ActiveMQHeaders), to the topic the selectors watch.
type amqPub struct {
	c    *stomp.Conn
	stop func() bool // stops closing c when the run ends
	sent uint64
}

func newAMQPub(ctx context.Context, addr string) (*amqPub, error) {
	c, err := stomp.Dial(ctx, addr, stomp.Options{})
	if err != nil {
		return nil, fmt.Errorf("activemq: %w", err)
	}
	// A run that ends must unblock a Send that producer flow control
	// holds: closing the connection does.
	return &amqPub{c: c, stop: context.AfterFunc(ctx, func() { _ = c.Close() })}, nil
}

func (a *amqPub) publish(seq uint64, payload []byte) error {
	headers, err := systems.ActiveMQHeaders(plainMessage(seq))
	if err != nil {
		return err
	}
	if err := a.c.Send(systems.ActiveMQTopic, headers, payload); err != nil {
		return fmt.Errorf("activemq: %w", err)
	}
	a.sent++
	return nil
}

// close disconnects with a receipt, which ActiveMQ sends once it has
// processed everything before it.
func (a *amqPub) close(ctx context.Context) (uint64, error) {
	a.stop()
	if err := a.c.Disconnect(ctx); err != nil {
		_ = a.c.Close()
		if ctx.Err() != nil {
			return 0, errUnsettled
		}
		return 0, fmt.Errorf("activemq: disconnecting the publisher: %w", err)
	}
	return a.sent, nil
}
