package clientapi

import (
	"fmt"
	"time"

	dripv1 "github.com/dripmesh/drip/api/proto/drip/v1"
	"github.com/dripmesh/drip/internal/congestion"
	"github.com/dripmesh/drip/internal/content"
	"github.com/dripmesh/drip/internal/encoding"
	"github.com/dripmesh/drip/internal/wire"
	"google.golang.org/protobuf/proto"
)

// CongestionFeedback is what one feedback message carries: the
// subscriber's requests, an echo request, or both.
type CongestionFeedback struct {
	Feedback congestion.Feedback
	Echo     *congestion.Echo
}

// Bounds on decoded feedback.
const maxFeedbackRequests = 1024

// listenLimits bound a subscriber's predicate in feedback: the broker's
// defaults but for the text, which a feedback message's payload bounds
// anyway; the publisher bounds its listeners' constraints together
// (congestion.Config.MaxListenConstraints).
func listenLimits() content.Limits {
	l := content.DefaultLimits()
	l.MaxText = 64 << 10
	return l
}

// MarshalCongestionFeedback is the payload of a feedback message.
func MarshalCongestionFeedback(f CongestionFeedback) ([]byte, error) {
	pb := &dripv1.CongestionFeedback{
		Subscriber:     f.Feedback.Subscriber,
		SentAtUnixNano: f.Feedback.SentAt.UnixNano(),
	}
	for _, r := range f.Feedback.Requests {
		pb.Requests = append(pb.Requests, &dripv1.CongestionRequest{Filter: r.Filter, Bloom: r.Bloom.AppendBinary(nil, wire.CongestionParams), Quota: r.Quota})
	}
	if f.Feedback.Listen != nil {
		pb.Listen = f.Feedback.Listen.String()
	}
	if e := f.Echo; e != nil {
		pb.Echo = true
		pb.Subscriber, pb.SentAtUnixNano = e.Subscriber, e.SentAt.UnixNano()
		for _, b := range e.Filters {
			pb.EchoFilters = append(pb.EchoFilters, b.AppendBinary(nil, wire.CongestionParams))
		}
	}
	return proto.Marshal(pb)
}

// UnmarshalCongestionFeedback decodes a feedback message's payload for
// publisher pub. It refuses Bloom filters of the wrong size and more
// requests or echo filters than the bounds; quotas are the publisher's to
// judge (congestion.Publisher.Feedback).
func UnmarshalCongestionFeedback(b []byte, pub uint64) (CongestionFeedback, error) {
	var pb dripv1.CongestionFeedback
	if err := proto.Unmarshal(b, &pb); err != nil {
		return CongestionFeedback{}, fmt.Errorf("congestion feedback: %w", err)
	}
	if len(pb.Requests) > maxFeedbackRequests {
		return CongestionFeedback{}, fmt.Errorf("congestion feedback: %d requests, more than %d", len(pb.Requests), maxFeedbackRequests)
	}
	if len(pb.EchoFilters) > congestion.MaxEchoFilters {
		return CongestionFeedback{}, fmt.Errorf("congestion feedback: %d echo filters, more than %d", len(pb.EchoFilters), congestion.MaxEchoFilters)
	}
	sentAt := time.Unix(0, pb.SentAtUnixNano)
	out := CongestionFeedback{Feedback: congestion.Feedback{Publisher: pub, Subscriber: pb.Subscriber, SentAt: sentAt}}
	for i, r := range pb.Requests {
		bl, err := encoding.BloomFromBytes(r.Bloom, wire.CongestionParams)
		if err != nil {
			return CongestionFeedback{}, fmt.Errorf("congestion feedback: request %d: %w", i, err)
		}
		out.Feedback.Requests = append(out.Feedback.Requests, congestion.Request{Filter: r.Filter, Bloom: bl, Quota: r.Quota})
	}
	if pb.Listen != "" {
		pred, err := content.ParseWithLimits(pb.Listen, listenLimits())
		if err != nil {
			return CongestionFeedback{}, fmt.Errorf("congestion feedback: listen: %w", err)
		}
		out.Feedback.Listen = pred
	}
	if pb.Echo {
		e := &congestion.Echo{Publisher: pub, Subscriber: pb.Subscriber, SentAt: sentAt}
		for i, f := range pb.EchoFilters {
			bl, err := encoding.BloomFromBytes(f, wire.CongestionParams)
			if err != nil {
				return CongestionFeedback{}, fmt.Errorf("congestion feedback: echo filter %d: %w", i, err)
			}
			e.Filters = append(e.Filters, bl)
		}
		out.Echo = e
	}
	return out, nil
}
