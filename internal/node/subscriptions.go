package node

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dripmesh/drip/internal/content"
	"github.com/dripmesh/drip/internal/encoding"
	"github.com/dripmesh/drip/internal/linkstate"
	"github.com/dripmesh/drip/internal/match"
	"github.com/dripmesh/drip/internal/qos"
	"k8s.io/utils/clock"
)

type subscriptionsConfig struct {
	max, queue, queueBytes int
	enc                    encoding.Params
	broker                 string // name, for acknowledgements
	slow                   SlowSubscribers
	clock                  clock.WithTicker // stall times and waits for room
	start                  time.Time        // the origin of now
	budget                 *Budget          // broker-wide, shared with the link queues
}

// now reads the subscriptions' monotonic clock, in nanoseconds.
func (c *subscriptionsConfig) now() int64 { return int64(c.clock.Since(c.start)) }

// subscriptionTable is the LOCAL-PREDICATES table (Carzaniga09 §2.2): the exact
// index used for local delivery plus each subscription's encoded filters
// for the advertisement. It tells its owner about every change through
// changed, never through a pointer back.
type subscriptionTable struct {
	cfg     subscriptionsConfig
	m       *metrics
	changed func()

	mu       sync.Mutex // guards all below; match.Index is not concurrent
	index    *match.Index
	byID     map[match.SubscriberID]*Subscription
	nextID   match.SubscriberID
	closed   bool
	draining *DrainNotice // once the broker drains
	filters  int
}

func newSubscriptions(cfg subscriptionsConfig, m *metrics, changed func()) *subscriptionTable {
	return &subscriptionTable{cfg: cfg, m: m, changed: changed, index: match.New(), byID: map[match.SubscriberID]*Subscription{}}
}

func (s *subscriptionTable) add(p content.Predicate, f qos.Flow, client string) (*Subscription, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closed:
		return nil, ErrStopped
	case s.draining != nil:
		return nil, ErrDraining
	case len(s.byID) >= s.cfg.max:
		return nil, &LimitError{What: "subscriptions", Limit: s.cfg.max}
	}
	s.nextID++
	sub := &Subscription{
		s:      s,
		id:     s.nextID,
		client: client,
		queue:  deque{ready: make(chan struct{}, 1)},
		wake:   make(chan struct{}, 1),
		done:   make(chan struct{}),
		drain:  make(chan struct{}),
		room:   make(chan struct{}, 1),
	}
	if err := s.setLocked(sub, p, f, true); err != nil {
		return nil, err
	}
	s.byID[sub.id] = sub
	return sub, nil
}

func (s *subscriptionTable) setLocked(sub *Subscription, p content.Predicate, f qos.Flow, isNew bool) error {
	if err := checkFlow(f); err != nil {
		return err
	}
	var err error
	if isNew {
		err = s.index.Add(sub.id, p)
	} else {
		err = s.index.Replace(sub.id, p)
	}
	if err != nil {
		return &InvalidError{err}
	}
	s.filters += len(p) - len(sub.pred)
	sub.pred = p
	sub.flow = f
	sub.deadline.Store(int64(f.Deadline))
	sub.encoded = s.cfg.enc.EncodePredicate(p)
	s.m.localSubs.Set(float64(s.index.Len()))
	s.m.filters.Set(float64(s.filters))
	s.changed()
	return nil
}

func (s *subscriptionTable) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.byID)
}

// describe lists up to max subscriptions as "client: predicate", each
// predicate cut to 80 bytes, for a log line.
func (s *subscriptionTable) describe(max int) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, sub := range s.byID {
		if len(out) == max {
			break
		}
		p := sub.pred.String()
		if len(p) > 80 {
			p = p[:77] + "..."
		}
		out = append(out, sub.client+": "+p)
	}
	slices.Sort(out)
	return out
}

// drain tells every subscriber, now and later, that the broker drains.
func (s *subscriptionTable) drain(notice DrainNotice) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.draining = &notice
	for _, sub := range s.byID {
		sub.notice.Store(s.draining)
		close(sub.drain)
	}
}

// closeAll ends every subscription (shutdown).
func (s *subscriptionTable) closeAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	s.closed = true
	for _, sub := range s.byID {
		close(sub.done)
	}
}

