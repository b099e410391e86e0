package congestion

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/dripmesh/drip/internal/content"
	"github.com/dripmesh/drip/internal/encoding"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// stampParams are the congestion encoding's parameters (wire.CongestionParams,
// which this package cannot import).
var stampParams = encoding.Params{Scheme: encoding.SchemeCatV2, M: 512, K: 4}

func msg(t testing.TB, attrs ...content.Attribute) content.Message {
	m, err := content.NewMessage(attrs, nil)
	require.NoError(t, err)
	return m
}

func intAttr(name string, v int64) content.Attribute {
	return content.Attribute{Name: name, Value: content.Int(v)}
}

// TestStampsCountWhatEachPredicateTakes: each listener's stamps count the
// messages its predicate takes, from 1, without gaps, whatever the others
// take; past MaxStamps a listener is left off and its count skips nothing.
func TestStampsCountWhatEachPredicateTakes(t *testing.T) {
	cfg := DefaultConfig()
	p := newPub(t, func(c *Config) { c.MaxStamps = 2 })
	now := time.Unix(100, 0)
	require.NoError(t, p.Listen(10, content.MustParse("a = 1"), now))
	require.NoError(t, p.Listen(20, content.MustParse("a = 1 || b exists"), now))
	require.NoError(t, p.Listen(30, content.MustParse("a = 1"), now))
	assert.Equal(t, 3, p.Listeners())

	stamps := func(m content.Message) []Stamp {
		_, h := p.Offer(0, stampParams.EncodeMessage(m), now)
		p.Stamp(&h, m)
		return append([]Stamp(nil), h.Stamps...)
	}
	assert.Equal(t, []Stamp{{20, 1}}, stamps(msg(t, intAttr("b", 5))))
	assert.Empty(t, stamps(msg(t, intAttr("c", 5))))
	assert.Equal(t, []Stamp{{10, 1}, {20, 2}}, stamps(msg(t, intAttr("a", 1))), "the third listener is past MaxStamps")
	assert.Equal(t, uint64(1), p.Stats().Unstamped)
	assert.Equal(t, []Stamp{{20, 3}}, stamps(msg(t, intAttr("a", 2), intAttr("b", 0))))

	// Saying the predicate again keeps the count; a changed one counts on.
	require.NoError(t, p.Listen(10, content.MustParse("c exists"), now))
	assert.Equal(t, []Stamp{{10, 2}}, stamps(msg(t, intAttr("c", 1))))
	p.Forget(10)
	assert.Empty(t, stamps(msg(t, intAttr("c", 1))))
	assert.Equal(t, uint64(5), p.Stats().Stamps)

	// A listener not heard from for SessionTimeout is forgotten; heard
	// again, it counts from 1.
	later := now.Add(cfg.SessionTimeout - time.Second)
	require.NoError(t, p.Listen(20, content.MustParse("b exists"), later))
	later = later.Add(time.Second)
	require.NoError(t, p.Listen(10, content.MustParse("b exists"), later))
	assert.Equal(t, 2, p.Listeners(), "30 expired")
	ab := msg(t, intAttr("a", 1), intAttr("b", 1))
	_, h := p.Offer(0, stampParams.EncodeMessage(ab), later)
	p.Stamp(&h, ab)
	assert.Equal(t, []Stamp{{10, 1}, {20, 4}}, h.Stamps, "20 was heard in time, 10 anew")
}

