package broker

import (
	"errors"
	"io"
	"sync"

	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	dripv1 "github.com/dripmesh/drip/api/proto/drip/v1"
	"github.com/dripmesh/drip/internal/wire"
)

// ackEvery bounds how many requests a PublishStream handles between two
// acknowledgements while its client keeps sending; an idle client is
// acknowledged at once.
const ackEvery = 64

// clientService implements drip.v1.Broker over a Node.
type clientService struct {
	dripv1.UnimplementedBrokerServer
	n *Node
}

// ClientService returns the drip.v1.Broker service of this broker.
func (b *Broker) ClientService() dripv1.BrokerServer { return clientService{n: b.node} }

// publishCounts is what a publish stream has accepted so far.
type publishCounts struct{ accepted, unmatched uint64 }

// accept publishes the messages of one request, in order. An invalid
// message is an InvalidArgument naming its index on the stream; the ones
// before it were published.
func (c clientService) accept(fwd *Forwarder, req *dripv1.PublishRequest, counts *publishCounts) error {
	publish := func(pm *dripv1.Message) error {
		m, err := wire.MessageFromProto(pm, c.n.cfg.Messages)
		if err != nil {
			c.n.m.publishRejected.Inc()
			return status.Errorf(codes.InvalidArgument, "message %d: %v", counts.accepted, err)
		}
		counts.accepted++
		if !fwd.Publish(m, pm) {
			counts.unmatched++
		}
		return nil
	}
	if req.Message != nil {
		if err := publish(req.Message); err != nil {
			return err
		}
	}
	for _, pm := range req.Batch {
		if err := publish(pm); err != nil {
			return err
		}
	}
	return nil
}

func (c clientService) Publish(stream dripv1.Broker_PublishServer) error {
	fwd := c.n.NewForwarder()
	var counts publishCounts
	for {
		req, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return stream.SendAndClose(&dripv1.PublishSummary{Accepted: counts.accepted, Unmatched: counts.unmatched})
		}
		if err != nil {
			return err
		}
		if c.n.draining.Load() {
			// This request and everything after it is unpublished; the
			// summary says exactly how much was.
			return stream.SendAndClose(&dripv1.PublishSummary{Accepted: counts.accepted, Unmatched: counts.unmatched})
		}
		if len(req.Batch) > 0 {
			return status.Error(codes.InvalidArgument, "Publish takes one message per request; send batches with PublishStream")
		}
		if err := c.accept(fwd, req, &counts); err != nil {
			return err
		}
	}
}

// PublishStream publishes what the client sends and acknowledges it. When
// the broker starts draining, a watcher sends the final acknowledgement
// (moving) under the same lock the handler publishes under, so its count
// is exact: every later request is discarded unpublished, and the client
// sends those messages to another broker.
func (c clientService) PublishStream(stream dripv1.Broker_PublishStreamServer) error {
	fwd := c.n.NewForwarder()
	var (
		mu      sync.Mutex // serialises publishing and sending
		counts  publishCounts
		moved   bool
		pending int // requests since the last acknowledgement
		sendErr error
	)
	ack := func(moving bool) {
		if sendErr == nil {
			sendErr = stream.Send(&dripv1.PublishResponse{Ack: &dripv1.PublishAck{
				Accepted: counts.accepted, Unmatched: counts.unmatched, Moving: moving}})
		}
		pending = 0
	}
	watchDone := make(chan struct{})
	defer close(watchDone)
	go func() {
		select {
		case <-c.n.Draining():
			mu.Lock()
			if !moved {
				moved = true
				ack(true)
			}
			mu.Unlock()
		case <-watchDone:
		case <-stream.Context().Done():
		}
	}()
	for {
		req, err := stream.Recv()
		mu.Lock()
		switch {
		case errors.Is(err, io.EOF):
			if !moved {
				ack(false)
			}
			err = sendErr
			mu.Unlock()
			return err
		case err != nil:
			mu.Unlock()
			return err
		case moved:
			// Discarded: the final acknowledgement did not count it.
			mu.Unlock()
			continue
		}
		if err := c.accept(fwd, req, &counts); err != nil {
			mu.Unlock()
			return err
		}
		pending++
		if pending >= ackEvery || len(req.Batch) > 0 {
			ack(false)
		}
		err = sendErr
		mu.Unlock()
		if err != nil {
			return err
		}
	}
}

func (c clientService) Subscribe(stream dripv1.Broker_SubscribeServer) error {
	n := c.n
	req, err := stream.Recv()
	if err != nil {
		return err
	}
	pred, err := wire.PredicateFromProto(req.GetPredicate(), n.cfg.Predicates)
	if err != nil {
		return status.Error(codes.InvalidArgument, err.Error())
	}
	sub, err := n.Subscribe(pred, req.GetClientName())
	if err != nil {
		return err
	}
	defer sub.Close()
	log := n.log.With(zap.Uint64("subscription", sub.ID()), zap.String("client", req.GetClientName()))
	log.Debug("subscribed", zap.Stringer("predicate", pred))
	if err := stream.Send(sub.Acknowledgement()); err != nil {
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
			pred, err := wire.PredicateFromProto(req.GetPredicate(), n.cfg.Predicates)
			if err != nil {
				recvErr <- status.Error(codes.InvalidArgument, err.Error())
				return
			}
			if err := sub.Replace(pred); err != nil {
				recvErr <- err
				return
			}
			log.Debug("predicate replaced", zap.Stringer("predicate", pred))
			select {
			case acks <- sub.Acknowledgement():
			case <-stream.Context().Done():
				return
			}
		}
	}()

	var reported uint64
	reportLoss := func() error {
		if total := sub.Lost(); total > reported {
			ev := &dripv1.Delivery{Event: &dripv1.Delivery_Lost{Lost: &dripv1.Lost{Count: total - reported, Total: total}}}
			reported = total
			return stream.Send(ev)
		}
		return nil
	}
	draining := sub.Draining()
	for {
		select {
		case q := <-sub.Deliveries():
			sub.Dequeued(q)
			if err := reportLoss(); err != nil {
				return err
			}
			if err := stream.Send(q.Delivery); err != nil {
				return err
			}
		case <-sub.LossSignal():
			if err := reportLoss(); err != nil {
				return err
			}
		case ack := <-acks:
			if err := stream.Send(ack); err != nil {
				return err
			}
		case <-draining:
			draining = nil
			if err := stream.Send(sub.DrainNotice()); err != nil {
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
		case <-sub.Done():
			return errShuttingDown
		case <-stream.Context().Done():
			return stream.Context().Err()
		}
	}
}