// MaxDeadline bounds a subscription's deadline: beyond an hour a deadline
// says nothing a WAN path could break, and the bound keeps budget
// arithmetic far from overflow.
const MaxDeadline = time.Hour

// checkFlow refuses a deadline no broker could keep or compute with.
func checkFlow(f qos.Flow) error {
	if f.Deadline < 0 || f.Deadline > MaxDeadline {
		return invalid("deadline_ns = %d (%v): want 0 (none) or a duration up to %v", int64(f.Deadline), f.Deadline, MaxDeadline)
	}
	return nil
}

// advertisement returns the Bloom filters of every local filter and the
// QoS classes of the subscriptions with a deadline or two paths.
func (s *subscriptionTable) advertisement() ([]encoding.Bloom, []linkstate.QoSClass) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ids := make([]match.SubscriberID, 0, len(s.byID))
	for id := range s.byID {
		ids = append(ids, id)
	}
	// In subscription order, so that equal subscriptions give equal
	// advertisements (and the simulator replays byte for byte).
	slices.Sort(ids)
	all := make([]encoding.Bloom, 0, s.filters)
	var reqs []qos.Request
	for _, id := range ids {
		sub := s.byID[id]
		all = append(all, sub.encoded...)
		if sub.flow != (qos.Flow{}) {
			reqs = append(reqs, qos.Request{Flow: sub.flow, Filters: sub.encoded})
		}
	}
	return all, qos.Classes(reqs)
}

// matching appends to targets every local subscriber m matches, exactly.
// ids is scratch space; both are returned for reuse.
func (s *subscriptionTable) matching(m content.Message, ids []match.SubscriberID, targets []*Subscription) ([]match.SubscriberID, []*Subscription) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ids = s.index.Match(m, ids[:0])
	for _, id := range ids {
		targets = append(targets, s.byID[id])
	}
	return ids, targets
}

// shed makes room in the budget for a delivery to sub whose bytes are
// already added: it drops the oldest deliveries of the subscriber holding
// the most bytes (sub itself, if it does), then of the next, until the
// budget holds again; false when it cannot, every subscriber queue being
// empty (the link queues hold the budget), and the new delivery is then
// the one dropped. It sheds down to a low-water mark a sixteenth under
// the limit, so that a subscriber that keeps falling behind costs a scan
// of the subscriptions per sixteenth of the budget, not per message.
// Shedding never touches the link queues (see budget).
func (s *subscriptionTable) shed(sub *Subscription) bool {
	b := s.cfg.budget
	low := b.limit - b.limit/16
	s.mu.Lock()
	defer s.mu.Unlock()
	for range len(s.byID) + 1 {
		if b.over(b.Used()) <= 0 {
			return true
		}
		var victim *Subscription
		var most int64
		for _, c := range s.byID {
			if n := c.bytes.Load(); n > most {
				victim, most = c, n
			}
		}
		if victim == nil {
			return false
		}
		var shed uint64
		for b.Used() > low {
			q, ok := victim.queue.take()
			if !ok {
				break
			}
			victim.Dequeued(q)
			shed++
		}
		if shed > 0 {
			s.m.budgetShed.Add(float64(shed))
			victim.lose(shed)
		}
	}
	return b.over(b.Used()) <= 0
}

// Subscription is one local subscriber: its predicate and its bounded queue
// of deliveries. The stream serving it reads Deliveries and reports losses;
// a harness may read it directly.
type Subscription struct {
	s       *subscriptionTable
	id      match.SubscriberID
	client  string
	queue   deque        // the deliveries, oldest first
	bytes   atomic.Int64 // encoded bytes queued
	lost    atomic.Uint64
	wake    chan struct{} // a loss to report
	done    chan struct{} // closed when the broker ends the subscription
	drain   chan struct{} // closed when the broker starts draining
	notice  atomic.Pointer[DrainNotice]
	encoded []encoding.Bloom
	pred    content.Predicate
	flow    qos.Flow // deadline and two paths (docs/design.md §11)
	// deadline is flow.Deadline for the data plane, which reads it
	// without the lock; missed counts deliveries queued after it.
	deadline atomic.Int64
	missed   atomic.Uint64

	// Backpressure: while a sender is attached, a full queue makes
	// publishers wait for room, unless the subscriber is stalled.
	attached atomic.Bool
	sending  atomic.Int64  // when the current send began (now()); 0: not sending
	room     chan struct{} // capacity 1: the sender took something
}