// TestListenBounds: a publisher keeps at most MaxListeners listeners and
// MaxListenConstraints constraints among them; a refused predicate leaves
// the subscriber's earlier one, and feedback names what was refused.
func TestListenBounds(t *testing.T) {
	p := newPub(t, func(c *Config) { c.MaxListeners, c.MaxListenConstraints = 2, 4 })
	now := time.Unix(100, 0)
	require.NoError(t, p.Listen(1, content.MustParse("a = 1 && b = 2"), now))
	require.NoError(t, p.Listen(2, content.MustParse("a = 2"), now))
	require.EqualError(t, p.Listen(3, content.MustParse("a = 3"), now), "congestion: subscriber 3: listen: 2 listeners already")
	require.EqualError(t, p.Listen(2, content.MustParse("a = 2 && b = 1 && c = 1"), now),
		"congestion: subscriber 2: listen: a predicate of 3 constraints would take the listeners past 4")
	require.EqualError(t, p.Listen(2, nil, now), "congestion: subscriber 2: listen: an empty predicate")
	require.NoError(t, p.Listen(2, content.MustParse("a = 2 || c = 1"), now), "replacing its own predicate")

	m := msg(t, intAttr("a", 2))
	_, h := p.Offer(0, stampParams.EncodeMessage(m), now)
	p.Stamp(&h, m)
	assert.Equal(t, []Stamp{{2, 1}}, h.Stamps, "the earlier predicate of 2 stays after a refusal")
	assert.Equal(t, uint64(3), p.Stats().ListenRefused)

	err := p.Feedback(Feedback{Subscriber: 3, Listen: content.MustParse("a = 3"), Requests: []Request{{Filter: 1, Quota: -1}}}, now)
	require.EqualError(t, err, "congestion: feedback from subscriber 3: 1 of 1 requests refused: filter 1: quota -1 is not a rate\nlisten: 2 listeners already")
}

// lossReference counts the loss events a receiver of every taken message
// would see from a gap in their numbers: a loss becomes known when the next
// taken message arrives, and losses within rtt of an event's start are
// that event.
type lossReference struct {
	rtt    time.Duration
	event  time.Time
	events int
}

func (r *lossReference) delivered(afterLoss bool, now time.Time) {
	if afterLoss && (r.events == 0 || now.Sub(r.event) >= r.rtt) {
		r.events, r.event = r.events+1, now
	}
}

// TestStampsMeasureLossExactly runs a publisher of ten-attribute messages
// through a channel that loses some, to a subscriber of 20 one-constraint
// filters, in virtual time. Publication records read gaps of messages that
// the filters did not take as losses (a message's Bloom filter holds many
// of the filters' bits), so a subscriber measuring by the records sees
// loss events without any loss; one measuring by its stamps sees exactly
// the loss events of its own messages (docs/design.md §12, "Exact loss
// detection").
func TestStampsMeasureLossExactly(t *testing.T) {
	pred := make(content.Predicate, 20)
	for i := range pred {
		pred[i] = content.Filter{{Name: fmt.Sprintf("a%d", i%10), Op: content.OpEq, Value: content.Int(int64(i))}}
	}
	filters := func(stamped bool) []Filter {
		fs := make([]Filter, len(pred))
		for i, f := range pred {
			fs[i] = Filter{ID: uint32(i), Bloom: stampParams.AppendFilter(nil, f)[0]}
			if stamped {
				fs[i].Constraints = f
			}
		}
		return fs
	}
	for _, loss := range []float64{0, 0.02} {
		for _, stamped := range []bool{false, true} {
			t.Run(fmt.Sprintf("loss %v stamped %v", loss, stamped), func(t *testing.T) {
				cfg := DefaultConfig()
				p := newPub(t, nil)
				s, err := NewSubscriber(7, cfg)
				require.NoError(t, err)
				s.SetFilters(filters(stamped))
				rng := rand.New(rand.NewPCG(1, 2))
				now := time.Unix(1000, 0)
				ref := lossReference{rtt: cfg.InitialRTT}
				lostTaken, taken := false, 0
				for range 20000 {
					now = now.Add(10 * time.Millisecond)
					attrs := make([]content.Attribute, 10)
					for j := range attrs {
						attrs[j] = intAttr(fmt.Sprintf("a%d", j), rng.Int64N(400))
					}
					m := msg(t, attrs...)
					bloom := stampParams.EncodeMessage(m)
					v, h := p.Offer(0, bloom, now)
					require.Equal(t, Send, v)
					p.Stamp(&h, m)
					takes := pred.Matches(m)
					if rng.Float64() < loss {
						lostTaken = lostTaken || takes
						continue
					}
					if !takes {
						continue // the subscriber's broker does not deliver it
					}
					taken++
					s.Receive(&h, bloom, now)
					ref.delivered(lostTaken, now)
					lostTaken = false
					// The subscriber's Ticks give the publisher its
					// predicate, and its feedback keeps it; the quotas are
					// left out, so that no message is held.
					fbs, _ := s.Tick(now)
					for _, fb := range fbs {
						require.NoError(t, p.Feedback(Feedback{Subscriber: fb.Subscriber, SentAt: fb.SentAt, Listen: fb.Listen}, now))
					}
				}
				events := s.Sessions()[0].LossEvents
				t.Logf("taken %d of 20000, loss events %d (reference %d)", taken, events, ref.events)
				require.Greater(t, taken, 500)
				if stamped {
					assert.True(t, s.Sessions()[0].Stamped)
					assert.Equal(t, uint64(ref.events), events, "stamps show every loss event and no other")
					return
				}
				assert.Greater(t, events, uint64(ref.events)+50, "records read gaps the filters did not take as losses")
			})
		}
	}
}

