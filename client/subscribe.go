package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	dripv1 "github.com/dripmesh/drip/api/proto/drip/v1"
	"github.com/dripmesh/drip/internal/content"
	"github.com/dripmesh/drip/internal/dedup"
	"github.com/dripmesh/drip/internal/rawcodec"
)

// ErrClosed is returned by Next and Update after Close.
var ErrClosed = errors.New("drip client: subscription closed")

// Gap is a time when no broker held a subscription: its broker failed, and
// the client subscribed again, here or at another broker. Messages
// published meanwhile were not delivered to it.
type Gap struct {
	Start, End time.Time
	From, To   string // names of the brokers before and after
	Err        error  // why the stream to From ended
}

// Duration is how long the gap lasted.
func (g Gap) Duration() time.Duration { return g.End.Sub(g.Start) }

// Subscription is a live subscription. Read deliveries with Next; Close it
// when done, which also stops its receive goroutine.
type Subscription struct {
	c      *Client
	ctx    context.Context // ends the subscription: Close or the caller's context
	parent context.Context // the caller's, to tell its cancellation from Close
	cancel context.CancelFunc

	out    chan Delivery    // closed by run when it exits
	evs    chan streamEvent // from the streams' receive goroutines
	wakeup chan struct{}    // capacity 1: an Update wants sending
	exited chan struct{}    // closed when run has returned

	mu        sync.Mutex
	pred      string // the latest predicate asked for
	gen       uint64 // bumped by each Update
	ackedGen  uint64 // the newest predicate a broker acknowledged
	id        uint64
	predicate string
	broker    string
	ackCh     chan struct{} // closed and replaced at each ack, closed for good at the end
	ended     bool          // the subscription has ended; err says how
	err       error
	closed    bool // Close was called
	gaps      []Gap

	lost   atomic.Uint64 // every loss: the brokers' reports and the client's own drops
	seen   atomic.Uint64 // the part of lost Next has stamped on deliveries
	losses chan struct{} // capacity 1: lost grew
	dups   atomic.Uint64
	misses atomic.Uint64
	cc     *subCC // congestion control, if on; run's
	// What the subscription asks of delivery (docs/design.md §11); fixed
	// for its life.
	deadline time.Duration
	twoPaths bool
	// fields says deliveries carry Fields, not an Attrs map (WithFields).
	fields bool
}

// SubscribeOption asks something of a subscription's delivery.
type SubscribeOption func(*Subscription)

// WithDeadline asks that every message the subscription matches reach its
// broker within d of its acceptance at the ingress broker (at most an
// hour): the mesh sends such messages first at every link, and routes
// around a link whose measured delay breaks the deadline at once instead
// of at its next periodic check. A delivery later than d is counted
// (Subscription.DeadlineMisses); it is still delivered. Brokers that
// predate deadlines install the subscription without one.
func WithDeadline(d time.Duration) SubscribeOption {
	return func(s *Subscription) { s.deadline = d }
}

// WithTwoPaths asks that every message the subscription matches travel two
// link-disjoint paths (the least overlapping where the mesh has none),
// the first copy delivered: a link failure on one path then loses nothing,
// at the cost of the second copy's bytes on every link it crosses.
func WithTwoPaths() SubscribeOption {
	return func(s *Subscription) { s.twoPaths = true }
}

// WithFields has deliveries carry their attributes as Fields, not as an
// Attrs map: a subscriber that reads them so allocates no map and boxes no
// value per message.
func WithFields() SubscribeOption {
	return func(s *Subscription) { s.fields = true }
}

// subStream is one Subscribe stream to one broker; a subscription has one,
// or two while it moves off a draining broker.
type subStream struct {
	grpc     dripv1.Broker_SubscribeClient
	cancel   context.CancelFunc
	addr     string
	broker   string
	acked    bool
	sentGens []uint64   // predicates sent and not yet acknowledged, oldest first
	lost     uint64     // the broker's running total of losses on this stream
	draining bool       // the broker said it drains
	replaces *subStream // on a replacement: the draining stream it replaces
	overlap  time.Duration
	deadline time.Time // when a draining broker will have left (zero: not draining, or not said)
	closeAt  time.Time // when a drained stream is to be closed (zero: not yet known)
	// On a drained stream whose replacement is installed: the messages it
	// delivered first since then, not yet seen on the replacement, by
	// when they came. The stream stays while any waits longer than
	// half the overlap (see closeDrained).
	uncovered map[dedup.Stamp]time.Time
	// spare is a frame's deliveries, handled, for the receive goroutine
	// to decode the next frame into (reuse).
	spare chan []Delivery
}

