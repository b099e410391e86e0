package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	dripv1 "github.com/dripmesh/drip/api/proto/drip/v1"
	"github.com/dripmesh/drip/internal/content"
)

// ErrClosed is returned by Next and Update after Close.
var ErrClosed = errors.New("drip client: subscription closed")

// Subscription is a live subscription. Read deliveries with Next; Close it
// when done, which also stops its receive goroutine.
type Subscription struct {
	stream dripv1.Broker_SubscribeClient
	ctx    context.Context // the stream's; Done once the subscription is over
	parent context.Context // the caller's, to tell its cancellation from Close
	cancel context.CancelFunc
	name   string

	out    chan Delivery // closed by run when it exits
	wakeup chan struct{} // capacity 1: an Update began, stop blocking on out
	exited chan struct{} // closed when run has returned

	sendMu sync.Mutex // serialises Update: a gRPC stream allows one sender

	mu        sync.Mutex
	id        uint64
	predicate string
	broker    string
	requested uint64        // SubscribeRequests sent, the first included
	acked     uint64        // Subscribed events received
	ackCh     chan struct{} // closed and replaced at each ack, closed for good at the end
	ended     bool          // the stream has ended; err says how
	err       error
	closed    bool // Close was called

	lost atomic.Uint64
}

// Subscribe opens a subscription with predicate in the predicate language
// (docs/design.md §1), for example
//
//	agency = "AP" && priority = 2 || keywords contains "Italy"
//
// and returns once the broker has installed it. A predicate the broker
// rejects is an error with codes.InvalidArgument whose message names the
// byte offset of the problem. The subscription lasts until Close or until
// ctx is cancelled.
func (c *Client) Subscribe(ctx context.Context, predicate string) (*Subscription, error) {
	sctx, cancel := context.WithCancel(ctx)
	stream, err := c.api.Subscribe(sctx)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("drip client: opening a subscription on %s: %w", c.addr, ctxOr(ctx, err))
	}
	req := &dripv1.SubscribeRequest{Predicate: &dripv1.Predicate{Text: predicate}, ClientName: c.opts.name}
	// A Send error (io.EOF when the broker ended the stream) carries no
	// status; the Recv below returns it.
	_ = stream.Send(req)
	ev, err := stream.Recv()
	if err != nil {
		cancel()
		return nil, fmt.Errorf("drip client: subscribing on %s: %w", c.addr, ctxOr(ctx, err))
	}
	ack := ev.GetSubscribed()
	if ack == nil {
		cancel()
		return nil, fmt.Errorf("drip client: subscribing on %s: broker sent %T before acknowledging the predicate", c.addr, ev.GetEvent())
	}
	s := &Subscription{
		stream:    stream,
		ctx:       sctx,
		parent:    ctx,
		cancel:    cancel,
		name:      c.opts.name,
		out:       make(chan Delivery, c.opts.bufferSize),
		wakeup:    make(chan struct{}, 1),
		exited:    make(chan struct{}),
		id:        ack.GetSubscriptionId(),
		predicate: ack.GetPredicate(),
		broker:    ack.GetBroker(),
		requested: 1,
		acked:     1,
		ackCh:     make(chan struct{}),
	}
	go s.run()
	return s, nil
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

// Lost returns the number of matching messages the broker has dropped over
// the subscription's life because it was read too slowly.
func (s *Subscription) Lost() uint64 { return s.lost.Load() }

// Next returns the next delivery, waiting for one until ctx ends. When the
// subscription is over it returns, after any buffered deliveries: ErrClosed
// after Close; the Subscribe context's error after its cancellation; io.EOF
// when the broker ended the stream cleanly; otherwise the stream's error.
// Cancelling ctx only abandons this call.
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
		return d, nil
	case <-ctx.Done():
		return Delivery{}, ctx.Err()
	}
}

