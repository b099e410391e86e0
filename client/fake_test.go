package client

import (
	"context"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"

	dripv1 "github.com/dripmesh/drip/api/proto/drip/v1"
	"github.com/dripmesh/drip/internal/content"
	"github.com/dripmesh/drip/internal/wire"
)

// fakeBroker is a single in-memory broker: it matches every published
// message against every subscription exactly, queues deliveries in a
// bounded queue per subscription and, like the real broker, drops and
// reports Lost when that queue is full.
type fakeBroker struct {
	dripv1.UnimplementedBrokerServer
	queue      int                // per-subscription queue capacity
	msgLimits  wire.MessageLimits // what Publish accepts
	predLimit  content.Limits     // what Subscribe accepts
	firstEvent *dripv1.Delivery   // if set, sent instead of the first acknowledgement

	mu        sync.Mutex
	nextID    uint64
	subs      map[uint64]*fakeSub
	published int
}

type fakeSub struct {
	pred    content.Predicate
	q       chan *dripv1.Delivery
	lostSig chan struct{} // capacity 1: something was dropped
	dropped uint64        // since the last Lost event
	total   uint64
	kill    chan error // ends the stream with the error (nil: cleanly)
}

func newFakeBroker() *fakeBroker {
	return &fakeBroker{
		queue:     1024,
		msgLimits: wire.MessageLimits{MaxPayload: 1 << 20},
		predLimit: content.Limits{MaxFilters: 4},
		subs:      map[uint64]*fakeSub{},
	}
}

func (f *fakeBroker) Publish(stream dripv1.Broker_PublishServer) error {
	var accepted, unmatched uint64
	for i := 0; ; i++ {
		req, err := stream.Recv()
		if err != nil {
			return stream.SendAndClose(&dripv1.PublishSummary{Accepted: accepted, Unmatched: unmatched})
		}
		m, err := wire.MessageFromProto(req.GetMessage(), f.msgLimits)
		if err != nil {
			return status.Errorf(codes.InvalidArgument, "message %d: %v", i, err)
		}
		accepted++
		if f.fanOut(req.GetMessage(), m) == 0 {
			unmatched++
		}
	}
}

func (f *fakeBroker) fanOut(pm *dripv1.Message, m content.Message) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.published++
	matched := 0
	for _, s := range f.subs {
		if !s.pred.Matches(m) {
			continue
		}
		matched++
		d := &dripv1.Delivery{Event: &dripv1.Delivery_Message{Message: &dripv1.Published{
			Message: pm, IngressRouter: 7, Hops: 2, PublishedUnixNano: time.Now().UnixNano(),
		}}}
		select {
		case s.q <- d:
		default:
			s.dropped++
			s.total++
			select {
			case s.lostSig <- struct{}{}:
			default:
			}
		}
	}
	return matched
}

func (f *fakeBroker) Subscribe(stream dripv1.Broker_SubscribeServer) error {
	req, err := stream.Recv()
	if err != nil {
		return err
	}
	pred, err := wire.PredicateFromProto(req.GetPredicate(), f.predLimit)
	if err != nil {
		return status.Error(codes.InvalidArgument, err.Error())
	}
	if f.firstEvent != nil {
		return stream.Send(f.firstEvent)
	}
	s := &fakeSub{pred: pred, q: make(chan *dripv1.Delivery, f.queue), lostSig: make(chan struct{}, 1), kill: make(chan error, 1)}
	f.mu.Lock()
	f.nextID++
	id := f.nextID
	f.subs[id] = s
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		delete(f.subs, id)
		f.mu.Unlock()
	}()
	if err := stream.Send(ackEvent(id, pred)); err != nil {
		return err
	}

	replaced := make(chan error, 1)
	go func() {
		for {
			req, err := stream.Recv()
			if err != nil {
				replaced <- nil // the client left or cancelled
				return
			}
			p, err := wire.PredicateFromProto(req.GetPredicate(), f.predLimit)
			if err != nil {
				replaced <- status.Error(codes.InvalidArgument, err.Error())
				return
			}
			// Installing the predicate and queueing the acknowledgement
			// under the lock orders the switch with fan-out.
			f.mu.Lock()
			s.pred = p
			select {
			case s.q <- ackEvent(id, p):
			case <-stream.Context().Done():
			}
			f.mu.Unlock()
		}
	}()
	for {
		select {
		case d := <-s.q:
			if err := stream.Send(d); err != nil {
				return err
			}
		case <-s.lostSig:
			f.mu.Lock()
			lost := &dripv1.Lost{Count: s.dropped, Total: s.total}
			s.dropped = 0
			f.mu.Unlock()
			if lost.Count == 0 {
				continue
			}
			if err := stream.Send(&dripv1.Delivery{Event: &dripv1.Delivery_Lost{Lost: lost}}); err != nil {
				return err
			}
		case err := <-s.kill:
			// Send what was queued before ending, as a broker shutting
			// down cleanly would.
			for {
				select {
				case d := <-s.q:
					if err := stream.Send(d); err != nil {
						return err
					}
					continue
				default:
				}
				return err
			}
		case err := <-replaced:
			return err
		}
	}
}

func ackEvent(id uint64, p content.Predicate) *dripv1.Delivery {
	return &dripv1.Delivery{Event: &dripv1.Delivery_Subscribed{Subscribed: &dripv1.Subscribed{
		SubscriptionId: id, Predicate: p.String(), Broker: "fake",
	}}}
}

// inject queues a raw event on every subscription.
func (f *fakeBroker) inject(d *dripv1.Delivery) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, s := range f.subs {
		s.q <- d
	}
}

// end ends every subscription's stream with err (nil: cleanly).
func (f *fakeBroker) end(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, s := range f.subs {
		s.kill <- err
	}
}

func (f *fakeBroker) subscriptions() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.subs)
}

// start serves f over bufconn for the test's lifetime and returns the dial
// options that reach it.
func (f *fakeBroker) start(t *testing.T, serverOpts ...grpc.ServerOption) []grpc.DialOption {
	t.Helper()
	lis := bufconn.Listen(1 << 20)
	srv := grpc.NewServer(serverOpts...)
	dripv1.RegisterBrokerServer(srv, f)
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = srv.Serve(lis)
	}()
	t.Cleanup(func() {
		srv.Stop()
		<-served
	})
	return []grpc.DialOption{grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
		return lis.DialContext(ctx)
	})}
}

// dial connects a client to the fake broker, closed at the end of the test.
func dial(t *testing.T, dialOpts []grpc.DialOption, opts ...Option) *Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := Dial(ctx, "passthrough:///bufnet", append([]Option{WithDialOptions(dialOpts...)}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(fmt.Sprintf("must: %v", err))
	}
	return v
}
