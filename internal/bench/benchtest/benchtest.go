// Package benchtest runs a real drip mesh for tests of the bench and of the
// client commands, and can inject faults between the brokers and their
// clients — drops, duplicates, false positives, publishers that stall — so
// that tests show the bench's oracle catches each. The mesh is
// internal/broker/brokertest's Cluster; only the faults are added, by a
// gRPC interceptor on the brokers' client servers.
package benchtest

import (
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	dripv1 "github.com/dripmesh/drip/api/proto/drip/v1"
	"github.com/dripmesh/drip/internal/broker/brokertest"
	"github.com/dripmesh/drip/internal/clientapi"
	"github.com/dripmesh/drip/internal/content"
	"github.com/dripmesh/drip/internal/dedup"
	"github.com/dripmesh/drip/internal/rawcodec"
	"github.com/dripmesh/drip/internal/wire"
)

// Fault makes the mesh misbehave in a way the bench must detect. Each
// counter N > 0 applies to every Nth delivery (over the whole mesh).
type Fault struct {
	DropEvery      int // never send it (undelivered)
	DuplicateEvery int // send it twice (the copy unstamped, so no client filter hides it)
	// Every Nth published message is also sent to one subscription that
	// does not match it, if there is one (a false positive).
	FalsePositiveEvery int
	// StallPublish makes brokers stop reading publish streams, as an
	// overloaded broker would; flow control then blocks publishers.
	StallPublish bool
}

// Injected counts the faults injected so far.
type Injected struct{ Dropped, Duplicated, FalsePositives int }

// Mesh is a running mesh with faults. Create it with Start.
type Mesh struct {
	*brokertest.Cluster
	in *injector
}

// Start runs n brokers, each linked to every other, with the fault, and
// waits until their routing has converged; opts adjust the cluster
// (brokertest.InMemory, say). The mesh stops when the test ends.
func Start(t testing.TB, n int, fault Fault, opts ...brokertest.ClusterOption) *Mesh {
	t.Helper()
	var edges [][2]int
	for i := range n {
		for j := i + 1; j < n; j++ {
			edges = append(edges, [2]int{i, j})
		}
	}
	in := &injector{fault: fault, streams: map[*subStream]bool{}, seen: map[dedup.Stamp]bool{}}
	opts = append([]brokertest.ClusterOption{brokertest.WithServerOptions(grpc.StreamInterceptor(in.intercept))}, opts...)
	cl := brokertest.NewCluster(t, n, edges, nil, opts...)
	return &Mesh{Cluster: cl, in: in}
}

// Injected returns what the faults did so far.
func (m *Mesh) Injected() Injected {
	m.in.mu.Lock()
	defer m.in.mu.Unlock()
	return m.in.injected
}

// Opened counts the subscription streams ever opened; unlike
// Subscriptions it tells a new subscription apart from an old one ending.
func (m *Mesh) Opened() int {
	m.in.mu.Lock()
	defer m.in.mu.Unlock()
	return m.in.opened
}

// Published counts the messages the running brokers accepted.
func (m *Mesh) Published() int {
	n := 0
	for i := range m.Addrs() {
		if b := m.Broker(i); b != nil {
			n += int(testutil.ToFloat64(b.PublishedCounter()))
		}
	}
	return n
}

// Subscriptions counts the running brokers' local subscriptions.
func (m *Mesh) Subscriptions() int {
	n := 0
	for i := range m.Addrs() {
		if b := m.Broker(i); b != nil {
			n += b.Node().Subscriptions()
		}
	}
	return n
}

// KillAll kills every broker.
func (m *Mesh) KillAll() {
	for i := range m.Addrs() {
		m.Kill(i)
	}
}

// injector applies a Fault to the client streams of every broker.
type injector struct {
	fault      Fault
	mu         sync.Mutex
	streams    map[*subStream]bool
	deliveries int
	published  int
	seen       map[dedup.Stamp]bool
	injected   Injected
	opened     int // Subscribe streams ever opened
}

