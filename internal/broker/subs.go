package broker

import (
	"errors"
	"io"
	"sync"
	"sync/atomic"

	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	dripv1 "github.com/dripmesh/drip/api/proto/drip/v1"
	"github.com/dripmesh/drip/internal/content"
	"github.com/dripmesh/drip/internal/encoding"
	"github.com/dripmesh/drip/internal/match"
	"github.com/dripmesh/drip/internal/wire"
)

// subscriptions is the LOCAL-PREDICATES table (Carzaniga09 §2.2): the exact
// index used for local delivery plus each subscription's encoded filters
// for the advertisement.
type subscriptions struct {
	b *Broker

	mu      sync.Mutex // guards all below; match.Index is not concurrent
	index   *match.Index
	byID    map[match.SubscriberID]*subscription
	nextID  match.SubscriberID
	closed  bool
	filters int
}

// subscription is one client's subscription and its bounded queue.
type subscription struct {
	id      match.SubscriberID
	client  string
	queue   chan queued
	bytes   atomic.Int64 // encoded bytes queued
	lost    atomic.Uint64
	wake    chan struct{} // a loss to report
	done    chan struct{} // closed when the broker ends the subscription
	encoded []encoding.Bloom
	pred    content.Predicate
}

type queued struct {
	d    *dripv1.Delivery
	size int
}

func newSubscriptions(b *Broker) *subscriptions {
	return &subscriptions{b: b, index: match.New(), byID: map[match.SubscriberID]*subscription{}}
}

var errShuttingDown = status.Error(codes.Unavailable, "broker is shutting down")

func (s *subscriptions) add(p content.Predicate, client string) (*subscription, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, errShuttingDown
	}
	if len(s.byID) >= s.b.cfg.MaxSubscriptions {
		return nil, status.Errorf(codes.ResourceExhausted, "broker holds its limit of %d subscriptions", s.b.cfg.MaxSubscriptions)
	}
	s.nextID++
	sub := &subscription{
		id:     s.nextID,
		client: client,
		queue:  make(chan queued, s.b.cfg.SubscriberQueue),
		wake:   make(chan struct{}, 1),
		done:   make(chan struct{}),
	}
	if err := s.setLocked(sub, p, true); err != nil {
		return nil, err
	}
	s.byID[sub.id] = sub
	return sub, nil
}

// replace swaps the subscription's predicate atomically: every message is
// matched against either the old or the new predicate, never both.
func (s *subscriptions) replace(sub *subscription, p content.Predicate) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errShuttingDown
	}
	return s.setLocked(sub, p, false)
}

func (s *subscriptions) setLocked(sub *subscription, p content.Predicate, isNew bool) error {
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
	sub.encoded = s.b.cfg.Encoding.EncodePredicate(p)
	s.b.m.subscriptions.Set(float64(s.index.Len()))
	s.b.m.filters.Set(float64(s.filters))
	s.b.subscriptionsChanged()
	return nil
}

func (s *subscriptions) remove(sub *subscription) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byID[sub.id] != sub {
		return
	}
	delete(s.byID, sub.id)
	s.index.Remove(sub.id)
	s.filters -= len(sub.pred)
	s.b.m.subscriptions.Set(float64(s.index.Len()))
	s.b.m.filters.Set(float64(s.filters))
	s.b.subscriptionsChanged()
}

// closeAll ends every subscription (shutdown).
func (s *subscriptions) closeAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
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
	targets := make([]*subscription, 0, len(ids))
	for _, id := range ids {
		targets = append(targets, s.byID[id])
	}
	s.mu.Unlock()
	if len(targets) == 0 {
		return 0, ids
	}
	size := proto.Size(d)
	for _, sub := range targets {
		sub.offer(queued{d, size}, s.b)
	}
	return len(targets), ids
}

// offer queues a delivery without ever blocking: a full queue drops it
// and records the loss for the subscriber.
func (sub *subscription) offer(q queued, b *Broker) {
	if sub.bytes.Add(int64(q.size)) <= int64(b.cfg.SubscriberQueueBytes) {
		select {
		case sub.queue <- q:
			b.m.delivered.Inc()
			return
		default:
		}
	}
	sub.bytes.Add(-int64(q.size))
	sub.lost.Add(1)
	b.m.subscriberDropped.Inc()
	select {
	case sub.wake <- struct{}{}:
	default:
	}
}

