package broker

import (
	dripv1 "github.com/dripmesh/drip/api/proto/drip/v1"
	"github.com/dripmesh/drip/internal/node"
	"github.com/dripmesh/drip/internal/rawcodec"
	"github.com/dripmesh/drip/internal/wire"
	"google.golang.org/grpc/mem"
)

// maxBatchBytes bounds the deliveries sent in one DeliveryBatch event;
// once the memory budget is half used, tightBatchBytes does, so that
// thousands of streams waiting on slow readers do not hold a full batch
// each.
const (
	maxBatchBytes   = 64 << 10
	tightBatchBytes = 4 << 10
)

// deliverySender sends a subscription's queued deliveries in their wire
// form: one event each, or — for clients that accept batches — whatever
// the queue holds, up to maxBatchBytes, in one.
type deliverySender struct {
	stream  dripv1.Broker_SubscribeServer
	sub     *node.Subscription
	batches bool
	batch   []*wire.Published
	budget  *node.Budget
	// conn counts the events gRPC holds until its connection writes
	// them (connMeter). Without it (a listener the meter does not wrap)
	// the last event sent is counted until the next send returns, which
	// misses what the stream's write quota lets gRPC hold beyond it.
	conn *connHeld
	held int64
	// pool recycles the buffers events are encoded into (nil: none).
	pool mem.BufferPool
}

func (d *deliverySender) start() {
	if d.conn != nil {
		d.conn.streamStarted()
	}
}

// close gives back what the stream still holds.
func (d *deliverySender) close() {
	if d.conn != nil {
		d.conn.streamDone()
	}
	d.budget.Account(-d.held)
	d.held = 0
}

func (d *deliverySender) send(first node.Queued) error {
	d.sub.Dequeued(first)
	if !d.batches {
		return d.raw(wire.AppendDelivery(d.buffer(wire.DeliverySize(first.Published)), first.Published))
	}
	d.batch = append(d.batch[:0], first.Published)
	size := first.Size()
	limit := maxBatchBytes
	if b := d.budget; b.Limit() > 0 && b.Used() > b.Limit()/2 {
		limit = tightBatchBytes
	}
	for size < limit {
		q, ok := d.sub.Take()
		if !ok {
			break
		}
		d.sub.Dequeued(q)
		d.batch = append(d.batch, q.Published)
		size += q.Size()
	}
	var b []byte
	if len(d.batch) == 1 {
		b = wire.AppendDelivery(d.buffer(wire.DeliverySize(d.batch[0])), d.batch[0])
	} else {
		b = wire.AppendDeliveryBatch(d.buffer(wire.DeliveryBatchSize(d.batch)), d.batch)
	}
	clear(d.batch)
	return d.raw(b)
}

// buffer is an empty slice with room for an event of size bytes: from
// the broker's pool, to which gRPC gives it back once written (rawcodec.Raw),
// unless it is too small for gRPC to pool: a broker that fans out would
// otherwise allocate a buffer per event for every subscriber.
func (d *deliverySender) buffer(size int) []byte {
	if d.pool == nil || mem.IsBelowBufferPoolingThreshold(size) {
		return make([]byte, 0, size)
	}
	return (*d.pool.Get(size))[:0]
}

// newSendBuffers is the pool of the buffers deliveries are encoded into:
// tiers a power of two apart up to a full batch and a large message
// beside it, so that a buffer is less than twice what it holds and what
// gRPC holds for a stream is close to what the meter counts. Larger
// events get buffers of their own size (the pool's fallback).
func newSendBuffers() mem.BufferPool {
	var tiers []int
	for size := 1 << 10; size <= 4*maxBatchBytes; size <<= 1 {
		tiers = append(tiers, size)
	}
	return mem.NewTieredBufferPool(tiers...)
}

// raw sends one encoded event, marking the span of the send so that a
// subscriber whose stream stalls is told from a broker that is behind.
func (d *deliverySender) raw(b []byte) error {
	n := int64(len(b))
	if d.conn != nil {
		d.conn.handed(n)
	} else {
		d.budget.Account(n)
	}
	d.sub.Sending(true)
	err := d.stream.SendMsg(&rawcodec.Raw{B: b, Pool: d.pool})
	d.sub.Sending(false)
	if d.conn == nil {
		d.budget.Account(-d.held)
		d.held = n
	}
	return err
}
