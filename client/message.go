package client

import (
	"time"
)

// Attrs are a message's attributes by name. Values are string, int, int64,
// float64 or bool; delivered messages carry int64 for every integer.
type Attrs map[string]any

// Message is what publishers send and subscribers receive. Its attributes
// are Attrs or Fields, not both: a delivered message has Attrs, or Fields
// on a subscription WithFields.
type Message struct {
	Attrs   Attrs
	Fields  Fields
	Payload []byte // opaque to the mesh; no predicate reads it
	// Deadline, if not zero, is the delivery deadline the publisher sets,
	// from when the ingress broker accepts the message (at most an hour):
	// the mesh sends it with that urgency to every subscriber, beside the
	// deadlines subscriptions ask for (docs/design.md §11).
	Deadline time.Duration
}

// Delivery is a message delivered to a subscription.
type Delivery struct {
	Message
	// Ingress is the router ID of the broker where the message entered the
	// mesh.
	Ingress uint32
	// PublishedAt is when the ingress broker accepted the message, by that
	// broker's clock (zero if the broker did not say).
	PublishedAt time.Time
	// Hops is the number of broker-to-broker hops the message travelled.
	Hops int
	// Elapsed is the time from acceptance at the ingress to delivery at
	// the subscriber's broker, as the mesh measured it hop by hop, for a
	// message that travelled with a deadline (zero: not measured). A
	// subscription with a deadline counts a delivery later than it as a
	// miss (Subscription.DeadlineMisses).
	Elapsed time.Duration
	// IngressEpoch and Seq complete the message's stamp (Ingress,
	// IngressEpoch, Seq), which names it in the mesh; the client delivers
	// each stamp once. Seq 0: a broker too old to stamp.
	IngressEpoch, Seq uint64
	// Gap is set on the first delivery after a gap: the subscription's
	// broker had failed and it was installed again (see Gap).
	Gap *Gap
	// Lost is how many matching messages the subscription has learned it
	// lost since Next returned the previous delivery, because it was read
	// too slowly: dropped by a broker (reported in a Lost event) or by the
	// client when its buffer stayed full (WithBufferWait). It is stamped
	// when Next returns, not where the loss fell in the stream, so that a
	// reader hears of a loss with its next delivery, not behind its
	// backlog. LostTotal is Subscription.Lost at that moment; both are zero
	// when nothing was lost.
	Lost, LostTotal uint64
	// congestion is the publisher's congestion-control header, if any
	// (wire form).
	congestion []byte
	// marked says a broker on the way queued it on a link whose queue was
	// filling (Published.congestion_experienced): congestion control
	// counts it as a loss event.
	marked bool
	// size is the delivery's wire size, which its decoded form takes
	// about deliveryOverhead more than.
	size int
}

// deliveryOverhead is what a decoded delivery costs beyond its wire bytes
// (the Delivery, its attribute map), for the subscription's byte bound.
const deliveryOverhead = 512

func (d *Delivery) cost() int { return d.size + deliveryOverhead }