// reuse hands msgs, whose deliveries run has taken, back to the receive
// goroutine: a slice a frame, grown from nothing, was a third of what a
// subscriber allocated.
func (st *subStream) reuse(msgs []Delivery) {
	if cap(msgs) == 0 || cap(msgs) > maxSpareDeliveries {
		return
	}
	clear(msgs)
	select {
	case st.spare <- msgs[:0]:
	default:
	}
}

// A stream keeps at most two handled slices for reuse (one was missed
// about half the time: the receive goroutine decodes the next frame while
// run still handles the last), of at most maxSpareDeliveries each: at most
// 750 KB an idle stream holds, after frames of the smallest deliveries,
// about as much as one frame of them decoded.
const maxSpareDeliveries = 2048

// spareMsgs is a slice to decode a frame's deliveries into.
func (st *subStream) spareMsgs() []Delivery {
	select {
	case msgs := <-st.spare:
		return msgs
	default:
		return nil
	}
}

// deliveryQueue is the deliveries waiting for Next, first in, first out,
// in space it reuses.
type deliveryQueue struct {
	buf  []Delivery
	head int // buf[head:] are queued
}

func (q *deliveryQueue) len() int        { return len(q.buf) - q.head }
func (q *deliveryQueue) front() Delivery { return q.buf[q.head] }
func (q *deliveryQueue) all() []Delivery { return q.buf[q.head:] }

func (q *deliveryQueue) push(d Delivery) {
	if len(q.buf) == cap(q.buf) && q.head >= len(q.buf)/2 {
		// Half the space is behind the head: move down rather than grow.
		n := copy(q.buf, q.buf[q.head:])
		clear(q.buf[n:])
		q.buf, q.head = q.buf[:n], 0
	}
	q.buf = append(q.buf, d)
}

func (q *deliveryQueue) pop() {
	q.buf[q.head] = Delivery{}
	q.head++
	if q.head == len(q.buf) {
		q.buf, q.head = q.buf[:0], 0
	}
}

// maxUncovered bounds what a drained stream remembers of the messages only
// it delivered: one more is as good a reason to keep it as the rest.
const maxUncovered = 1 << 12

// streamEvent is what a stream's receive goroutine hands run: decoded
// deliveries, another event, or the error that ended the stream.
type streamEvent struct {
	st   *subStream
	msgs []Delivery
	d    *dripv1.Delivery
	err  error
}

// Subscribe opens a subscription with predicate in the predicate language
// (docs/design.md §1), for example
//
//	agency = "AP" && priority = 2 || keywords contains "Italy"
//
// and returns once a broker has installed it, trying the client's brokers
// in turn. A predicate the broker rejects is an error with
// codes.InvalidArgument whose message names the byte offset of the
// problem. The subscription lasts until Close or until ctx is cancelled;
// when its broker fails it subscribes again (WithGapHandler reports the
// gap), and when its broker drains it moves to another before leaving, so
// nothing is lost; each message is delivered once.
//
// Options ask for a delivery deadline (WithDeadline) or two paths
// (WithTwoPaths).
func (c *Client) Subscribe(ctx context.Context, predicate string, opts ...SubscribeOption) (*Subscription, error) {
	return c.subscribe(ctx, predicate, c.opts.congestionFeedback, opts...)
}

func (c *Client) subscribe(ctx context.Context, predicate string, controlled bool, opts ...SubscribeOption) (*Subscription, error) {
	if err := checkPredicate(predicate); err != nil {
		return nil, fmt.Errorf("drip client: %w", err)
	}
	sctx, cancel := context.WithCancel(ctx)
	s := &Subscription{
		c: c, ctx: sctx, parent: ctx, cancel: cancel,
		out:    make(chan Delivery, c.opts.bufferSize),
		evs:    make(chan streamEvent),
		wakeup: make(chan struct{}, 1),
		losses: make(chan struct{}, 1),
		exited: make(chan struct{}),
		pred:   predicate, gen: 1, ackCh: make(chan struct{}),
	}
	for _, o := range opts {
		o(s)
	}
	if s.deadline < 0 || s.deadline > maxDeadline {
		cancel()
		return nil, fmt.Errorf("drip client: %w", invalidArgument{fmt.Errorf("deadline %v: want 0 (none) or a duration up to %v", s.deadline, maxDeadline)})
	}
	if controlled {
		s.cc = newSubCC()
	}
	filter, err := dedup.New(dedup.ClientConfig())
	if err != nil {
		cancel()
		return nil, err
	}
	st, ack, err := s.connect(ctx, "")
	if err != nil {
		cancel()
		return nil, fmt.Errorf("drip client: subscribing on %s: %w", c.target, ctxOr(ctx, err))
	}
	s.acked(st, ack)
	if s.cc != nil {
		s.cc.setPredicate(ack.GetPredicate())
	}
	go s.receive(st)
	go s.run(st, filter)
	return s, nil
}

