package congestion

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/dripmesh/drip/internal/encoding"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func newSub(t *testing.T, filters ...Filter) *Subscriber {
	t.Helper()
	s, err := NewSubscriber(7, DefaultConfig())
	require.NoError(t, err)
	s.SetFilters(filters)
	return s
}

func TestTCPRate(t *testing.T) {
	for _, c := range []struct {
		rtt  time.Duration
		p    float64
		want float64
	}{
		{100 * time.Millisecond, 0.01, 112.33},
		{200 * time.Millisecond, 0.01, 56.17},
		{100 * time.Millisecond, 0.1, 17.70},
		{100 * time.Millisecond, 1, 0.0411},
		{100 * time.Millisecond, 0, math.Inf(1)},
	} {
		got := TCPRate(c.rtt, c.p)
		if math.IsInf(c.want, 1) {
			assert.True(t, math.IsInf(got, 1))
			continue
		}
		assert.InEpsilon(t, c.want, got, 0.01, "rtt %v p %v", c.rtt, c.p)
	}
	for _, rate := range []float64{1, 30, 500, 20000} {
		p := lossRateFor(50*time.Millisecond, rate)
		assert.InEpsilon(t, rate, TCPRate(50*time.Millisecond, p), 1e-6, "the inverse at %v msg/s", rate)
	}
}

// TestLossHistory is TFRC's average loss interval (RFC 5348 §5.4), which
// Malekpour11 §II-A takes as p = 1/ℓ.
func TestLossHistory(t *testing.T) {
	var h lossHistory
	assert.Zero(t, h.rate(), "no loss, no loss rate")
	rtt := 100 * time.Millisecond
	now := epoch
	h.deliver(1000)
	h.loss(now, rtt, TCPRate(rtt, 0.01)) // the first interval is seeded from the rate seen
	assert.InEpsilon(t, 0.01, h.rate(), 1e-6)
	h.loss(now.Add(50*time.Millisecond), rtt, 0) // same event: within one RTT
	assert.Equal(t, 1, h.n)
	for range 8 {
		h.deliver(100)
		now = now.Add(time.Second)
		h.loss(now, rtt, 0)
	}
	assert.InEpsilon(t, 0.01, h.rate(), 1e-9, "eight intervals of 100")
	assert.Equal(t, uint64(9), h.events, "counted beyond the eight intervals kept")
	h.deliver(50)
	assert.InEpsilon(t, 0.01, h.rate(), 1e-9, "a short open interval does not count")
	h.deliver(1000)
	assert.Less(t, h.rate(), 0.01, "a long open interval lowers p before the next loss")
}

// TestLossDetection is Malekpour11 §III-C: the publication record shows
// which messages of a gap were relevant; beyond it a delivery counts by
// the chance that what the record does not cover was irrelevant.
func TestLossDetection(t *testing.T) {
	mine, other := bits(1, 9), bits(2, 9)
	// header takes the record newest first, as the cases read.
	header := func(seq uint64, newestFirst ...encoding.Bloom) *Header {
		record := slices.Clone(newestFirst)
		slices.Reverse(record)
		return &Header{Publisher: 1, Seq: seq, SentAt: epoch, Rate: 100, Record: record}
	}
	for _, c := range []struct {
		name       string
		next       *Header
		lossEvents int
		open       float64
	}{
		{"no gap", header(2, mine), 0, 2},
		{"gap of mine", header(3, mine, other), 1, 1},
		{"gap of others", header(3, other, other), 0, 2},
		{"loss at the end of the gap", header(4, other, mine, other), 1, 1},
		{"loss before the gap is not one", header(3, other, mine, mine), 0, 2},
		{"gap beyond the record", header(6, other, other), 0, 1 + math.Pow(1-0.5, 2)},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newSub(t, Filter{ID: 1, Bloom: bits(1)})
			s.Receive(header(1), mine, epoch)
			ss := s.sessions[1]
			// ρ = 50/100: the filter is exact, so the stream loss is
			// measured on is all of the session's messages.
			ss.recv, ss.stream = meter{v: 50, at: epoch}, meter{v: 50, at: epoch}
			s.Receive(c.next, mine, epoch)
			assert.Equal(t, c.lossEvents, ss.loss.n)
			assert.InDelta(t, c.open, ss.loss.open, 0.01)
		})
	}
}

// TestMarkIsALossEvent: a message a broker marked (its link's queue was
// filling) is a loss event without a gap, once per round trip as losses
// are; a mark on a message of another subscriber's filter, or a late
// copy, is not.
func TestMarkIsALossEvent(t *testing.T) {
	mine, other := bits(1, 9), bits(2, 9)
	header := func(seq uint64, marked bool) *Header {
		return &Header{Publisher: 1, Seq: seq, SentAt: epoch, Rate: 100, Marked: marked}
	}
	s := newSub(t, Filter{ID: 1, Bloom: bits(1)})
	s.Receive(header(1, false), mine, epoch)
	ss := s.sessions[1]
	s.Receive(header(2, false), mine, epoch)
	assert.Zero(t, ss.loss.n)
	s.Receive(header(3, true), mine, epoch)
	assert.Equal(t, 1, ss.loss.n)
	s.Receive(header(4, true), mine, epoch.Add(ss.rtt/2))
	assert.Equal(t, 1, ss.loss.n, "within one round trip: the same event")
	s.Receive(header(5, true), mine, epoch.Add(2*ss.rtt))
	assert.Equal(t, 2, ss.loss.n)
	s.Receive(header(4, true), mine, epoch.Add(4*ss.rtt))
	assert.Equal(t, 2, ss.loss.n, "a late copy")
	s.Receive(header(6, true), other, epoch.Add(6*ss.rtt))
	assert.Equal(t, 2, ss.loss.n, "another filter's message: not this stream's")
	assert.Equal(t, uint64(3), s.Stats().Marked, "the marks of this stream's messages, copies aside")
}