func (in *injector) intercept(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	switch info.FullMethod {
	case dripv1.Broker_Publish_FullMethodName, dripv1.Broker_PublishStream_FullMethodName:
		if in.fault.StallPublish {
			<-ss.Context().Done()
			return ss.Context().Err()
		}
	case dripv1.Broker_Subscribe_FullMethodName:
		w := &subStream{ServerStream: ss, in: in}
		in.mu.Lock()
		in.opened++
		in.streams[w] = true
		in.mu.Unlock()
		defer func() {
			in.mu.Lock()
			delete(in.streams, w)
			in.mu.Unlock()
		}()
		return handler(srv, w)
	}
	return handler(srv, ss)
}

// subStream is one Subscribe stream seen by the injector: it learns the
// stream's predicate and applies the faults to what the broker sends.
type subStream struct {
	grpc.ServerStream
	in     *injector
	sendMu sync.Mutex        // the broker's sends and injected ones
	pred   content.Predicate // guarded by in.mu
	// control marks a publisher's subscription to its congestion feedback
	// (wire.CongestionTo): not the bench's, so no fault touches it.
	control bool // guarded by in.mu
}

func (w *subStream) RecvMsg(m any) error {
	if err := w.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	if req, ok := m.(*dripv1.SubscribeRequest); ok {
		// One delivery per event, so that faults apply per delivery.
		req.AcceptBatches = false
		if p, err := clientapi.PredicateFromProto(req.GetPredicate(), content.DefaultLimits()); err == nil {
			w.in.mu.Lock()
			w.pred = p
			w.control = strings.Contains(p.String(), wire.CongestionTo)
			w.in.mu.Unlock()
		}
	}
	return nil
}

func (w *subStream) send(m any) error {
	w.sendMu.Lock()
	defer w.sendMu.Unlock()
	return w.ServerStream.SendMsg(m)
}

func (w *subStream) SendMsg(m any) error {
	d, ok := m.(*dripv1.Delivery)
	if raw, isRaw := m.(*rawcodec.Raw); isRaw {
		// The broker sends deliveries in their wire form.
		d, ok = new(dripv1.Delivery), true
		if err := proto.Unmarshal(raw.B, d); err != nil {
			return err
		}
	}
	p := d.GetMessage()
	if !ok || p == nil {
		return w.send(m)
	}
	in, f := w.in, w.in.fault
	in.mu.Lock()
	if w.control {
		in.mu.Unlock()
		return w.send(m)
	}
	in.deliveries++
	n := in.deliveries
	drop := f.DropEvery > 0 && n%f.DropEvery == 0
	dup := !drop && f.DuplicateEvery > 0 && n%f.DuplicateEvery == 0
	var wrong *subStream
	st := dedup.Stamp{Origin: p.GetIngressRouter(), Epoch: p.GetIngressEpoch(), Seq: p.GetSeq()}
	if !in.seen[st] {
		in.seen[st] = true
		in.published++
		if f.FalsePositiveEvery > 0 && in.published%f.FalsePositiveEvery == 0 {
			if msg, err := clientapi.MessageFromProto(p.GetMessage(), wire.DefaultMessageLimits()); err == nil {
				for s := range in.streams {
					if s != w && s.pred != nil && !s.control && !s.pred.Matches(msg) {
						wrong = s
						break
					}
				}
			}
		}
	}
	if drop {
		in.injected.Dropped++
	}
	if dup {
		in.injected.Duplicated++
	}
	if wrong != nil {
		in.injected.FalsePositives++
	}
	in.mu.Unlock()
	if wrong != nil {
		_ = wrong.send(unstamped(d))
	}
	if drop {
		return nil
	}
	if err := w.send(d); err != nil {
		return err
	}
	if dup {
		return w.send(unstamped(d))
	}
	return nil
}

// unstamped is a copy of d without its stamp, as a broker older than
// stamps would send: no client filter can tell it from a first copy.
func unstamped(d *dripv1.Delivery) *dripv1.Delivery {
	c := proto.Clone(d).(*dripv1.Delivery)
	c.GetMessage().Seq, c.GetMessage().IngressEpoch = 0, 0
	return c
}