// Update replaces the predicate and returns once the broker has installed
// the new one; deliveries keep flowing meanwhile, and the broker neither
// loses nor duplicates one across the switch. A syntax error is reported
// without contacting the broker and leaves the subscription as it was; a
// predicate the broker rejects for another reason (a size limit) ends the
// subscription with that error, as the protocol prescribes.
func (s *Subscription) Update(predicate string) error {
	if _, err := content.ParseWithLimits(predicate, content.Limits{}); err != nil {
		return fmt.Errorf("drip client: update: %w", err)
	}
	s.sendMu.Lock()
	defer s.sendMu.Unlock()

	s.mu.Lock()
	if s.closed || s.ended {
		s.mu.Unlock()
		return s.endErr()
	}
	s.requested++
	want := s.requested
	s.mu.Unlock()
	// run must keep reading while the acknowledgement is due, even if
	// nobody reads Next.
	select {
	case s.wakeup <- struct{}{}:
	default:
	}
	req := &dripv1.SubscribeRequest{Predicate: &dripv1.Predicate{Text: predicate}, ClientName: s.name}
	// A failed Send means the stream is over; run records why.
	_ = s.stream.Send(req)
	for {
		s.mu.Lock()
		if s.acked >= want {
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

// Close ends the subscription and waits for its receive goroutine to stop.
// Buffered deliveries are discarded. It always returns nil.
func (s *Subscription) Close() error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.cancel()
	<-s.exited
	return nil
}

// endErr translates how the stream ended for the caller.
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

func (s *Subscription) updatePending() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.acked < s.requested
}

// run is the subscription's receive goroutine: the only reader of the
// stream and the only sender on out. With no Update pending it hands each
// delivery to out before reading the next event, which is what makes a slow
// reader push back on the broker. With an Update pending it keeps reading
// and sets deliveries aside in backlog until the acknowledgement arrives;
// the backlog holds at most what the broker had queued before it installed
// the new predicate.
func (s *Subscription) run() {
	defer close(s.exited)
	defer close(s.out)
	var (
		backlog            []Delivery
		lostCount, lostTot uint64 // reported since the last delivery
		ctxDone            = s.ctx.Done()
	)
	for {
		// Hand over what the reader has room for, then, unless an Update
		// waits for its acknowledgement, wait for room for the rest.
	handOver:
		for len(backlog) > 0 {
			select {
			case s.out <- backlog[0]:
				backlog[0] = Delivery{}
				backlog = backlog[1:]
			default:
				break handOver
			}
		}
		for len(backlog) > 0 && !s.updatePending() {
			select {
			case s.out <- backlog[0]:
				backlog[0] = Delivery{}
				backlog = backlog[1:]
			case <-s.wakeup:
			case <-ctxDone:
				s.end(s.ctx.Err())
				return
			}
		}
		ev, err := s.stream.Recv()
		if err != nil {
			s.end(err)
			s.flush(backlog)
			return
		}
		switch e := ev.GetEvent().(type) {
		case *dripv1.Delivery_Subscribed:
			s.ack(e.Subscribed)
		case *dripv1.Delivery_Lost:
			lostCount += e.Lost.GetCount()
			lostTot = e.Lost.GetTotal()
			s.lost.Store(lostTot)
		case *dripv1.Delivery_Message:
			d, err := deliveryFromProto(e.Message)
			if err != nil {
				s.end(fmt.Errorf("broker sent a malformed delivery: %w", err))
				s.cancel()
				s.flush(backlog)
				return
			}
			d.Lost, d.LostTotal = lostCount, lostTot
			lostCount = 0
			backlog = append(backlog, d)
		default:
			// An event added to the protocol after this client was built:
			// nothing to deliver.
		}
	}
}

// flush hands the backlog to Next after the stream has ended, unless the
// subscription is closed first.
func (s *Subscription) flush(backlog []Delivery) {
	for _, d := range backlog {
		select {
		case s.out <- d:
		case <-s.ctx.Done():
			return
		}
	}
}

func (s *Subscription) ack(a *dripv1.Subscribed) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.acked++
	s.id, s.predicate, s.broker = a.GetSubscriptionId(), a.GetPredicate(), a.GetBroker()
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