// TestStampsOfARestartedCount: a publisher that forgot the subscriber
// counts from 1 again when it hears its predicate anew; the subscriber
// takes the lower stamp on a later message as the new count, not as a
// late message or a loss.
func TestStampsOfARestartedCount(t *testing.T) {
	f := content.Filter{{Name: "a", Op: content.OpEq, Value: content.Int(1)}}
	s := newSub(t, Filter{ID: 0, Bloom: stampParams.AppendFilter(nil, f)[0], Constraints: f})
	now := time.Unix(1000, 0)
	m := stampParams.EncodeMessage(msg(t, intAttr("a", 1)))
	for i, c := range []struct {
		seq, stamp uint64
	}{{1, 1}, {2, 2}, {9, 3}, {10, 1}, {11, 2}, {13, 4}} {
		now = now.Add(time.Second)
		s.Receive(&Header{Publisher: 5, Seq: c.seq, Stamps: []Stamp{{7, c.stamp}}}, m, now)
		want := uint64(0)
		if i == 5 {
			want = 1 // stamp 3 of the new count was lost
		}
		assert.Equal(t, want, s.Sessions()[0].LossEvents, "message %d", c.seq)
	}
	assert.Equal(t, uint64(6), s.Stats().Stamped)
}

// TestSubscriberGivesItsPredicate: Tick gives a publisher the
// subscriber's predicate when its messages come without the subscriber's
// stamp (or name the publisher alone, as the session begins), at once and
// then at most every ListenInterval, and not while they come stamped; a
// subscriber whose filters lack constraints gives none.
func TestSubscriberGivesItsPredicate(t *testing.T) {
	f := content.Filter{{Name: "a", Op: content.OpEq, Value: content.Int(1)}}
	bloom := stampParams.AppendFilter(nil, f)[0]
	cfg := DefaultConfig()
	for _, withConstraints := range []bool{true, false} {
		s, err := NewSubscriber(7, cfg)
		require.NoError(t, err)
		filter := Filter{ID: 0, Bloom: bloom}
		if withConstraints {
			filter.Constraints = f
		}
		s.SetFilters([]Filter{filter})
		now := time.Unix(1000, 0)
		m := stampParams.EncodeMessage(msg(t, intAttr("a", 1)))
		var listens []time.Duration
		start := now
		stamp := uint64(0)
		for i := range 400 {
			now = now.Add(100 * time.Millisecond)
			h := Header{Publisher: 5, Seq: uint64(i + 1), SentAt: now, Rate: 10}
			if now.Sub(start) < time.Second {
				h = Header{Publisher: 5} // no subscriber asked yet: the ID alone
			}
			if at := now.Sub(start); at >= 15*time.Second && at < 30*time.Second {
				stamp++ // the publisher stamps from 15 s to 30 s, then forgets
				h.Stamps = []Stamp{{Subscriber: 7, Seq: stamp}}
			}
			s.Receive(&h, m, now)
			fbs, _ := s.Tick(now)
			for _, fb := range fbs {
				if fb.Listen != nil {
					assert.Equal(t, content.Predicate{f}, fb.Listen)
					listens = append(listens, now.Sub(start))
				}
			}
		}
		if !withConstraints {
			assert.Empty(t, listens)
			continue
		}
		assert.Equal(t, []time.Duration{100 * time.Millisecond, 10100 * time.Millisecond, 30 * time.Second, 40 * time.Second}, listens)
		assert.Equal(t, uint64(4), s.Stats().Listens)
	}
}