// TestRTTMeasurement is Malekpour11 §III-B-4: an echo gives the first
// round-trip time; then δ_feedback plus the one-way delay of data, whose
// clock offsets cancel.
func TestRTTMeasurement(t *testing.T) {
	s := newSub(t, Filter{ID: 1, Bloom: bits(1)})
	skew := 7 * time.Second // the subscriber's clock is ahead
	s.Receive(&Header{Publisher: 1, Seq: 1, SentAt: epoch}, bits(1), epoch.Add(skew+20*time.Millisecond))
	ss := s.sessions[1]
	assert.False(t, ss.measured)
	assert.Equal(t, DefaultConfig().InitialRTT, ss.rtt)
	_, echoes := s.Tick(epoch.Add(skew + 20*time.Millisecond))
	require.Len(t, echoes, 1)
	assert.Equal(t, []encoding.Bloom{bits(1)}, echoes[0].Filters)

	sentAt := echoes[0].SentAt
	s.Receive(&Header{Publisher: 1, Seq: 2, SentAt: epoch.Add(50 * time.Millisecond),
		Echoes: []EchoReply{{Subscriber: 7, SentAt: sentAt, Held: 10 * time.Millisecond}}},
		bits(1), sentAt.Add(90*time.Millisecond))
	require.True(t, ss.measured)
	assert.Equal(t, 80*time.Millisecond, ss.rtt, "90 ms less the 10 the publisher held it")

	// As the limiting subscriber: δ_feedback (publisher clock − subscriber
	// clock) plus the data's one-way delay (subscriber − publisher).
	for i := range 100 {
		at := epoch.Add(time.Second + time.Duration(i)*time.Millisecond)
		s.Receive(&Header{Publisher: 1, Seq: uint64(3 + i), SentAt: at,
			Tags: []Tag{{Subscriber: 7, Filter: 1, Feedback: 60*time.Millisecond - skew}}},
			bits(1), at.Add(skew+60*time.Millisecond))
	}
	assert.InDelta(t, 120*time.Millisecond, ss.rtt, float64(time.Millisecond))
	assert.True(t, ss.entries[1].clr)

	// As another subscriber: the one-way delay grows by 30 ms, and so
	// does the round trip.
	for i := range 100 {
		at := epoch.Add(2*time.Second + time.Duration(i)*time.Millisecond)
		s.Receive(&Header{Publisher: 1, Seq: uint64(200 + i), SentAt: at,
			Tags: []Tag{{Subscriber: 8, Filter: 1}}}, bits(1), at.Add(skew+90*time.Millisecond))
	}
	assert.InDelta(t, 150*time.Millisecond, ss.rtt, float64(time.Millisecond))
	assert.False(t, ss.entries[1].clr)

	got := s.Sessions()
	require.Len(t, got, 1)
	assert.Equal(t, SessionStats{Publisher: 1, RTT: ss.rtt, Measured: true, Allowed: math.Inf(1)}, got[0], "no loss yet")
	ss.loss.closed[0], ss.loss.n, ss.loss.events, ss.loss.open = 100, 1, 1, 0
	got = s.Sessions()
	assert.InDelta(t, 0.01, got[0].LossEventRate, 1e-12)
	assert.InDelta(t, TCPRate(ss.rtt, 0.01), got[0].Allowed, 1e-9)
	assert.Equal(t, uint64(1), got[0].LossEvents)
}

// round sets up a session whose filters received counts messages in the
// last 100 ms, with loss event rate p, and runs Algorithm 1.
func round(t *testing.T, p float64, clr map[uint32]bool, counts map[uint32]int) (Feedback, bool) {
	t.Helper()
	var fs []Filter
	for id := range counts {
		fs = append(fs, Filter{ID: id, Bloom: bits(int(id))})
	}
	s := newSub(t, fs...)
	ss := s.session(1, epoch)
	ss.rtt, ss.measured = 100*time.Millisecond, true
	if p > 0 {
		ss.loss.closed[0], ss.loss.n = 1/p, 1
	}
	for id, n := range counts {
		ss.entries[id] = &entry{count: n, clr: clr[id]}
		ss.distinct += n
	}
	return s.round(ss, epoch.Add(100*time.Millisecond))
}

