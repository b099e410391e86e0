package broker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	dripv1 "github.com/dripmesh/drip/api/proto/drip/v1"
	"github.com/dripmesh/drip/internal/clientapi"
	"github.com/dripmesh/drip/internal/content"
	"github.com/dripmesh/drip/internal/node"
	"github.com/dripmesh/drip/internal/qos"
	"github.com/dripmesh/drip/internal/rawcodec"
	"github.com/dripmesh/drip/internal/wire"
)

// ackEvery bounds how many requests a PublishStream handles between two
// acknowledgements while its client keeps sending; an idle client is
// acknowledged at once.
const ackEvery = 64

// clientService implements drip.v1.Broker over a Broker's node.
type clientService struct {
	dripv1.UnimplementedBrokerServer
	b  *Broker
	n  *node.Node
	az *authorizer
}

// ClientService returns the drip.v1.Broker service of this broker. Serve it
// on a gRPC server made with ClientServerOptions: it exchanges deliveries
// and publish requests in their wire form.
func (b *Broker) ClientService() dripv1.BrokerServer {
	return clientService{b: b, n: b.node, az: b.authz}
}

// waitJoined holds a publish stream until the broker has joined the mesh
// (Broker.Joined: linked to every neighbour, or JoinTimeout after its
// start). A broker still loading its neighbours' databases has routes to
// part of the mesh and an index of part of its filters: a message published
// then would miss destinations, counted as no_route at best. Publishers
// wait instead — gRPC's flow control holds them — and one that must not
// wait has other brokers to go to. A drain ends the wait: the stream's
// final acknowledgement (moving) follows.
func (c clientService) waitJoined(ctx context.Context) error {
	select {
	case <-c.b.joined:
	case <-c.n.Draining():
	case <-ctx.Done():
		return status.FromContextError(ctx.Err()).Err()
	}
	return nil
}

// ClientServerOptions are the gRPC server options the client service
// needs: the codec that passes rawcodec.Raw through, and a fixed flow-control
// window. What a publisher has sent and the broker has not read waits in
// gRPC, outside the memory budget, up to its stream's window, and gRPC's
// dynamic window grows that towards 16 MiB on a busy connection, for
// every publisher of a broker short of CPU. publishStreamCost charges the
// fixed window instead.
func ClientServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{grpc.ForceServerCodecV2(rawcodec.Codec{}),
		grpc.InitialWindowSize(clientStreamWindow), grpc.InitialConnWindowSize(clientConnWindow)}
}

// clientStreamWindow bounds what one client stream may send ahead of the
// broker reading it (HTTP/2 flow control, fixed: setting it turns gRPC's
// dynamic window off): 256 KiB a round trip, 26 MB/s per publisher 10 ms
// away. At 64 KiB a batching publisher's request (up to 256 KiB, 1,024
// messages) took the whole window, so that it could not send the next
// while the broker read one; 256 KiB keeps a few requests in flight, for
// three times a stream's memory (docs/results/perf-gaps.md).
// clientConnWindow is the connection's, which gRPC's server grants as data
// arrives, not as it is read, so it bounds no memory.
const (
	clientStreamWindow = 256 << 10
	clientConnWindow   = 1 << 20
)

// ReceiveLimit is the largest request the client API of a broker with c
// accepts: one message at every limit of c.Messages beside a full client
// batch of others, and a predicate's text at c.Predicates', never less than
// gRPC's default of 4 MiB. A message over the broker's limits but under
// this one reaches the broker, which refuses it naming the limit, instead
// of gRPC's "received message larger than max".
func ReceiveLimit(c Config) int {
	m := c.Messages
	msg := m.MaxPayload + m.MaxAttributes*(m.MaxName+m.MaxString+32) + 256<<10
	return max(4<<20, msg, c.Predicates.MaxText+64<<10)
}

// publishCounts is what a publish stream has accepted so far.
type publishCounts struct{ accepted, unmatched uint64 }

// heldMessage is a decoded message of a publish request, held until the
// whole request has been decoded and authorized.
type heldMessage struct {
	m        content.Message
	raw      []byte
	deadline time.Duration
}

// requestScratch is what a publish stream reuses from one request to the
// next: the decoded messages and the space of their attributes.
type requestScratch struct {
	held []heldMessage
	dec  wire.Decoder
}