// connect opens a stream and waits for the broker's acknowledgement, trying
// the client's addresses in turn (except avoid) until one answers, a broker
// rejects the predicate, or ctx ends.
func (s *Subscription) connect(ctx context.Context, avoid string) (*subStream, *dripv1.Subscribed, error) {
	r := s.c.newRetrier()
	for {
		st, ack, err := s.open(ctx, avoid)
		if err == nil {
			return st, ack, nil
		}
		var pe *protocolError
		if permanent(err) || errors.As(err, &pe) || ctx.Err() != nil {
			return nil, nil, err
		}
		wait, ok := r.next(ctx)
		if !ok {
			return nil, nil, err
		}
		if err := sleep(ctx, wait); err != nil {
			return nil, nil, err
		}
	}
}

// open makes one attempt: a stream to the current address, the request,
// and the first event, which must acknowledge it.
func (s *Subscription) open(ctx context.Context, avoid string) (*subStream, *dripv1.Subscribed, error) {
	st, err := s.start(avoid)
	if err != nil {
		return nil, nil, err
	}
	type result struct {
		ev  streamEvent
		err error
	}
	res := make(chan result, 1)
	go func() {
		ev := s.recv(st)
		res <- result{ev, ev.err}
	}()
	var r result
	select {
	case r = <-res:
	case <-ctx.Done():
		st.cancel()
		<-res
		return nil, nil, ctx.Err()
	}
	if r.err != nil {
		st.cancel()
		if !permanent(r.err) {
			s.c.failed(st.addr)
		}
		return nil, nil, fmt.Errorf("broker %s: %w", st.addr, r.err)
	}
	ack := r.ev.d.GetSubscribed()
	if ack == nil {
		st.cancel()
		what := "a delivery"
		if r.ev.d != nil {
			what = fmt.Sprintf("%T", r.ev.d.GetEvent())
		}
		return nil, nil, &protocolError{fmt.Sprintf("broker %s sent %s before acknowledging the predicate", st.addr, what)}
	}
	st.acked = true
	st.broker = ack.GetBroker()
	return st, ack, nil
}

// protocolError is a broker breaking the protocol: no use retrying.
type protocolError struct{ msg string }

func (e *protocolError) Error() string { return e.msg }

// start opens a stream at the current address (or the next, if that is
// avoid) and sends the predicate; the acknowledgement follows as an event.
func (s *Subscription) start(avoid string) (*subStream, error) {
	cc, addr, err := s.c.useOther(avoid)
	if err != nil {
		return nil, err
	}
	sctx, cancel := context.WithCancel(s.ctx)
	stream, err := dripv1.NewBrokerClient(cc).Subscribe(sctx)
	if err != nil {
		cancel()
		s.c.failed(addr)
		return nil, fmt.Errorf("broker %s: %w", addr, err)
	}
	s.mu.Lock()
	pred, gen := s.pred, s.gen
	s.mu.Unlock()
	st := &subStream{grpc: stream, cancel: cancel, addr: addr, sentGens: []uint64{gen}, spare: make(chan []Delivery, 2)}
	// A Send error (io.EOF when the broker ended the stream) carries no
	// status; the Recv that follows returns it.
	_ = stream.Send(s.request(pred))
	return st, nil
}

// recv reads one event from a stream in its wire form: deliveries are
// decoded here, on the receiving goroutine, other events with protobuf.
func (s *Subscription) recv(st *subStream) streamEvent {
	var raw rawcodec.Raw
	if err := st.grpc.RecvMsg(&raw); err != nil {
		return streamEvent{st: st, err: err}
	}
	msgs, ok, err := deliveriesFromWire(raw.B, st.spareMsgs(), s.fields)
	switch {
	case err != nil:
		return streamEvent{st: st, err: &protocolError{fmt.Sprintf("broker %s sent a malformed delivery: %v", st.addr, err)}}
	case ok:
		return streamEvent{st: st, msgs: msgs}
	}
	d := new(dripv1.Delivery)
	if err := proto.Unmarshal(raw.B, d); err != nil {
		return streamEvent{st: st, err: &protocolError{fmt.Sprintf("broker %s sent an undecodable event: %v", st.addr, err)}}
	}
	if m := d.GetMessage(); m != nil {
		// Not in the form the fast path reads (an unusual encoder):
		// decode it field by field from protobuf's bytes.
		b, _ := proto.Marshal(m)
		one, err := deliveryFromWire(b, s.fieldSpace())
		if err != nil {
			return streamEvent{st: st, err: &protocolError{fmt.Sprintf("broker %s sent a malformed delivery: %v", st.addr, err)}}
		}
		return streamEvent{st: st, msgs: []Delivery{one}}
	}
	return streamEvent{st: st, d: d}
}