// clientService implements drip.v1.Broker.
type clientService struct {
	dripv1.UnimplementedBrokerServer
	b *Broker
}

// ClientService returns the drip.v1.Broker service of this broker.
func (b *Broker) ClientService() dripv1.BrokerServer { return clientService{b: b} }

func (c clientService) Publish(stream dripv1.Broker_PublishServer) error {
	b := c.b
	in := newForwarding(b)
	var summary dripv1.PublishSummary
	for i := 0; ; i++ {
		req, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return stream.SendAndClose(&summary)
		}
		if err != nil {
			return err
		}
		if b.stopping.Load() {
			return errShuttingDown
		}
		m, err := wire.MessageFromProto(req.Message, b.cfg.Messages)
		if err != nil {
			b.m.publishRejected.Inc()
			return status.Errorf(codes.InvalidArgument, "message %d: %v", i, err)
		}
		summary.Accepted++
		if !in.ingress(m, req.Message) {
			summary.Unmatched++
		}
	}
}

func (c clientService) Subscribe(stream dripv1.Broker_SubscribeServer) error {
	b := c.b
	req, err := stream.Recv()
	if err != nil {
		return err
	}
	pred, err := wire.PredicateFromProto(req.GetPredicate(), b.cfg.Predicates)
	if err != nil {
		return status.Errorf(codes.InvalidArgument, "predicate: %v", err)
	}
	sub, err := b.subs.add(pred, req.GetClientName())
	if err != nil {
		return err
	}
	defer b.subs.remove(sub)
	log := b.log.With(zap.Uint64("subscription", uint64(sub.id)), zap.String("client", sub.client))
	log.Debug("subscribed", zap.Stringer("predicate", pred))
	if err := stream.Send(subscribed(sub, b)); err != nil {
		return err
	}

	// Later requests replace the predicate. Their acks go through the
	// sending loop below, the only goroutine that sends on the stream.
	acks := make(chan *dripv1.Delivery, 1)
	recvErr := make(chan error, 1)
	go func() {
		for {
			req, err := stream.Recv()
			if err != nil {
				recvErr <- err
				return
			}
			pred, err := wire.PredicateFromProto(req.GetPredicate(), b.cfg.Predicates)
			if err != nil {
				recvErr <- status.Errorf(codes.InvalidArgument, "predicate: %v", err)
				return
			}
			if err := b.subs.replace(sub, pred); err != nil {
				recvErr <- err
				return
			}
			log.Debug("predicate replaced", zap.Stringer("predicate", pred))
			select {
			case acks <- subscribed(sub, b):
			case <-stream.Context().Done():
				return
			}
		}
	}()

	var reported uint64
	reportLoss := func() error {
		if total := sub.lost.Load(); total > reported {
			ev := &dripv1.Delivery{Event: &dripv1.Delivery_Lost{Lost: &dripv1.Lost{Count: total - reported, Total: total}}}
			reported = total
			return stream.Send(ev)
		}
		return nil
	}
	for {
		select {
		case q := <-sub.queue:
			sub.bytes.Add(-int64(q.size))
			if err := reportLoss(); err != nil {
				return err
			}
			if err := stream.Send(q.d); err != nil {
				return err
			}
		case <-sub.wake:
			if err := reportLoss(); err != nil {
				return err
			}
		case ack := <-acks:
			if err := stream.Send(ack); err != nil {
				return err
			}
		case err := <-recvErr:
			if errors.Is(err, io.EOF) {
				// The client has nothing more to say (grpcurl closes its
				// side after one request) but may still be listening; it
				// leaves by cancelling the stream.
				recvErr = nil
				continue
			}
			return err
		case <-sub.done:
			return errShuttingDown
		case <-stream.Context().Done():
			return stream.Context().Err()
		}
	}
}

func subscribed(sub *subscription, b *Broker) *dripv1.Delivery {
	return &dripv1.Delivery{Event: &dripv1.Delivery_Subscribed{Subscribed: &dripv1.Subscribed{
		SubscriptionId: uint64(sub.id), Predicate: sub.predicateText(b), Broker: b.cfg.Name,
	}}}
}

func (sub *subscription) predicateText(b *Broker) string {
	b.subs.mu.Lock()
	defer b.subs.mu.Unlock()
	return sub.pred.String()
}
