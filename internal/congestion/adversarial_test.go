package congestion

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/dripmesh/drip/internal/content"
	"github.com/stretchr/testify/require"
)

// hostileQuota is a quota a subscriber might send, sane or not.
func hostileQuota(rng *rand.Rand) float64 {
	switch rng.IntN(8) {
	case 0:
		return math.NaN()
	case 1:
		return math.Inf(1)
	case 2:
		return math.Inf(-1)
	case 3:
		return -rng.Float64()
	case 4:
		return 0
	case 5:
		return math.MaxFloat64
	}
	return rng.Float64() * 1000
}

// TestHostileFeedbackKeepsBounds throws random and malformed feedback,
// predicates, echoes and messages at a publisher: nothing panics, every
// table stays within its bound (listeners and their constraints too), and
// every flow's quota is a rate at or above MinRate.
func TestHostileFeedbackKeepsBounds(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MaxRequests, cfg.MaxEchoes, cfg.MaxQueue, cfg.MaxTags = 16, 4, 32, 2
	cfg.MaxListeners, cfg.MaxListenConstraints, cfg.MaxStamps = 8, 40, 3
	messages := []content.Message{
		content.MessageFrom(map[string]content.Value{"a": content.Int(1)}),
		content.MessageFrom(map[string]content.Value{"a": content.Int(2), "b": content.String("x")}),
	}
	for seed := range uint64(200) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 5))
			p, err := NewPublisher(1, cfg)
			require.NoError(t, err)
			now := epoch
			for i := range 400 {
				now = now.Add(time.Duration(rng.IntN(int(50 * time.Millisecond))))
				switch rng.IntN(4) {
				case 0:
					fb := Feedback{Subscriber: rng.Uint64N(40), SentAt: now.Add(time.Duration(rng.Int64()))}
					for range rng.IntN(30) {
						fb.Requests = append(fb.Requests, Request{Filter: rng.Uint32N(4), Bloom: subsetBloom(uint(rng.IntN(64))), Quota: hostileQuota(rng)})
					}
					if rng.IntN(2) == 0 {
						fb.Listen = hostilePredicate(rng)
					}
					_ = p.Feedback(fb, now)
				case 1:
					e := Echo{Subscriber: rng.Uint64N(40), SentAt: now.Add(-time.Duration(rng.Int64()))}
					for range rng.IntN(20) {
						e.Filters = append(e.Filters, subsetBloom(uint(rng.IntN(64))))
					}
					_ = p.Echo(e, now)
				case 2:
					p.Release(now)
				default:
					v, h := p.Offer(uint64(i), subsetBloom(uint(rng.IntN(64))), now)
					if v == Send {
						p.Stamp(&h, messages[rng.IntN(len(messages))])
					}
					if v == Send && (len(h.Tags) > cfg.MaxTags || len(h.Echoes) > maxEchoesPerHeader || len(h.Record) > cfg.RecordSize || len(h.Stamps) > cfg.MaxStamps) {
						t.Fatalf("header of %d tags, %d echoes, %d stamps, a record of %d", len(h.Tags), len(h.Echoes), len(h.Stamps), len(h.Record))
					}
				}
				held := 0
				for _, l := range p.listeners {
					held += l.size
				}
				if len(p.listeners) > cfg.MaxListeners || held > cfg.MaxListenConstraints || held != p.constraints || p.takers.Len() != len(p.listeners) {
					t.Fatalf("%d listeners of %d constraints (counted %d)", len(p.listeners), held, p.constraints)
				}
				// Plain comparisons first, require to report: its calls on
				// every step of every seed were a third of the test's time.
				if len(p.flows.all) > cfg.MaxRequests || len(p.echoes) > cfg.MaxEchoes || p.Queued() > cfg.MaxQueue {
					require.LessOrEqual(t, len(p.flows.all), cfg.MaxRequests)
					require.LessOrEqual(t, len(p.echoes), cfg.MaxEchoes)
					require.LessOrEqual(t, p.Queued(), cfg.MaxQueue)
				}
				for _, f := range p.Flows(now) {
					if math.IsNaN(f.Quota) || math.IsInf(f.Quota, 0) || f.Quota < cfg.MinRate {
						t.Fatalf("quota %v", f.Quota)
					}
				}
				if next, ok := p.NextRelease(now); ok && next.Before(now) {
					t.Fatalf("a release in the past: %v before %v", next, now)
				}
			}
		})
	}
}