// fieldSpace is where the fields of a delivery are decoded: nil for an
// Attrs map.
func (s *Subscription) fieldSpace() *Fields {
	if !s.fields {
		return nil
	}
	return &Fields{}
}

// receive hands a stream's events to run, one at a time, so that a reader
// that falls behind makes gRPC flow control hold the broker back.
func (s *Subscription) receive(st *subStream) {
	for {
		ev := s.recv(st)
		select {
		case s.evs <- ev:
		case <-s.ctx.Done():
			return
		}
		if ev.err != nil {
			return
		}
	}
}

// ID returns the identifier the broker gave the subscription in its latest
// acknowledgement.
func (s *Subscription) ID() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.id
}

// Predicate returns the predicate installed by the latest acknowledgement,
// in the broker's canonical text form.
func (s *Subscription) Predicate() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.predicate
}

// Broker returns the name of the broker holding the subscription.
func (s *Subscription) Broker() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.broker
}

// Lost returns the number of matching messages lost over the
// subscription's life because it was read too slowly: those brokers
// dropped and reported, and those the client dropped itself when its
// buffer stayed full (WithBufferWait). It counts a loss as soon as the
// client learns of it, not when the deliveries before it are read.
func (s *Subscription) Lost() uint64 { return s.lost.Load() }

// Losses receives when Lost has grown since it last did, for a reader that
// wants to hear of losses without waiting for its next delivery.
func (s *Subscription) Losses() <-chan struct{} { return s.losses }

// takeLost is what Next stamps on a delivery: the losses learned since the
// previous stamp, and the total.
func (s *Subscription) takeLost() (n, total uint64) {
	for {
		seen, total := s.seen.Load(), s.lost.Load()
		if total <= seen {
			return 0, seen
		}
		if s.seen.CompareAndSwap(seen, total) {
			return total - seen, total
		}
	}
}

// DeadlineMisses is the number of deliveries later than the subscription's
// deadline (WithDeadline), by the time since acceptance the mesh measured
// (Delivery.Elapsed).
func (s *Subscription) DeadlineMisses() uint64 { return s.misses.Load() }

// Duplicates returns the number of copies the client dropped because it had
// delivered the same message before (while moving between brokers).
func (s *Subscription) Duplicates() uint64 { return s.dups.Load() }

// Gaps returns every gap so far (see Gap).
func (s *Subscription) Gaps() []Gap {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Gap(nil), s.gaps...)
}

// Next returns the next delivery, waiting for one until ctx ends. When the
// subscription is over it returns, after any buffered deliveries: ErrClosed
// after Close; the Subscribe context's error after its cancellation; io.EOF
// when the broker ended the stream cleanly; otherwise the error that ended
// it (a predicate a broker rejected, or no broker reachable within
// WithFailoverWait). Cancelling ctx only abandons this call.
func (s *Subscription) Next(ctx context.Context) (Delivery, error) {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return Delivery{}, ErrClosed
	}
	select {
	case d, ok := <-s.out:
		if !ok {
			return Delivery{}, s.endErr()
		}
		d.Lost, d.LostTotal = s.takeLost()
		return d, nil
	case <-ctx.Done():
		return Delivery{}, ctx.Err()
	}
}

// Update replaces the predicate and returns once a broker has installed
// the new one; deliveries keep flowing meanwhile, and the broker neither
// loses nor duplicates one across the switch. A syntax error is reported
// without contacting the broker and leaves the subscription as it was; a
// predicate the broker rejects for another reason (a size limit) ends the
// subscription with that error, as the protocol prescribes. If the broker
// fails meanwhile, the subscription comes back with the new predicate.
func (s *Subscription) Update(predicate string) error {
	if err := checkPredicate(predicate); err != nil {
		return fmt.Errorf("drip client: update: %w", err)
	}
	s.mu.Lock()
	if s.closed || s.ended {
		s.mu.Unlock()
		return s.endErr()
	}
	s.pred = predicate
	s.gen++
	want := s.gen
	s.mu.Unlock()
	select {
	case s.wakeup <- struct{}{}:
	default:
	}
	for {
		s.mu.Lock()
		if s.ackedGen >= want {
			s.mu.Unlock()
			return nil
		}
		if s.ended {
			s.mu.Unlock()
			return s.endErr()
		}
		ch := s.ackCh
		s.mu.Unlock()
		<-ch
	}
}

// Close ends the subscription and waits for its receive goroutines to
// stop. Buffered deliveries are discarded. It always returns nil.
func (s *Subscription) Close() error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.cancel()
	<-s.exited
	return nil
}

