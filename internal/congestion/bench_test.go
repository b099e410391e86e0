package congestion

import (
	"fmt"
	"testing"
	"time"

	"github.com/dripmesh/drip/internal/content"
)

// BenchmarkOffer is the publisher's cost per message: with no limited flow
// (every message, once control is on) and with 16 flows none of which
// limits the message (the table is scanned).
func BenchmarkOffer(b *testing.B) {
	for _, flows := range []int{0, 16} {
		b.Run(map[int]string{0: "no-flows", 16: "16-flows"}[flows], func(b *testing.B) {
			p, _ := NewPublisher(1, DefaultConfig())
			for i := range flows {
				_ = p.Feedback(Feedback{Subscriber: uint64(i), SentAt: epoch, Requests: []Request{{Filter: 1, Bloom: bits(100 + i), Quota: 10}}}, epoch)
			}
			m := bits(1, 2, 3)
			b.ReportAllocs()
			now := epoch
			for i := range b.N {
				now = now.Add(time.Microsecond)
				p.Offer(uint64(i), m, now)
			}
		})
	}
}

// BenchmarkReceive is the subscriber's cost per message with four filters.
func BenchmarkReceive(b *testing.B) {
	s, _ := NewSubscriber(7, DefaultConfig())
	s.SetFilters([]Filter{{ID: 1, Bloom: bits(1)}, {ID: 2, Bloom: bits(2)}, {ID: 3, Bloom: bits(3)}, {ID: 4, Bloom: bits(4)}})
	p, _ := NewPublisher(1, DefaultConfig())
	hs := make([]Header, 1024)
	for i := range hs {
		_, hs[i] = p.Offer(uint64(i), bits(i%8, 9), epoch.Add(time.Duration(i)*time.Millisecond))
	}
	b.ReportAllocs()
	for i := range b.N {
		h := hs[i%len(hs)]
		h.Seq = uint64(i + 1)
		s.Receive(&h, bits(i%8, 9), epoch.Add(time.Duration(i)*time.Millisecond))
	}
}

// BenchmarkFeedback is the publisher's cost of one feedback with a
// request whose quota changes, against a table of 256 requests.
func BenchmarkFeedback(b *testing.B) {
	p, _ := NewPublisher(1, DefaultConfig())
	for i := range 256 {
		_ = p.Feedback(Feedback{Subscriber: uint64(i), SentAt: epoch, Requests: []Request{{Filter: 1, Bloom: bits(i%64, 64+i%32), Quota: float64(10 + i)}}}, epoch)
	}
	b.ReportAllocs()
	for i := range b.N {
		fb := Feedback{Subscriber: 3, SentAt: epoch, Requests: []Request{{Filter: 1, Bloom: bits(3, 67), Quota: float64(5 + i%20)}}}
		_ = p.Feedback(fb, epoch)
	}
}

// BenchmarkStamp is the publisher's cost of stamping a ten-attribute
// message for 80 listeners of 20 one-constraint filters each (the 8-broker
// overload's subscribers, docs/results/congestion.md): every predicate is
// evaluated on every message.
func BenchmarkStamp(b *testing.B) {
	p, _ := NewPublisher(1, DefaultConfig())
	for sub := range 80 {
		pred := make(content.Predicate, 20)
		for i := range pred {
			pred[i] = content.Filter{{Name: fmt.Sprintf("a%d", (sub+i)%10), Op: content.OpEq, Value: content.Int(int64(sub*20 + i))}}
		}
		if err := p.Listen(uint64(sub), pred, epoch); err != nil {
			b.Fatal(err)
		}
	}
	attrs := make([]content.Attribute, 10)
	for j := range attrs {
		attrs[j] = content.Attribute{Name: fmt.Sprintf("a%d", j), Value: content.Int(int64(j * 37))}
	}
	m := msg(b, attrs...)
	b.ReportAllocs()
	for range b.N {
		h := Header{}
		p.Stamp(&h, m)
	}
}