// TestAlgorithm1 checks Malekpour11 Algorithm 1's decisions.
func TestAlgorithm1(t *testing.T) {
	quotas := func(fb Feedback) map[uint32]float64 {
		m := map[uint32]float64{}
		for _, r := range fb.Requests {
			m[r.Filter] = r.Quota
		}
		return m
	}
	// p = 0.01 at 100 ms allows 112.3 msg/s; the filters get 20, 50 and
	// 100 (1700 msg/s): max-min gives 20 to the first and splits the rest.
	fb, ok := round(t, 0.01, nil, map[uint32]int{1: 2, 2: 5, 3: 10})
	require.True(t, ok)
	q := quotas(fb)
	assert.NotContains(t, q, uint32(1), "its quota is what it gets: nothing to ask (line 32)")
	assert.InDelta(t, 46.17, q[2], 0.01)
	assert.InDelta(t, 46.17, q[3], 0.01)

	// Below the allowed rate, a non-limiting subscriber has nothing to say.
	_, ok = round(t, 0.01, nil, map[uint32]int{1: 2})
	assert.False(t, ok)

	// A limiting subscriber grows by at most α of its rate, the unused
	// rate shared among its limited filters.
	fb, ok = round(t, 0, map[uint32]bool{1: true}, map[uint32]int{1: 4, 2: 1})
	require.True(t, ok)
	assert.Equal(t, map[uint32]float64{1: 60}, quotas(fb), "40 msg/s + α·40")
	fb, ok = round(t, 0.01, map[uint32]bool{1: true, 2: true}, map[uint32]int{1: 10, 2: 0})
	require.True(t, ok)
	q = quotas(fb)
	assert.InDelta(t, 106.17, q[1], 0.01, "100 + (112.3−100)/2, less than α·100")
	assert.InDelta(t, 1, q[2], 0.01, "a throttled filter grows from MinRate")

	// A round that received nothing after one that received 40 msg/s (the
	// path held messages up): the quota starts from the greater of the two
	// rounds' rates (RFC 5348 §4.3), not from nothing.
	s := newSub(t, Filter{ID: 1, Bloom: bits(1)})
	ss := s.session(1, epoch)
	ss.rtt, ss.measured = 100*time.Millisecond, true
	ss.entries[1] = &entry{count: 4, clr: true}
	_, ok = s.round(ss, epoch.Add(100*time.Millisecond))
	require.True(t, ok)
	fb, ok = s.round(ss, epoch.Add(200*time.Millisecond))
	require.True(t, ok)
	assert.Equal(t, map[uint32]float64{1: 60}, quotas(fb), "40 msg/s + α·40, though the round received none")
	fb, ok = s.round(ss, epoch.Add(300*time.Millisecond))
	require.True(t, ok)
	assert.Equal(t, map[uint32]float64{1: 1}, quotas(fb), "two empty rounds: MinRate")
}

func TestMaxMin(t *testing.T) {
	for _, c := range []struct {
		capacity float64
		demand   []float64
		want     []float64
	}{
		{100, []float64{10, 20, 30}, []float64{10, 20, 30}},
		{30, []float64{10, 20, 30}, []float64{10, 10, 10}},
		{45, []float64{30, 10, 20}, []float64{17.5, 10, 17.5}},
		{0, []float64{5}, []float64{0}},
		{10, nil, []float64{}},
	} {
		assert.Equal(t, c.want, MaxMin(c.capacity, c.demand), "%v of %v", c.capacity, c.demand)
	}
}

// TestSessionsAreBounded: sessions are evicted, least recently heard
// first, beyond MaxSessions, and forgotten after SessionTimeout.
func TestSessionsAreBounded(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MaxSessions = 3
	s, err := NewSubscriber(7, cfg)
	require.NoError(t, err)
	s.SetFilters([]Filter{{ID: 1, Bloom: bits(1)}})
	for pub := range uint64(5) {
		s.Receive(&Header{Publisher: pub, Seq: 1}, bits(1), epoch.Add(time.Duration(pub)*time.Second))
	}
	assert.Len(t, s.sessions, 3)
	assert.Nil(t, s.sessions[0])
	assert.NotNil(t, s.sessions[4])
	assert.Equal(t, uint64(2), s.Stats().Evicted)
	s.Tick(epoch.Add(4*time.Second + cfg.SessionTimeout))
	assert.Empty(t, s.sessions)
	_, ok := s.NextTick()
	assert.False(t, ok)
}

// TestUnaskedPublisher: a header that only names its publisher opens the
// session, so that the subscriber asks it for an echo, and measures
// nothing.
func TestUnaskedPublisher(t *testing.T) {
	s := newSub(t, Filter{ID: 1, Bloom: bits(1)})
	s.Receive(&Header{Publisher: 3}, bits(1), epoch)
	s.Receive(&Header{Publisher: 3}, bits(1), epoch.Add(time.Millisecond))
	ss := s.sessions[3]
	require.NotNil(t, ss)
	assert.Zero(t, ss.last)
	assert.Empty(t, ss.entries, "no flow is measured before the publisher sends records")
	_, echoes := s.Tick(epoch.Add(time.Millisecond))
	require.Len(t, echoes, 1)
	assert.Equal(t, uint64(3), echoes[0].Publisher)
}