// endErr translates how the subscription ended for the caller.
func (s *Subscription) endErr() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closed:
		return ErrClosed
	case s.parent.Err() != nil:
		return s.parent.Err()
	case !s.ended:
		return nil
	case errors.Is(s.err, io.EOF):
		return io.EOF
	default:
		return fmt.Errorf("drip client: subscription %d ended: %w", s.id, s.err)
	}
}

// acked records a broker's acknowledgement on st.
func (s *Subscription) acked(st *subStream, a *dripv1.Subscribed) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.id, s.predicate, s.broker = a.GetSubscriptionId(), a.GetPredicate(), a.GetBroker()
	if len(st.sentGens) > 0 {
		s.ackedGen = max(s.ackedGen, st.sentGens[0])
		st.sentGens = st.sentGens[1:]
	} else {
		s.ackedGen = max(s.ackedGen, 1)
	}
	close(s.ackCh)
	s.ackCh = make(chan struct{})
}

func (s *Subscription) end(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended {
		return
	}
	s.ended, s.err = true, err
	close(s.ackCh)
}

// runState is what the run goroutine owns.
type runState struct {
	streams []*subStream
	filter  *dedup.Filter
	backlog deliveryQueue
	// backlogBytes is the backlog's estimated memory (Delivery.cost),
	// bounded by the subscription's share of the client's read-ahead
	// (WithReadAhead, readAhead). fullSince is when the backlog reached the
	// bound (zero: below it); once it has stayed there WithBufferWait the
	// subscription reads on regardless, dropping what does not fit (eager),
	// until the backlog is down to half the bound.
	backlogBytes int
	ra           *readAhead // the client's, which backlogBytes counts in
	fullSince    time.Time
	eager        bool
	dropped      uint64 // deliveries the client dropped itself
	// A gap to attach to the next delivery.
	gap *Gap
	// The open gap: when the last stream was lost, from which broker, why.
	gapStart time.Time
	gapFrom  string
	gapErr   error
	retry    *retrier
	retryAt  <-chan time.Time
	lostBase uint64 // losses of ended streams
	ccTimer  *time.Timer
}

// run is the subscription's goroutine: the only one that reads events,
// sends on streams after the first request, and sends on out. It reads
// events while the backlog — deliveries waiting for room in out — is
// within the read-ahead, so that Lost reports reach it promptly; a full
// read-ahead holds the stream back (a slow reader pushes back on the
// broker) for WithBufferWait, then it reads on and drops what does not
// fit (hold). While an Update waits for its acknowledgement, a stream
// connects, or the subscription moves, it keeps reading and sets
// deliveries aside, so that acknowledgements cannot be stuck behind a
// full buffer.
func (s *Subscription) run(first *subStream, filter *dedup.Filter) {
	defer close(s.exited)
	// Last, once the backlog is handed over: receivers still waiting to
	// hand run an event give up.
	defer s.cancel()
	defer close(s.out)
	rs := &runState{streams: []*subStream{first}, filter: filter, ra: s.c.readAhead}
	rs.ra.subs.Add(1)
	defer func() {
		// What is left of the backlog goes to Next, or nowhere.
		rs.ra.subs.Add(-1)
		rs.ra.add(-rs.backlogBytes)
	}()
	defer func() {
		for _, st := range rs.streams {
			st.cancel()
		}
		if rs.ccTimer != nil {
			rs.ccTimer.Stop()
		}
	}()
	var timer *time.Timer
	var holdTimer *time.Timer
	defer func() {
		if holdTimer != nil {
			holdTimer.Stop()
		}
	}()
	for {
		var out chan Delivery
		var head Delivery
		if rs.backlog.len() > 0 {
			out, head = s.out, rs.backlog.front()
		}
		s.hold(rs, time.Now())
		evs := s.evs
		var holdUp <-chan time.Time
		if !rs.fullSince.IsZero() && !rs.eager && !s.eventsNeeded(rs) {
			// Holding the stream back, until the wait is up.
			evs = nil
			wait := time.Until(rs.fullSince.Add(s.c.opts.bufferWait))
			if holdTimer == nil {
				holdTimer = time.NewTimer(wait)
			} else {
				holdTimer.Reset(wait)
			}
			holdUp = holdTimer.C
		}
		var ccTimer <-chan time.Time
		if s.cc != nil {
			if at, ok := s.cc.core.NextTick(); ok {
				if rs.ccTimer == nil {
					rs.ccTimer = time.NewTimer(time.Until(at))
				} else {
					rs.ccTimer.Reset(time.Until(at))
				}
				ccTimer = rs.ccTimer.C
			}
		}
		var moveTimer <-chan time.Time
		if at, ok := nextClose(rs); ok {
			if timer == nil {
				timer = time.NewTimer(time.Until(at))
			} else {
				timer.Reset(time.Until(at))
			}
			moveTimer = timer.C
		}
		select {
		case out <- head:
			cost := head.cost()
			rs.backlog.pop()
			// Then what else fits, without another turn of this loop:
			// its select and timers cost more than the hand-over.
		more:
			for rs.backlog.len() > 0 {
				next := rs.backlog.front()
				select {
				case out <- next:
					cost += next.cost()
					rs.backlog.pop()
				default:
					break more
				}
			}
			rs.backlogBytes -= cost
			rs.ra.add(-cost)
		case ev := <-evs:
			if err := s.handle(rs, ev); err != nil {
				s.end(err)
				s.flush(rs.backlog.all())
				return
			}
		case <-s.wakeup:
			s.sendUpdate(rs)
		case <-rs.retryAt:
			rs.retryAt = nil
			s.reconnect(rs)
		case <-moveTimer:
			s.closeDrained(rs)
		case <-ccTimer:
			s.cc.tick(s.c, time.Now())
		case <-holdUp:
			// hold, at the top of the loop, turns eager.
		case <-s.ctx.Done():
			s.end(s.ctx.Err())
			return
		}
		if s.isEnded() {
			s.flush(rs.backlog.all())
			return
		}
	}
}