// accept publishes the messages of one request, in its wire form, in
// order, and says whether they came as a batch. An invalid message is an
// InvalidArgument naming its index on the stream; the ones before it were
// published. batches says whether the request may carry several messages
// (PublishStream) or one (Publish, whose clients predate batches). The
// request is decoded whole before anything is published, so that under an
// authorization rule one message outside it makes the request
// PermissionDenied with none of it published; scratch is the stream's.
func (c clientService) accept(fwd *node.Forwarder, g grant, req []byte, counts *publishCounts, batches bool, scratch *requestScratch) (bool, error) {
	msgs := scratch.held[:0]
	defer func() {
		clear(msgs) // hold no request's bytes beyond it
		scratch.held = msgs[:0]
		scratch.dec.Reset()
	}()
	batched, err := wire.PublishRequestMessages(req, func(raw []byte) error {
		if !batches && len(msgs) == 1 {
			return status.Error(codes.InvalidArgument, "Publish takes one message per request; send batches with PublishStream")
		}
		m, deadline, err := scratch.dec.Decode(raw, c.b.cfg.Messages)
		if err == nil && deadline > node.MaxDeadline {
			err = fmt.Errorf("message deadline is %v, at most %v", deadline, node.MaxDeadline)
		}
		if err != nil {
			c.b.m.publishRejected.Inc()
			return status.Errorf(codes.InvalidArgument, "message %d: %v", counts.accepted+uint64(len(msgs)), err)
		}
		msgs = append(msgs, heldMessage{m: m, raw: raw, deadline: deadline})
		return nil
	})
	if err := c.checkPublish(g, msgs, counts.accepted); err != nil {
		return false, err
	}
	at := c.b.clock.Now()
	for _, h := range msgs {
		counts.accepted++
		if _, ok := h.m.Get(wire.CongestionTo); ok {
			c.b.m.congestionFeedback.Inc()
		}
		if !fwd.Publish(h.m, h.raw, h.deadline, at) {
			counts.unmatched++
		}
	}
	if err != nil && status.Code(err) == codes.Unknown {
		// The request itself did not decode.
		return false, status.Errorf(codes.InvalidArgument, "request after message %d: %v", counts.accepted, err)
	}
	return batched, err
}

// Publish is the one-message-per-request stream of brokers before
// PublishStream. Requests are decoded from their wire form, as
// PublishStream's are.
func (c clientService) Publish(stream dripv1.Broker_PublishServer) error {
	g, err := c.az.admit(stream.Context(), opPublish)
	if err != nil {
		return err
	}
	release, err := c.holdStream(publishStreamCost)
	if err != nil {
		return err
	}
	defer release()
	if err := c.waitJoined(stream.Context()); err != nil {
		return err
	}
	fwd := c.n.NewForwarder()
	var (
		counts  publishCounts
		scratch requestScratch
	)
	for {
		var req rawcodec.Raw
		err := stream.RecvMsg(&req)
		if errors.Is(err, io.EOF) {
			return stream.SendAndClose(&dripv1.PublishSummary{Accepted: counts.accepted, Unmatched: counts.unmatched})
		}
		if err != nil {
			return err
		}
		if c.n.Stopping() {
			// This request and everything after it is unpublished; the
			// summary says exactly how much was.
			return stream.SendAndClose(&dripv1.PublishSummary{Accepted: counts.accepted, Unmatched: counts.unmatched})
		}
		if _, err := c.accept(fwd, g, req.B, &counts, false, &scratch); err != nil {
			return err
		}
	}
}

// streamCost is what an open client stream costs the broker at rest: its
// goroutines' stacks (two or more per stream) and gRPC's per-stream state,
// about 30 KiB (docs/design.md §14). A publish stream may also hold its
// flow-control window of requests the broker has not read yet.
const (
	streamCost        = 32 << 10
	publishStreamCost = streamCost + clientStreamWindow
)

// holdStream charges an opening stream to the memory budget, or refuses it
// with ResourceExhausted when open streams would crowd out the queues.
func (c clientService) holdStream(cost int64) (func(), error) {
	release, ok := c.n.Budget().HoldStream(cost)
	if !ok {
		b := c.n.Budget()
		return nil, status.Errorf(codes.ResourceExhausted,
			"broker %s: open client streams hold %d MiB, three quarters of what its memory budget leaves its queues (%d MiB, half of --memory-budget); connect to another broker, or raise its --memory-budget",
			c.b.cfg.Name, b.Streams()>>20, b.Limit()>>20)
	}
	return release, nil
}