// ID identifies the subscription in the broker's logs.
func (sub *Subscription) ID() uint64 { return uint64(sub.id) }

// Replace swaps the predicate and the flow atomically: every message is
// matched against either the old or the new predicate, never both.
func (sub *Subscription) Replace(p content.Predicate, f qos.Flow) error {
	s := sub.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrStopped
	}
	return s.setLocked(sub, p, f, false)
}

// Flow is what the subscription asks of its messages' delivery.
func (sub *Subscription) Flow() qos.Flow {
	sub.s.mu.Lock()
	defer sub.s.mu.Unlock()
	return sub.flow
}

// DeadlineMisses counts the deliveries queued for the subscription after
// its deadline, as the mesh measured their time since acceptance.
func (sub *Subscription) DeadlineMisses() uint64 { return sub.missed.Load() }

// Close removes the subscription.
func (sub *Subscription) Close() {
	s := sub.s
	s.mu.Lock()
	defer s.mu.Unlock()
	// What is queued leaves the budget with the subscription, and
	// nothing more is queued.
	sub.release()
	if s.byID[sub.id] != sub {
		return
	}
	delete(s.byID, sub.id)
	s.index.Remove(sub.id)
	s.filters -= len(sub.pred)
	s.m.localSubs.Set(float64(s.index.Len()))
	s.m.filters.Set(float64(s.filters))
	s.changed()
}

// Ack is what a subscriber is told once its predicate is installed.
type Ack struct {
	ID        uint64
	Predicate content.Predicate // as installed: narrowed by authorization, say
	Broker    string            // the node's name
	Flow      qos.Flow
}

// Acknowledgement is the Ack of the current predicate.
func (sub *Subscription) Acknowledgement() Ack {
	s := sub.s
	s.mu.Lock()
	defer s.mu.Unlock()
	return Ack{ID: uint64(sub.id), Predicate: sub.pred, Broker: s.cfg.broker, Flow: sub.flow}
}

// DrainNotice tells a subscriber that its broker is leaving: it should
// subscribe at another broker before Deadline, and keep this subscription
// for Overlap after the new one is acknowledged, the time the mesh needs to
// learn where it went.
type DrainNotice struct {
	Deadline time.Time
	Overlap  time.Duration
}

// Ready receives when deliveries may be waiting: call Take until it
// returns false. Call Dequeued for each delivery taken, which frees its
// bytes.
func (sub *Subscription) Ready() <-chan struct{} { return sub.queue.ready }

// Take takes the oldest queued delivery, if any.
func (sub *Subscription) Take() (Queued, bool) { return sub.queue.take() }

// Queued is the number of deliveries waiting.
func (sub *Subscription) Queued() int { return sub.queue.len() }

// Dequeued releases a taken delivery's bytes from the queue's bound, and
// wakes a publisher waiting for room.
func (sub *Subscription) Dequeued(q Queued) {
	size := int64(q.size())
	sub.bytes.Add(-size)
	sub.s.cfg.budget.add(-size)
	select {
	case sub.room <- struct{}{}:
	default:
	}
}

// release closes the queue of an ended subscription and empties it,
// freeing its bytes.
func (sub *Subscription) release() {
	for _, q := range sub.queue.close() {
		sub.Dequeued(q)
	}
}

// LossSignal receives when a delivery was dropped since it last did.
func (sub *Subscription) LossSignal() <-chan struct{} { return sub.wake }

// Lost is the number of deliveries dropped over the subscription's life.
func (sub *Subscription) Lost() uint64 { return sub.lost.Load() }

// Done is closed when the broker ends the subscription.
func (sub *Subscription) Done() <-chan struct{} { return sub.done }

// Draining is closed when the broker starts draining; DrainNotice then
// says what to tell the subscriber.
func (sub *Subscription) Draining() <-chan struct{} { return sub.drain }

