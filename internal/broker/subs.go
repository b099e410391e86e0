package broker

import (
	"sync"
	"sync/atomic"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	dripv1 "github.com/dripmesh/drip/api/proto/drip/v1"
	"github.com/dripmesh/drip/internal/content"
	"github.com/dripmesh/drip/internal/encoding"
	"github.com/dripmesh/drip/internal/match"
)

type subscriptionsConfig struct {
	max, queue, queueBytes int
	enc                    encoding.Params
	broker                 string // name, for acknowledgements
}

// subscriptions is the LOCAL-PREDICATES table (Carzaniga09 §2.2): the exact
// index used for local delivery plus each subscription's encoded filters
// for the advertisement. It tells its owner about every change through
// changed, never through a pointer back.
type subscriptions struct {
	cfg     subscriptionsConfig
	m       *metrics
	changed func()

	mu       sync.Mutex // guards all below; match.Index is not concurrent
	index    *match.Index
	byID     map[match.SubscriberID]*Subscription
	nextID   match.SubscriberID
	closed   bool
	draining *dripv1.Delivery // the notice, once the broker drains
	filters  int
}

// Subscription is one local subscriber: its predicate and its bounded queue
// of deliveries. The stream serving it reads Deliveries and reports losses;
// a harness may read it directly.
type Subscription struct {
	s       *subscriptions
	id      match.SubscriberID
	client  string
	queue   chan Queued
	bytes   atomic.Int64 // encoded bytes queued
	lost    atomic.Uint64
	wake    chan struct{} // a loss to report
	done    chan struct{} // closed when the broker ends the subscription
	drain   chan struct{} // closed when the broker starts draining
	notice  atomic.Pointer[dripv1.Delivery]
	encoded []encoding.Bloom
	pred    content.Predicate
}

// Queued is one delivery waiting for its subscriber.
type Queued struct {
	Delivery *dripv1.Delivery
	size     int
}

func newSubscriptions(cfg subscriptionsConfig, m *metrics, changed func()) *subscriptions {
	return &subscriptions{cfg: cfg, m: m, changed: changed, index: match.New(), byID: map[match.SubscriberID]*Subscription{}}
}

var (
	errShuttingDown = status.Error(codes.Unavailable, "broker is shutting down")
	errDraining     = status.Error(codes.Unavailable, "broker is draining: subscribe at another broker")
)

func (s *subscriptions) add(p content.Predicate, client string) (*Subscription, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closed:
		return nil, errShuttingDown
	case s.draining != nil:
		return nil, errDraining
	case len(s.byID) >= s.cfg.max:
		return nil, status.Errorf(codes.ResourceExhausted, "broker holds its limit of %d subscriptions", s.cfg.max)
	}
	s.nextID++
	sub := &Subscription{
		s:      s,
		id:     s.nextID,
		client: client,
		queue:  make(chan Queued, s.cfg.queue),
		wake:   make(chan struct{}, 1),
		done:   make(chan struct{}),
		drain:  make(chan struct{}),
	}
	if err := s.setLocked(sub, p, true); err != nil {
		return nil, err
	}
	s.byID[sub.id] = sub
	return sub, nil
}

func (s *subscriptions) setLocked(sub *Subscription, p content.Predicate, isNew bool) error {
	var err error
	if isNew {
		err = s.index.Add(sub.id, p)
	} else {
		err = s.index.Replace(sub.id, p)
	}
	if err != nil {
		return status.Error(codes.InvalidArgument, err.Error())
	}
	s.filters += len(p) - len(sub.pred)
	sub.pred = p
	sub.encoded = s.cfg.enc.EncodePredicate(p)
	s.m.subscriptions.Set(float64(s.index.Len()))
	s.m.filters.Set(float64(s.filters))
	s.changed()
	return nil
}

func (s *subscriptions) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.byID)
}

// drain tells every subscriber, now and later, that the broker drains.
func (s *subscriptions) drain(notice *dripv1.Draining) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.draining = &dripv1.Delivery{Event: &dripv1.Delivery_Draining{Draining: notice}}
	for _, sub := range s.byID {
		sub.notice.Store(s.draining)
		close(sub.drain)
	}
}