// PublishStream publishes what the client sends and acknowledges it. When
// the broker starts draining, a watcher sends the final acknowledgement
// (moving) under the same lock the handler publishes under, so its count
// is exact: every later request is discarded unpublished, and the client
// sends those messages to another broker.
func (c clientService) PublishStream(stream dripv1.Broker_PublishStreamServer) error {
	g, err := c.az.admit(stream.Context(), opPublish)
	if err != nil {
		return err
	}
	release, err := c.holdStream(publishStreamCost)
	if err != nil {
		return err
	}
	defer release()
	fwd := c.n.NewForwarder()
	var (
		mu      sync.Mutex // serialises publishing and sending
		counts  publishCounts
		scratch requestScratch
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
	if err := c.waitJoined(stream.Context()); err != nil {
		return err
	}
	for {
		var req rawcodec.Raw
		err := stream.RecvMsg(&req)
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
		batched, err := c.accept(fwd, g, req.B, &counts, true, &scratch)
		if err != nil {
			mu.Unlock()
			return err
		}
		// A client that batches expects an acknowledgement per request;
		// one that sends a message per request gets one every ackEvery.
		if pending++; pending >= ackEvery || batched {
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
	g, err := c.az.admit(stream.Context(), opSubscribe)
	if err != nil {
		return err
	}
	release, err := c.holdStream(streamCost)
	if err != nil {
		return err
	}
	defer release()
	req, err := stream.Recv()
	if err != nil {
		return err
	}
	pred, err := clientapi.PredicateFromProto(req.GetPredicate(), c.b.cfg.Predicates)
	if err != nil {
		return status.Error(codes.InvalidArgument, err.Error())
	}
	// Under an authorization rule the subscription holds, and the broker
	// advertises, the client's predicate narrowed to the rule's.
	if pred, err = c.conjoin(g, pred); err != nil {
		return err
	}
	sub, err := n.Subscribe(pred, flowOf(req), req.GetClientName())
	if err != nil {
		return apiError(err)
	}
	defer sub.Close()
	log := c.b.log.With(zap.Uint64("subscription", sub.ID()), zap.String("client", req.GetClientName()))
	log.Debug("subscribed", zap.Stringer("predicate", pred))
	if err := stream.Send(acknowledgement(sub.Acknowledgement())); err != nil {
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
			pred, err := clientapi.PredicateFromProto(req.GetPredicate(), c.b.cfg.Predicates)
			if err != nil {
				recvErr <- status.Error(codes.InvalidArgument, err.Error())
				return
			}
			if pred, err = c.conjoin(g, pred); err != nil {
				recvErr <- err
				return
			}
			if err := sub.Replace(pred, flowOf(req)); err != nil {
				recvErr <- apiError(err)
				return
			}
			log.Debug("predicate replaced", zap.Stringer("predicate", pred))
			select {
			case acks <- acknowledgement(sub.Acknowledgement()):
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
	out := deliverySender{stream: stream, sub: sub, batches: req.GetAcceptBatches(), budget: n.Budget(), conn: c.b.sends.of(stream.Context()), pool: c.b.sendBuffers}
	out.start()
	defer out.close()
	sub.Attach()
	draining := sub.Draining()
	for {
		select {
		case <-sub.Ready():
			q, ok := sub.Take()
			if !ok {
				continue
			}
			// Losses first: they are news the deliveries behind them
			// would otherwise hold back.
			if err := reportLoss(); err != nil {
				return err
			}
			if err := out.send(q); err != nil {
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
			if err := stream.Send(drainNotice(sub.DrainNotice())); err != nil {
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
			return apiError(node.ErrStopped)
		case <-stream.Context().Done():
			return stream.Context().Err()
		}
	}
}

// apiError maps the node's errors to the API's codes.
func apiError(err error) error {
	var limit *node.LimitError
	var bad *node.InvalidError
	switch {
	case errors.Is(err, node.ErrStopped), errors.Is(err, node.ErrDraining):
		return status.Error(codes.Unavailable, err.Error())
	case errors.As(err, &limit):
		return status.Error(codes.ResourceExhausted, err.Error())
	case errors.As(err, &bad):
		return status.Error(codes.InvalidArgument, err.Error())
	}
	return status.Error(codes.Internal, err.Error())
}

// acknowledgement is the Subscribed event of an Ack.
func acknowledgement(a node.Ack) *dripv1.Delivery {
	return &dripv1.Delivery{Event: &dripv1.Delivery_Subscribed{Subscribed: &dripv1.Subscribed{
		SubscriptionId: a.ID, Predicate: a.Predicate.String(), Broker: a.Broker,
		DeadlineNs: int64(a.Flow.Deadline), TwoPaths: a.Flow.TwoPaths,
	}}}
}

// drainNotice is the Draining event of a node's notice.
func drainNotice(d node.DrainNotice) *dripv1.Delivery {
	return &dripv1.Delivery{Event: &dripv1.Delivery_Draining{Draining: &dripv1.Draining{
		DeadlineUnixNano: d.Deadline.UnixNano(), OverlapNs: int64(d.Overlap)}}}
}

// flowOf is what a subscription request asks of delivery.
func flowOf(req *dripv1.SubscribeRequest) qos.Flow {
	return qos.Flow{Deadline: time.Duration(req.GetDeadlineNs()), TwoPaths: req.GetTwoPaths()}
}

// checkPublish checks the decoded messages of one publish request against
// the stream's rule, before any of them is published; first is the first
// one's index on the stream.
func (c clientService) checkPublish(g grant, msgs []heldMessage, first uint64) error {
	r := g.rule
	if r == nil || r.Publish.IsAll() {
		return nil
	}
	for i, h := range msgs {
		if err := r.CheckPublish(h.m, first+uint64(i)); err != nil {
			return c.az.refuse(opPublish, g.id, err)
		}
	}
	return nil
}

// conjoin narrows a subscription's predicate to what its rule lets the
// client see.
func (c clientService) conjoin(g grant, p content.Predicate) (content.Predicate, error) {
	if g.rule == nil {
		return p, nil
	}
	q, err := g.rule.Conjoin(p, c.b.cfg.Predicates)
	if err != nil {
		return nil, c.az.refuse(opSubscribe, g.id, err)
	}
	return q, nil
}