// TestListenersEchoIsAnsweredByItsPredicate: a subscriber that listens
// asks for echoes without filters, and its publisher answers on the next
// message the predicate takes (and only on those); an echo without filters
// from a subscriber that gave no predicate is refused. One that does not
// listen sends its filters' Bloom filters, as Malekpour11 has it.
func TestListenersEchoIsAnsweredByItsPredicate(t *testing.T) {
	f := content.Filter{{Name: "a", Op: content.OpEq, Value: content.Int(1)}}
	bloom := stampParams.AppendFilter(nil, f)[0]
	now := time.Unix(1000, 0)
	for _, listens := range []bool{true, false} {
		filter := Filter{ID: 0, Bloom: bloom}
		if listens {
			filter.Constraints = f
		}
		s := newSub(t, filter)
		s.Receive(&Header{Publisher: 5}, bloom, now)
		fbs, echoes := s.Tick(now)
		require.Len(t, echoes, 1, "at session start")
		if !listens {
			assert.Equal(t, []encoding.Bloom{bloom}, echoes[0].Filters)
			continue
		}
		assert.Empty(t, echoes[0].Filters)
		require.Len(t, fbs, 1)

		p := newPub(t, nil)
		require.EqualError(t, p.Echo(echoes[0], now), "congestion: echo from subscriber 7 has no filter and no predicate")
		require.NoError(t, p.Feedback(fbs[0], now))
		require.NoError(t, p.Echo(echoes[0], now))
		send := func(m content.Message) Header {
			now = now.Add(10 * time.Millisecond)
			_, h := p.Offer(0, stampParams.EncodeMessage(m), now)
			p.Stamp(&h, m)
			return h
		}
		asked := now
		assert.Empty(t, send(msg(t, intAttr("a", 2))).Echoes, "a message the predicate does not take")
		now = now.Add(3 * DefaultConfig().EchoTimeout) // a sparse flow: the request waits
		h := send(msg(t, intAttr("a", 1)))
		require.Len(t, h.Echoes, 1)
		held := now.Sub(asked)
		assert.Equal(t, EchoReply{Subscriber: 7, SentAt: asked, Held: held}, h.Echoes[0])
		s.Receive(&h, bloom, now.Add(50*time.Millisecond))
		assert.Equal(t, 50*time.Millisecond, s.Sessions()[0].RTT, "the time in flight; the rest was held at the publisher")
		assert.Empty(t, send(msg(t, intAttr("a", 1))).Echoes, "the reply ended the request")
	}
}

// TestListenerAsksAgainAfterAMessage: a listening subscriber's echo
// request waits at the publisher for the next message it receives, so it
// asks again only once a message came without the reply, and then with its
// Bloom filters if no stamp came either (a publisher from before stamps
// refuses an echo without them); one that does not listen asks every
// EchoInterval.
func TestListenerAsksAgainAfterAMessage(t *testing.T) {
	f := content.Filter{{Name: "a", Op: content.OpEq, Value: content.Int(1)}}
	bloom := stampParams.AppendFilter(nil, f)[0]
	for _, listens := range []bool{true, false} {
		filter := Filter{ID: 0, Bloom: bloom}
		if listens {
			filter.Constraints = f
		}
		s := newSub(t, filter)
		start := time.Unix(1000, 0)
		s.Receive(&Header{Publisher: 5, Seq: 1, SentAt: start, Rate: 1}, bloom, start)
		var asked []time.Duration
		var filters []int
		for i := range 60 {
			now := start.Add(time.Duration(i) * 100 * time.Millisecond)
			if i == 35 {
				s.Receive(&Header{Publisher: 5, Seq: 2, SentAt: now, Rate: 1}, bloom, now) // no reply
			}
			if _, es := s.Tick(now); len(es) > 0 {
				asked = append(asked, now.Sub(start))
				filters = append(filters, len(es[0].Filters))
			}
		}
		if listens {
			assert.Equal(t, []time.Duration{0, 3500 * time.Millisecond}, asked)
			// Still no stamp after the first request: the publisher may
			// predate stamps, so the second carries the Bloom filters.
			assert.Equal(t, []int{0, 1}, filters)
			continue
		}
		assert.Equal(t, []time.Duration{0, time.Second, 2 * time.Second, 3 * time.Second, 4 * time.Second, 5 * time.Second}, asked)
	}
}