// hold tracks how long the read-ahead has been full, and turns the
// subscription eager once it has been for WithBufferWait: a reader that
// far behind is better served learning of its losses now — the brokers'
// Lost reports would wait on the stream behind deliveries — than by
// slowing the broker further. It turns back once the reader has caught up
// with half the read-ahead.
func (s *Subscription) hold(rs *runState, now time.Time) {
	limit := rs.ra.share()
	switch {
	case rs.backlogBytes <= limit/2:
		rs.fullSince, rs.eager = time.Time{}, false
	case rs.backlogBytes >= limit && rs.fullSince.IsZero():
		rs.fullSince = now
	}
	if !rs.fullSince.IsZero() && now.Sub(rs.fullSince) >= s.c.opts.bufferWait {
		rs.eager = true
	}
}

// storeLost publishes the subscription's loss total: the brokers' reports
// on every stream, ended or live, and the client's own drops.
func (s *Subscription) storeLost(rs *runState) {
	total := rs.lostBase + s.sumLost(rs) + rs.dropped
	if total > s.lost.Load() {
		s.lost.Store(total)
		select {
		case s.losses <- struct{}{}:
		default:
		}
	}
}

func (s *Subscription) isEnded() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ended
}

// eventsNeeded says whether run must read events even with deliveries
// waiting: an acknowledgement is due, or the subscription is between
// brokers.
func (s *Subscription) eventsNeeded(rs *runState) bool {
	s.mu.Lock()
	pending := s.ackedGen < s.gen
	s.mu.Unlock()
	if pending || len(rs.streams) != 1 {
		return true
	}
	st := rs.streams[0]
	return !st.acked || st.draining
}

// nextClose is when the earliest drained stream is due to close.
func nextClose(rs *runState) (time.Time, bool) {
	var at time.Time
	for _, st := range rs.streams {
		if !st.closeAt.IsZero() && (at.IsZero() || st.closeAt.Before(at)) {
			at = st.closeAt
		}
	}
	return at, !at.IsZero()
}

// handle takes one event from a stream. An error ends the subscription.
func (s *Subscription) handle(rs *runState, ev streamEvent) error {
	st := ev.st
	if !slices.Contains(rs.streams, st) {
		return nil // from a stream already dropped
	}
	if ev.err != nil {
		return s.streamEnded(rs, st, ev.err)
	}
	now := time.Now()
	defer st.reuse(ev.msgs)
	for _, d := range ev.msgs {
		stamp := dedup.Stamp{Origin: d.Ingress, Epoch: d.IngressEpoch, Seq: d.Seq}
		if old := st.replaces; old != nil && old.uncovered != nil {
			delete(old.uncovered, stamp) // the mesh routes it here too
		}
		if d.Seq != 0 && rs.filter.Admit(stamp, now) != dedup.First {
			s.dups.Add(1)
			continue
		}
		if rs.eager && rs.backlogBytes >= rs.ra.share() {
			// Before congestion control measures it: to the publisher
			// this is a loss like the brokers'.
			rs.dropped++
			s.storeLost(rs)
			continue
		}
		if st.uncovered != nil && d.Seq != 0 && len(st.uncovered) < maxUncovered {
			st.uncovered[stamp] = now
		}
		if s.cc != nil && d.congestion != nil {
			s.cc.receive(&d, now)
		}
		if s.deadline != 0 && d.Elapsed > s.deadline {
			s.misses.Add(1)
		}
		d.Gap, rs.gap = rs.gap, nil
		rs.backlog.push(d)
		rs.backlogBytes += d.cost()
		rs.ra.add(d.cost())
	}
	switch e := ev.d.GetEvent().(type) {
	case *dripv1.Delivery_Subscribed:
		first := !st.acked
		st.acked, st.broker = true, e.Subscribed.GetBroker()
		s.acked(st, e.Subscribed)
		if s.cc != nil {
			s.cc.setPredicate(e.Subscribed.GetPredicate())
		}
		if first {
			s.installed(rs, st)
		}
	case *dripv1.Delivery_Lost:
		st.lost = e.Lost.GetTotal()
		s.storeLost(rs)
	case *dripv1.Delivery_Draining:
		if !st.draining {
			st.draining = true
			st.overlap = time.Duration(e.Draining.GetOverlapNs())
			if ns := e.Draining.GetDeadlineUnixNano(); ns > 0 {
				st.deadline = time.Unix(0, ns)
			}
			s.move(rs, st)
		}
	default:
		// An event added to the protocol after this client was built:
		// nothing to deliver.
	}
	return nil
}