// DrainNotice is the notice, once Draining is closed.
func (sub *Subscription) DrainNotice() DrainNotice { return *sub.notice.Load() }

// SlowSubscribers is what a broker does when a subscriber's queue is full.
// A subscriber whose stream has not taken a delivery for Stalled is slow:
// its client reads too slowly, or its network is too slow. Its deliveries
// are dropped and reported to it as Lost — after waiting up to Block for
// room, if Block is positive, which slows the publishers instead. A full
// queue whose subscriber is not slow means the broker itself is behind:
// the publisher waits until there is room, up to Behind, and only then is
// the delivery dropped. So a subscriber that keeps up loses nothing, and a
// publisher is slowed by flow control rather than losing messages.
type SlowSubscribers struct {
	Stalled time.Duration
	Block   time.Duration
	Behind  time.Duration
}

// Attach says a sender now serves the subscription: from then on a full
// queue makes publishers wait for it (SlowSubscribers). Sending marks the
// span of each send, which is how a stalled subscriber is told apart.
func (sub *Subscription) Attach() { sub.attached.Store(true) }

// Sending brackets one send on the subscription's stream: call it with
// true before and false after.
func (sub *Subscription) Sending(active bool) {
	if active {
		sub.sending.Store(sub.s.cfg.now())
	} else {
		sub.sending.Store(0)
	}
}

// stalled says whether the current send has lasted longer than d.
func (sub *Subscription) stalled(d time.Duration) bool {
	since := sub.sending.Load()
	return since != 0 && sub.s.cfg.now()-since > int64(d)
}

// tryQueue queues q if the queue has room. Its bytes are already in the
// budget (offer reserved them).
func (sub *Subscription) tryQueue(q Queued) bool {
	size := int64(q.size())
	if sub.bytes.Add(size) <= int64(sub.s.cfg.queueBytes) && sub.queue.push(q, sub.s.cfg.queue) {
		return true
	}
	sub.bytes.Add(-size)
	return false
}

// offer queues a delivery. It first reserves the delivery's bytes in the
// broker's budget, shedding from the subscriber that holds the most when
// they do not fit (shed). A full queue then makes the caller — a publish
// stream or a link reader — wait for room as SlowSubscribers says, and
// drops the delivery and records the loss when it may not wait.
func (sub *Subscription) offer(q Queued) {
	s := sub.s
	m := s.m
	size := int64(q.size())
	if b := s.cfg.budget; b.over(b.add(size)) > 0 && !s.shed(sub) {
		b.add(-size)
		m.budgetShed.Inc()
		sub.lose(1)
		return
	}
	if sub.tryQueue(q) {
		m.delivered.Inc()
		return
	}
	if sub.queue.isClosed() {
		// Matched just before the subscriber left: nobody to deliver
		// to, nothing to wait for.
		s.cfg.budget.add(-size)
		return
	}
	if sub.attached.Load() && sub.wait(q) {
		m.delivered.Inc()
		return
	}
	s.cfg.budget.add(-size)
	m.subscriberDropped.Inc()
	sub.lose(1)
}

// lose records n deliveries dropped and wakes the stream to report them.
func (sub *Subscription) lose(n uint64) {
	sub.lost.Add(n)
	select {
	case sub.wake <- struct{}{}:
	default:
	}
}

// wait waits for room for q and queues it; false when it may wait no more.
func (sub *Subscription) wait(q Queued) bool {
	pol := sub.s.cfg.slow
	start := sub.s.cfg.now()
	var timer clock.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		limit := pol.Behind
		if sub.stalled(pol.Stalled) {
			limit = pol.Block
		}
		left := time.Duration(start + int64(limit) - sub.s.cfg.now())
		if left <= 0 {
			return false
		}
		// Wake at least every Stalled to look again whether the
		// subscriber has stalled meanwhile.
		wait := min(left, max(pol.Stalled, time.Millisecond))
		if timer == nil {
			timer = sub.s.cfg.clock.NewTimer(wait)
		} else {
			timer.Reset(wait)
		}
		select {
		case <-sub.room:
		case <-timer.C():
		case <-sub.done:
			return false
		}
		if sub.tryQueue(q) {
			return true
		}
	}
}
