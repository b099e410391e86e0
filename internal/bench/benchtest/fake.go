// Package benchtest is an in-memory stand-in for a drip mesh, for tests of
// the client commands and the bench before (and besides) the real broker:
// one shared subscription table served on several loopback addresses, each
// playing a broker of the mesh. Every published message is matched exactly
// against every subscription, wherever it is held, so the fake is the ideal
// the bench's oracle expects, unless a Fault makes it err on purpose.
package benchtest

import (
	"net"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	dripv1 "github.com/dripmesh/drip/api/proto/drip/v1"
	"github.com/dripmesh/drip/internal/content"
	"github.com/dripmesh/drip/internal/wire"
)

// Fault makes the mesh misbehave in a way the bench must detect. Each
// counter N > 0 applies to every Nth delivery (over the whole mesh).
type Fault struct {
	DropEvery      int // never send it (undelivered)
	DuplicateEvery int // send it twice
	// Every Nth published message is also sent to one subscription that
	// does not match it, if there is one (a false positive).
	FalsePositiveEvery int
	// StallPublish makes brokers stop reading publish streams, as an
	// overloaded broker would; flow control then blocks publishers.
	StallPublish bool
}

// Mesh is the fake. Create it with Start.
type Mesh struct {
	fault Fault
	queue int

	mu         sync.Mutex
	nextID     uint64
	subs       map[uint64]*sub
	deliveries int
	published  int
	injected   Injected

	servers []*grpc.Server
	addrs   []string
	served  sync.WaitGroup
}

type sub struct {
	pred    content.Predicate
	broker  int
	q       chan *dripv1.Delivery
	lostSig chan struct{}
	dropped uint64
	total   uint64
}

// Start serves a mesh of n brokers on loopback ports. queue bounds each
// subscription's queue (messages beyond it are dropped and reported Lost,
// like the real broker); 0 means 4096.
func Start(n, queue int, fault Fault) (*Mesh, error) {
	if queue <= 0 {
		queue = 4096
	}
	m := &Mesh{fault: fault, queue: queue, subs: map[uint64]*sub{}}
	for i := range n {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			m.Stop()
			return nil, err
		}
		var opts []grpc.ServerOption
		if fault.StallPublish {
			// A fixed window turns off window growth, so that a stalled
			// stream blocks its sender after 64 KiB.
			opts = append(opts, grpc.InitialWindowSize(64<<10), grpc.InitialConnWindowSize(64<<10))
		}
		srv := grpc.NewServer(opts...)
		dripv1.RegisterBrokerServer(srv, &broker{mesh: m, index: i})
		m.servers = append(m.servers, srv)
		m.addrs = append(m.addrs, lis.Addr().String())
		m.served.Add(1)
		go func() {
			defer m.served.Done()
			_ = srv.Serve(lis)
		}()
	}
	return m, nil
}

// Addrs returns the brokers' addresses.
func (m *Mesh) Addrs() []string { return m.addrs }

// Stop stops every broker and waits for them.
func (m *Mesh) Stop() {
	for _, s := range m.servers {
		s.Stop()
	}
	m.served.Wait()
}

// Injected counts the faults the mesh has committed.
type Injected struct{ Dropped, Duplicated, FalsePositives int }

// Injected returns the faults committed so far.
func (m *Mesh) Injected() Injected {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.injected
}

// Published returns the number of messages published so far.
func (m *Mesh) Published() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.published
}

// Opened returns the number of subscriptions ever installed; unlike
// Subscriptions, it tells a new subscription apart from an old one ending.
func (m *Mesh) Opened() uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.nextID
}

// Subscriptions returns the number of live subscriptions.
func (m *Mesh) Subscriptions() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.subs)
}

type broker struct {
	dripv1.UnimplementedBrokerServer
	mesh  *Mesh
	index int
}