func (s *Subscription) sumLost(rs *runState) uint64 {
	var n uint64
	for _, st := range rs.streams {
		n += st.lost
	}
	return n
}

// installed runs when a stream's first acknowledgement arrives: a gap ends,
// or a move has its overlap start.
func (s *Subscription) installed(rs *runState, st *subStream) {
	s.c.moved(st.addr)
	rs.retry = nil
	if old := st.replaces; old != nil {
		// Keep both while the mesh learns where the subscriber went.
		old.closeAt = time.Now().Add(old.overlap)
		old.uncovered = map[dedup.Stamp]time.Time{}
		return
	}
	if rs.gapStart.IsZero() {
		return
	}
	g := Gap{Start: rs.gapStart, End: time.Now(), From: rs.gapFrom, To: st.broker, Err: rs.gapErr}
	rs.gapStart, rs.gapFrom, rs.gapErr = time.Time{}, "", nil
	rs.gap = &g
	s.mu.Lock()
	s.gaps = append(s.gaps, g)
	s.mu.Unlock()
	if s.c.opts.onGap != nil {
		s.c.opts.onGap(g)
	}
}

// moveConnectTimeout bounds how long a move waits for one broker to
// connect before it tries the next.
const moveConnectTimeout = 2 * time.Second

// move subscribes at another broker while the draining one still delivers.
// It tries the other brokers in order, each for at most a quarter of the
// time the draining broker has left (moveConnectTimeout at most): an
// address that does not answer must not use up the drain, at whose end
// the broker ends the stream and the subscription would have a gap. In
// Kubernetes that is the broker replaced just before in a rolling update,
// whose pod's name cluster DNS keeps answering with the old pod's IP for
// up to 30 s; a connection to it hangs until gRPC's connect timeout.
func (s *Subscription) move(rs *runState, old *subStream) {
	for range s.c.addressCount() - 1 {
		cc, addr, err := s.c.useOther(old.addr)
		if err != nil {
			return // nowhere to go: stay until the broker ends the stream
		}
		wait := moveConnectTimeout
		if !old.deadline.IsZero() {
			wait = max(min(wait, time.Until(old.deadline)/4), 100*time.Millisecond)
		}
		ctx, cancel := context.WithTimeout(s.ctx, wait)
		err = waitReady(ctx, cc)
		cancel()
		if err != nil {
			s.c.failed(addr)
			continue
		}
		st, err := s.start(old.addr)
		if err != nil {
			continue // start marked it failed: the next round tries the next one
		}
		st.replaces = old
		rs.streams = append(rs.streams, st)
		go s.receive(st)
		return
	}
}

// closeDrained closes the drained streams whose overlap has passed and
// that the mesh no longer needs. The overlap is the broker's estimate of
// how long the mesh takes to learn the subscriber's new place; on a busy
// mesh it takes longer, and a broker that publishes still matches the
// subscriber at its old place only. Closing the old stream then would lose
// those messages, so the client checks instead of trusting the clock: a
// message the old stream delivered that the new one has not also
// delivered within half the overlap shows a broker that still routes to
// the old place only, and the old stream stays another half overlap. The
// draining broker's deadline bounds the wait: it ends the stream then.
func (s *Subscription) closeDrained(rs *runState) {
	now := time.Now()
	kept := rs.streams[:0]
	for _, st := range rs.streams {
		if !st.closeAt.IsZero() && !now.Before(st.closeAt) && st.stillNeeded(now) {
			st.closeAt = now.Add(max(st.overlap/2, minRecheck))
		}
		if !st.closeAt.IsZero() && !now.Before(st.closeAt) {
			rs.lostBase += st.lost
			st.cancel()
			st.uncovered = nil // its replacement keeps pointing at it
			continue
		}
		kept = append(kept, st)
	}
	rs.streams = kept
}