// hostilePredicate is a predicate a subscriber might give: empty, or of
// up to 12 filters of up to 6 constraints.
func hostilePredicate(rng *rand.Rand) content.Predicate {
	pred := make(content.Predicate, rng.IntN(13))
	for i := range pred {
		for range 1 + rng.IntN(6) {
			pred[i] = append(pred[i], content.Constraint{Name: "a", Op: content.OpEq, Value: content.Int(rng.Int64N(3))})
		}
	}
	return pred
}

// TestHostileHeadersKeepEstimatesSane throws random headers at a
// subscriber (sequence numbers that jump or repeat, records of any length,
// clocks anywhere, echoes, tags and stamps for anyone): nothing panics, the
// round-trip time stays positive, and every requested quota is a rate.
func TestHostileHeadersKeepEstimatesSane(t *testing.T) {
	for seed := range uint64(200) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 6))
			cfg := DefaultConfig()
			cfg.MaxSessions = 4
			s, err := NewSubscriber(7, cfg)
			require.NoError(t, err)
			s.SetFilters([]Filter{{ID: 1, Bloom: bits(1)}, {ID: 2, Bloom: bits(2)}})
			now := epoch
			for range 400 {
				now = now.Add(time.Duration(rng.IntN(int(20 * time.Millisecond))))
				h := Header{
					Publisher: rng.Uint64N(6),
					Seq:       rng.Uint64N(64),
					SentAt:    now.Add(time.Duration(rng.Int64N(int64(time.Hour))) - 30*time.Minute),
					Rate:      hostileQuota(rng),
				}
				if rng.IntN(10) == 0 {
					h.Seq = math.MaxUint64 - rng.Uint64N(3)
				}
				for range rng.IntN(8) {
					h.Record = append(h.Record, subsetBloom(uint(rng.IntN(64))))
				}
				if rng.IntN(4) == 0 {
					h.Tags = []Tag{{Subscriber: 7, Filter: rng.Uint32N(3), Feedback: time.Duration(rng.Int64()) - math.MaxInt64/2}}
				}
				if rng.IntN(3) == 0 {
					h.Stamps = []Stamp{{Subscriber: 7 + rng.Uint64N(2), Seq: rng.Uint64N(64)}}
					if rng.IntN(10) == 0 {
						h.Stamps[0].Seq = math.MaxUint64 - rng.Uint64N(3)
					}
				}
				if rng.IntN(8) == 0 {
					h.Echoes = []EchoReply{{Subscriber: 7, SentAt: now.Add(-time.Duration(rng.Int64N(int64(time.Second)))), Held: time.Duration(rng.Int64N(int64(time.Second)))}}
				}
				s.Receive(&h, subsetBloom(uint(rng.IntN(64))), now)
				fbs, _ := s.Tick(now)
				for _, fb := range fbs {
					for _, r := range fb.Requests {
						if math.IsNaN(r.Quota) || r.Quota < cfg.MinRate {
							t.Fatalf("quota %v", r.Quota)
						}
					}
				}
				if len(s.sessions) > cfg.MaxSessions {
					t.Fatalf("%d sessions, more than %d", len(s.sessions), cfg.MaxSessions)
				}
				for _, ss := range s.sessions {
					if ss.rtt <= 0 || math.IsNaN(ss.loss.rate()) {
						t.Fatalf("round-trip time %v, loss event rate %v", ss.rtt, ss.loss.rate())
					}
				}
			}
		})
	}
}