// closeAll ends every subscription (shutdown).
func (s *subscriptions) closeAll() {
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

// encodedFilters returns the Bloom filters of every local filter.
func (s *subscriptions) encodedFilters() []encoding.Bloom {
	s.mu.Lock()
	defer s.mu.Unlock()
	all := make([]encoding.Bloom, 0, s.filters)
	for _, sub := range s.byID {
		all = append(all, sub.encoded...)
	}
	return all
}

// deliver queues d to every local subscriber m matches, exactly, and
// returns how many matched. ids is scratch space, returned for reuse.
func (s *subscriptions) deliver(m content.Message, d *dripv1.Delivery, ids []match.SubscriberID) (int, []match.SubscriberID) {
	s.mu.Lock()
	ids = s.index.Match(m, ids[:0])
	targets := make([]*Subscription, 0, len(ids))
	for _, id := range ids {
		targets = append(targets, s.byID[id])
	}
	s.mu.Unlock()
	if len(targets) == 0 {
		return 0, ids
	}
	size := proto.Size(d)
	for _, sub := range targets {
		sub.offer(Queued{d, size})
	}
	return len(targets), ids
}

// ID identifies the subscription in the broker's logs.
func (sub *Subscription) ID() uint64 { return uint64(sub.id) }

// Replace swaps the predicate atomically: every message is matched against
// either the old or the new predicate, never both.
func (sub *Subscription) Replace(p content.Predicate) error {
	s := sub.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errShuttingDown
	}
	return s.setLocked(sub, p, false)
}

// Close removes the subscription.
func (sub *Subscription) Close() {
	s := sub.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byID[sub.id] != sub {
		return
	}
	delete(s.byID, sub.id)
	s.index.Remove(sub.id)
	s.filters -= len(sub.pred)
	s.m.subscriptions.Set(float64(s.index.Len()))
	s.m.filters.Set(float64(s.filters))
	s.changed()
}

// Acknowledgement is the Subscribed event for the current predicate.
func (sub *Subscription) Acknowledgement() *dripv1.Delivery {
	s := sub.s
	s.mu.Lock()
	defer s.mu.Unlock()
	return &dripv1.Delivery{Event: &dripv1.Delivery_Subscribed{Subscribed: &dripv1.Subscribed{
		SubscriptionId: uint64(sub.id), Predicate: sub.pred.String(), Broker: s.cfg.broker,
	}}}
}

// Deliveries is the subscription's queue. Call Dequeued for each item
// taken, which frees its bytes.
func (sub *Subscription) Deliveries() <-chan Queued { return sub.queue }

// Dequeued releases a taken delivery's bytes from the queue's bound.
func (sub *Subscription) Dequeued(q Queued) { sub.bytes.Add(-int64(q.size)) }

// LossSignal receives when a delivery was dropped since it last did.
func (sub *Subscription) LossSignal() <-chan struct{} { return sub.wake }

// Lost is the number of deliveries dropped over the subscription's life.
func (sub *Subscription) Lost() uint64 { return sub.lost.Load() }

// Done is closed when the broker ends the subscription.
func (sub *Subscription) Done() <-chan struct{} { return sub.done }

// Draining is closed when the broker starts draining; DrainNotice then
// returns the event to send.
func (sub *Subscription) Draining() <-chan struct{} { return sub.drain }

// DrainNotice is the Draining event, once Draining is closed.
func (sub *Subscription) DrainNotice() *dripv1.Delivery { return sub.notice.Load() }

// offer queues a delivery without ever blocking: a full queue drops it
// and records the loss for the subscriber.
func (sub *Subscription) offer(q Queued) {
	m := sub.s.m
	if sub.bytes.Add(int64(q.size)) <= int64(sub.s.cfg.queueBytes) {
		select {
		case sub.queue <- q:
			m.delivered.Inc()
			return
		default:
		}
	}
	sub.bytes.Add(-int64(q.size))
	sub.lost.Add(1)
	m.subscriberDropped.Inc()
	select {
	case sub.wake <- struct{}{}:
	default:
	}
}