// minRecheck bounds how often a drained stream's coverage is checked again.
const minRecheck = 10 * time.Millisecond

// stillNeeded reports whether a drained stream delivered, more than half
// the overlap before now, a message its replacement has not: some broker
// still routes matching messages to it alone. It forgets those messages,
// so that each check judges the time since the last.
func (st *subStream) stillNeeded(now time.Time) bool {
	needed := false
	for stamp, at := range st.uncovered {
		if now.Sub(at) > st.overlap/2 {
			needed = true
			delete(st.uncovered, stamp)
		}
	}
	return needed
}

// streamEnded handles a stream's end: the subscription ends if the broker
// rejected it for good; otherwise, if no other stream holds it, a gap
// begins and the client subscribes again.
func (s *Subscription) streamEnded(rs *runState, st *subStream, err error) error {
	for i, x := range rs.streams {
		if x == st {
			rs.streams = append(rs.streams[:i], rs.streams[i+1:]...)
			break
		}
	}
	st.cancel()
	rs.lostBase += st.lost
	if s.ctx.Err() != nil {
		return s.ctx.Err()
	}
	var pe *protocolError
	if permanent(err) || errors.Is(err, io.EOF) || errors.As(err, &pe) {
		return err
	}
	for _, other := range rs.streams {
		if other.replaces == st {
			other.replaces = nil // the move became a failover
		}
	}
	if len(rs.streams) > 0 {
		return nil
	}
	s.c.failed(st.addr)
	if rs.gapStart.IsZero() {
		rs.gapStart, rs.gapFrom, rs.gapErr = time.Now(), st.broker, err
	}
	s.reconnect(rs)
	return nil
}

// reconnect makes one attempt to subscribe again, and schedules the next
// if it cannot start.
func (s *Subscription) reconnect(rs *runState) {
	if len(rs.streams) > 0 {
		return
	}
	if rs.retry == nil {
		rs.retry = s.c.newRetrier()
	}
	st, err := s.start("")
	if err == nil {
		rs.streams = append(rs.streams, st)
		go s.receive(st)
		return
	}
	wait, ok := rs.retry.next(s.ctx)
	if !ok {
		s.end(fmt.Errorf("no broker reachable since %v: %w", rs.gapStart.Format(time.RFC3339), err))
		return
	}
	rs.retryAt = time.After(wait)
}

// sendUpdate sends the latest predicate on every stream.
func (s *Subscription) sendUpdate(rs *runState) {
	s.mu.Lock()
	pred, gen := s.pred, s.gen
	s.mu.Unlock()
	for _, st := range rs.streams {
		if n := len(st.sentGens); n > 0 && st.sentGens[n-1] == gen {
			continue
		}
		st.sentGens = append(st.sentGens, gen)
		// A failed Send means the stream is over; its receiver reports why.
		_ = st.grpc.Send(s.request(pred))
	}
}

// request is the SubscribeRequest for predicate pred.
func (s *Subscription) request(pred string) *dripv1.SubscribeRequest {
	return &dripv1.SubscribeRequest{Predicate: &dripv1.Predicate{Text: pred}, ClientName: s.c.opts.name, AcceptBatches: true,
		DeadlineNs: int64(s.deadline), TwoPaths: s.twoPaths}
}

// flush hands the backlog to Next after the subscription has ended, unless
// it is closed first.
func (s *Subscription) flush(backlog []Delivery) {
	for _, d := range backlog {
		select {
		case s.out <- d:
		case <-s.ctx.Done():
			return
		}
	}
}

func sleep(ctx context.Context, d time.Duration) error {
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

// checkPredicate refuses, without contacting a broker, a predicate that
// does not parse or that no message can satisfy (content.CheckMatchable),
// with the broker's wording. Size limits are the broker's to apply.
// The error carries codes.InvalidArgument, as the broker's would.
func checkPredicate(predicate string) error {
	if strings.TrimSpace(predicate) == "" {
		return invalidArgument{errors.New(`predicate is empty: give at least one filter, such as a = 1`)}
	}
	p, err := content.ParseWithLimits(predicate, content.Limits{})
	if err == nil {
		err = content.CheckMatchable(p)
	}
	if err != nil {
		return invalidArgument{err}
	}
	return nil
}

// invalidArgument is an error found before contacting a broker that
// status.Code reports as codes.InvalidArgument, like the broker's own,
// without the transport's "rpc error: code = ... desc =" in its text.
type invalidArgument struct{ err error }

func (e invalidArgument) Error() string { return e.err.Error() }
func (e invalidArgument) Unwrap() error { return e.err }

// GRPCStatus makes status.Code and status.FromError see the code.
func (e invalidArgument) GRPCStatus() *status.Status {
	return status.New(codes.InvalidArgument, e.err.Error())
}