// TestRecordsShortenWhileEveryAskerListens: a publisher with listeners
// sends no record while every subscriber that asks listens and no flow is
// limited, records of one entry once one is (for the share of a coarse
// flow), and of RecordSize for SessionTimeout after a subscriber that does
// not listen asked.
func TestRecordsShortenWhileEveryAskerListens(t *testing.T) {
	p := newPub(t, nil)
	cfg := DefaultConfig()
	now := time.Unix(100, 0)
	record := func() int {
		now = now.Add(time.Millisecond)
		_, h := p.Offer(0, bits(1), now)
		return len(h.Record)
	}
	for range 10 {
		record()
	}
	assert.Equal(t, cfg.RecordSize, record(), "no listener")
	require.NoError(t, p.Feedback(Feedback{Subscriber: 7, SentAt: now, Listen: content.MustParse("a = 1")}, now))
	assert.Equal(t, 0, record(), "every asker listens, and no flow is limited")
	require.NoError(t, p.Feedback(Feedback{Subscriber: 7, SentAt: now, Requests: []Request{{Filter: 0, Bloom: bits(2), Quota: 50}}}, now))
	assert.Equal(t, 1, record(), "a limited flow: its share is measured")
	require.NoError(t, p.Echo(Echo{Subscriber: 8, SentAt: now, Filters: []encoding.Bloom{bits(3)}}, now))
	assert.Equal(t, cfg.RecordSize, record(), "subscriber 8 reads the records")
	now = now.Add(cfg.SessionTimeout)
	require.NoError(t, p.Feedback(Feedback{Subscriber: 7, SentAt: now, Listen: content.MustParse("a = 1")}, now))
	assert.Equal(t, 0, record(), "subscriber 8 has not asked for SessionTimeout, and the flow expired")
}

// TestStampsMatchTheReference: the stamps a publisher puts on random
// messages for random listeners are those of a brute-force reference, each
// predicate evaluated on its own (content.Predicate.Matches), with each
// listener's count, whatever the operators.
func TestStampsMatchTheReference(t *testing.T) {
	ops := []content.Op{content.OpEq, content.OpNe, content.OpLt, content.OpGe, content.OpExists}
	names := []string{"a", "b", "c"}
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 11))
		p := newPub(t, func(c *Config) { c.MaxStamps = 64 })
		now := time.Unix(100, 0)
		preds := map[uint64]content.Predicate{}
		for sub := range uint64(1 + rng.IntN(30)) {
			pred := make(content.Predicate, 1+rng.IntN(4))
			for i := range pred {
				for range 1 + rng.IntN(3) {
					c := content.Constraint{Name: names[rng.IntN(len(names))], Op: ops[rng.IntN(len(ops))]}
					if c.Op != content.OpExists {
						c.Value = content.Int(rng.Int64N(5))
					}
					pred[i] = append(pred[i], c)
				}
			}
			require.NoError(t, p.Listen(sub, pred, now))
			preds[sub] = pred
		}
		counts := map[uint64]uint64{}
		for range 200 {
			var attrs []content.Attribute
			for _, n := range names {
				if rng.IntN(4) > 0 {
					attrs = append(attrs, intAttr(n, rng.Int64N(5)))
				}
			}
			m := msg(t, attrs...)
			want := []Stamp{}
			for sub := range uint64(len(preds)) {
				if preds[sub].Matches(m) {
					counts[sub]++
					want = append(want, Stamp{Subscriber: sub, Seq: counts[sub]})
				}
			}
			_, h := p.Offer(0, stampParams.EncodeMessage(m), now)
			p.Stamp(&h, m)
			require.Equal(t, want, append([]Stamp{}, h.Stamps...), "seed %d, message %v", seed, m)
		}
	}
}