func (b *broker) Publish(stream dripv1.Broker_PublishServer) error {
	if b.mesh.fault.StallPublish {
		<-stream.Context().Done()
		return stream.Context().Err()
	}
	var accepted, unmatched uint64
	for i := 0; ; i++ {
		req, err := stream.Recv()
		if err != nil {
			return stream.SendAndClose(&dripv1.PublishSummary{Accepted: accepted, Unmatched: unmatched})
		}
		msg, err := wire.MessageFromProto(req.GetMessage(), wire.DefaultMessageLimits())
		if err != nil {
			return status.Errorf(codes.InvalidArgument, "message %d: %v", i, err)
		}
		accepted++
		if b.mesh.fanOut(b.index, req.GetMessage(), msg) == 0 {
			unmatched++
		}
	}
}

func (m *Mesh) fanOut(ingress int, pm *dripv1.Message, msg content.Message) (matched int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.published++
	now := time.Now().UnixNano()
	var wrong *sub
	for _, s := range m.subs {
		if !s.pred.Matches(msg) {
			wrong = s
			continue
		}
		matched++
		m.deliveries++
		if f := m.fault.DropEvery; f > 0 && m.deliveries%f == 0 {
			m.injected.Dropped++
			continue
		}
		m.offer(s, ingress, now, pm)
		if f := m.fault.DuplicateEvery; f > 0 && m.deliveries%f == 0 {
			m.injected.Duplicated++
			m.offer(s, ingress, now, pm)
		}
	}
	if f := m.fault.FalsePositiveEvery; f > 0 && m.published%f == 0 && wrong != nil {
		m.injected.FalsePositives++
		m.offer(wrong, ingress, now, pm)
	}
	return matched
}

func (m *Mesh) offer(s *sub, ingress int, now int64, pm *dripv1.Message) {
	hops := ingress - s.broker
	if hops < 0 {
		hops = -hops
	}
	d := &dripv1.Delivery{Event: &dripv1.Delivery_Message{Message: &dripv1.Published{
		Message: pm, IngressRouter: uint32(ingress), PublishedUnixNano: now, Hops: uint32(hops),
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

func (b *broker) Subscribe(stream dripv1.Broker_SubscribeServer) error {
	m := b.mesh
	req, err := stream.Recv()
	if err != nil {
		return err
	}
	pred, err := wire.PredicateFromProto(req.GetPredicate(), content.DefaultLimits())
	if err != nil {
		return status.Error(codes.InvalidArgument, err.Error())
	}
	s := &sub{pred: pred, broker: b.index, q: make(chan *dripv1.Delivery, m.queue), lostSig: make(chan struct{}, 1)}
	m.mu.Lock()
	m.nextID++
	id := m.nextID
	m.subs[id] = s
	m.mu.Unlock()
	defer func() {
		m.mu.Lock()
		delete(m.subs, id)
		m.mu.Unlock()
	}()
	if err := stream.Send(ack(id, pred)); err != nil {
		return err
	}
	ended := make(chan error, 1)
	go func() {
		for {
			req, err := stream.Recv()
			if err != nil {
				ended <- nil
				return
			}
			p, err := wire.PredicateFromProto(req.GetPredicate(), content.DefaultLimits())
			if err != nil {
				ended <- status.Error(codes.InvalidArgument, err.Error())
				return
			}
			m.mu.Lock()
			s.pred = p
			select {
			case s.q <- ack(id, p):
			case <-stream.Context().Done():
			}
			m.mu.Unlock()
		}
	}()
	for {
		select {
		case d := <-s.q:
			if err := stream.Send(d); err != nil {
				return err
			}
		case <-s.lostSig:
			m.mu.Lock()
			lost := &dripv1.Lost{Count: s.dropped, Total: s.total}
			s.dropped = 0
			m.mu.Unlock()
			if lost.Count > 0 {
				if err := stream.Send(&dripv1.Delivery{Event: &dripv1.Delivery_Lost{Lost: lost}}); err != nil {
					return err
				}
			}
		case err := <-ended:
			return err
		}
	}
}

func ack(id uint64, p content.Predicate) *dripv1.Delivery {
	return &dripv1.Delivery{Event: &dripv1.Delivery_Subscribed{Subscribed: &dripv1.Subscribed{
		SubscriptionId: id, Predicate: p.String(), Broker: "fake",
	}}}
}
