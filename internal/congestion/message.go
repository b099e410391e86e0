package congestion

import (
	"time"

	"github.com/dripmesh/drip/internal/content"
	"github.com/dripmesh/drip/internal/encoding"
)

// Header is the congestion-control header a publisher puts on every
// message it sends (Malekpour11 Fig. 2).
type Header struct {
	// Publisher names the session; Seq counts the publisher's messages
	// from 1, in the order they were sent. A header with Seq 0 only names
	// the publisher: no subscriber has asked it yet, so it measures
	// nothing and says nothing more.
	Publisher uint64
	Seq       uint64
	// Record is the publication record: the Bloom filters of the messages
	// before this one, oldest first, so that the last is that of Seq−1
	// (at most RecordSize, fewer at the start). It is shared with other
	// headers and must not be modified.
	Record []encoding.Bloom
	// SentAt is the publisher's clock when it sent the message.
	SentAt time.Time
	// Rate is the publisher's publish rate λ_P, messages per second.
	Rate float64
	// Tags name the limiting subscriber of each limited flow the message
	// belongs to, least quota first; none when the message is not rate
	// controlled.
	Tags []Tag
	// Echoes answer subscribers' echo requests.
	Echoes []EchoReply
	// Stamps count, for each listening subscriber whose predicate takes
	// the message, that subscriber's messages from this publisher (see
	// Publisher.Stamp): a gap in them is a loss, exactly.
	Stamps []Stamp
	// Marked says that a broker on the way sent the message over a link
	// whose queue was filling (congestion experienced, as ECN marks a
	// packet, RFC 3168): the subscriber counts it as a loss event without
	// the loss. Brokers set it, not the publisher; it is not part of the
	// header's wire form.
	Marked bool
}

// Stamp is the number of a message among those a listening subscriber's
// predicate takes, counted from 1 by the publisher.
type Stamp struct {
	Subscriber uint64
	Seq        uint64
}

// Controlled reports whether the message belongs to a limited flow.
func (h *Header) Controlled() bool { return len(h.Tags) > 0 }

// Tag names a flow's current limiting receiver (CLR) and carries
// δ_feedback, the travel time of its last feedback measured from its clock
// to the publisher's (Malekpour11 §III-B-4): clock offsets cancel when the
// subscriber adds its own one-way delay for the message.
type Tag struct {
	Subscriber uint64
	Filter     uint32
	Feedback   time.Duration
}

// EchoReply answers a subscriber's Echo: its SentAt, and how long the
// publisher held the request before this message, so that the subscriber
// measures the round trip through the network alone.
type EchoReply struct {
	Subscriber uint64
	SentAt     time.Time
	Held       time.Duration
}

// Feedback is what a subscriber tells a publisher once per round
// (Algorithm 1, SEND_FEEDBACK).
type Feedback struct {
	// Publisher is whom it is for; Subscriber whom it is from.
	Publisher  uint64
	Subscriber uint64
	// SentAt is the subscriber's clock when it sent the feedback.
	SentAt   time.Time
	Requests []Request
	// Listen, when not nil, is the subscriber's predicate, which it asks
	// the publisher to stamp its messages by (Publisher.Listen): given when
	// the publisher's messages come without the subscriber's stamp, at most
	// once every ListenInterval.
	Listen content.Predicate
}

// Request asks that the flow of the subscriber's filter be limited to
// Quota messages per second.
type Request struct {
	Filter uint32
	Bloom  encoding.Bloom
	Quota  float64
}

// Echo asks a publisher to echo SentAt on a message that matches one of
// Filters, so that the subscriber can measure the round trip through the
// publish/subscribe network (Malekpour11 §III-B-4).
type Echo struct {
	Publisher  uint64
	Subscriber uint64
	SentAt     time.Time
	Filters    []encoding.Bloom
}
