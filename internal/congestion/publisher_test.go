package congestion

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/dripmesh/drip/internal/encoding"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func newPub(t *testing.T, edit func(*Config)) *Publisher {
	t.Helper()
	cfg := DefaultConfig()
	if edit != nil {
		edit(&cfg)
	}
	p, err := NewPublisher(1, cfg)
	require.NoError(t, err)
	return p
}

// limit asks, as subscriber sub, that filter f's flow go at quota.
func limit(t *testing.T, p *Publisher, sub uint64, f encoding.Bloom, quota float64, now time.Time) {
	t.Helper()
	require.NoError(t, p.Feedback(Feedback{Publisher: 1, Subscriber: sub, SentAt: now, Requests: []Request{{Filter: 1, Bloom: f, Quota: quota}}}, now))
}

// TestHeaderRecord: sequence numbers count from 1 and the record lists the
// last k messages sent, oldest first (Malekpour11 Fig. 2), across the
// runs of the publisher's history.
func TestHeaderRecord(t *testing.T) {
	p := newPub(t, func(c *Config) { c.RecordSize = 3 })
	var hs []Header
	for i := range 2*histRun + 5 {
		v, h := p.Offer(uint64(i), bits(i%encoding.MaxBits), epoch)
		require.Equal(t, Send, v)
		hs = append(hs, h)
	}
	assert.Empty(t, hs[0].Record)
	assert.Equal(t, []encoding.Bloom{bits(0)}, hs[1].Record)
	assert.Equal(t, []encoding.Bloom{bits(1), bits(2), bits(3)}, hs[4].Record)
	assert.Equal(t, uint64(5), hs[4].Seq)
	assert.False(t, hs[4].Controlled())
	for i := 3; i < len(hs); i++ {
		require.Equal(t, []encoding.Bloom{bits((i - 3) % encoding.MaxBits), bits((i - 2) % encoding.MaxBits), bits((i - 1) % encoding.MaxBits)}, hs[i].Record, "message %d", i)
	}
}

// TestTokenBucketPacesAFlow: a flow limited to 10 msg/s sends 10 a second,
// in order, and holds the rest (Malekpour11 §III-B-8).
func TestTokenBucketPacesAFlow(t *testing.T) {
	p := newPub(t, nil)
	limit(t, p, 7, bits(1), 10, epoch)
	var sent []uint64
	for i := range uint64(50) {
		v, _ := p.Offer(i, bits(1, 2), epoch)
		if v == Send {
			sent = append(sent, i)
		}
	}
	require.Equal(t, []uint64{0}, sent, "one token to start with")
	require.Equal(t, 49, p.Queued())
	now := epoch
	for now.Before(epoch.Add(time.Second)) {
		next, ok := p.NextRelease(now)
		require.True(t, ok)
		require.False(t, next.Before(now))
		now = next
		for _, r := range p.Release(now) {
			sent = append(sent, r.ID)
			require.Equal(t, []Tag{{Subscriber: 7, Filter: 1}}, r.Header.Tags)
		}
	}
	assert.InDelta(t, 11, len(sent), 1, "10 a second plus the first")
	for i := range sent {
		assert.Equal(t, uint64(i), sent[i], "in order")
	}
}

// TestUnlimitedContentIsNotSlowed is content awareness (Malekpour11
// §II-B, Fig. 1): while one flow's messages wait, messages that belong to
// no limited flow leave at once.
func TestUnlimitedContentIsNotSlowed(t *testing.T) {
	p := newPub(t, func(c *Config) { c.MaxQueue = 4 })
	limit(t, p, 7, bits(1), 1, epoch)
	for i := range uint64(5) {
		p.Offer(i, bits(1), epoch)
	}
	v, _ := p.Offer(10, bits(1), epoch)
	require.Equal(t, Full, v, "the limited flow's queue is full")
	v, h := p.Offer(11, bits(3), epoch)
	require.Equal(t, Send, v)
	assert.False(t, h.Controlled())
}

// TestMessageOfTwoFlowsWaitsForBoth: a message that belongs to two limited
// flows takes a token from each and leaves only when both have one.
func TestMessageOfTwoFlowsWaitsForBoth(t *testing.T) {
	p := newPub(t, nil)
	limit(t, p, 7, bits(1), 1, epoch)
	limit(t, p, 8, bits(2), 100, epoch)
	v, h := p.Offer(0, bits(1, 2), epoch)
	require.Equal(t, Send, v)
	assert.Len(t, h.Tags, 2)
	assert.Equal(t, uint64(7), h.Tags[0].Subscriber, "least quota first")
	v, _ = p.Offer(1, bits(1, 2), epoch)
	require.Equal(t, Held, v)
	v, _ = p.Offer(2, bits(2), epoch.Add(10*time.Millisecond))
	require.Equal(t, Held, v, "flow 2 has tokens, but message 1 of flow 2 waits")
	v, _ = p.Offer(3, bits(3), epoch.Add(10*time.Millisecond))
	require.Equal(t, Send, v, "no flow limits it")
	assert.Empty(t, p.Release(epoch.Add(500*time.Millisecond)))
	next, ok := p.NextRelease(epoch.Add(500 * time.Millisecond))
	require.True(t, ok)
	assert.Equal(t, epoch.Add(time.Second), next, "flow 1's next token, not flow 2's tokens that wait behind it")
	out := p.Release(epoch.Add(time.Second))
	require.Len(t, out, 2)
	assert.Equal(t, []uint64{1, 2}, []uint64{out[0].ID, out[1].ID})
}

// TestExpiredFlowReleasesItsMessages: a request not refreshed within
// FlowTimeout is forgotten (Malekpour11 §III-B-6) and what it held leaves.
func TestExpiredFlowReleasesItsMessages(t *testing.T) {
	p := newPub(t, nil)
	limit(t, p, 7, bits(1), 1, epoch)
	p.Offer(0, bits(1), epoch)
	p.Offer(1, bits(1), epoch)
	p.Offer(2, bits(1), epoch)
	next, ok := p.NextRelease(epoch)
	require.True(t, ok)
	assert.Equal(t, epoch.Add(time.Second), next)
	late := epoch.Add(p.cfg.FlowTimeout + time.Millisecond)
	out := p.Release(late)
	require.Len(t, out, 2)
	assert.False(t, out[1].Header.Controlled())
	assert.Empty(t, p.Flows(late))
}

// TestFeedbackIsChecked: what a subscriber sends cannot break the table.
func TestFeedbackIsChecked(t *testing.T) {
	p := newPub(t, func(c *Config) { c.MaxRequests = 2 })
	err := p.Feedback(Feedback{Subscriber: 9, SentAt: epoch, Requests: []Request{
		{Filter: 1, Bloom: bits(1), Quota: math.NaN()},
		{Filter: 2, Bloom: bits(1), Quota: -1},
		{Filter: 3, Bloom: bits(1), Quota: 0},
		{Filter: 4, Bloom: bits(2), Quota: 50},
		{Filter: 5, Bloom: bits(3), Quota: 50},
	}}, epoch)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "subscriber 9: 3 of 5 requests refused")
	assert.Contains(t, err.Error(), "filter 1: quota NaN is not a rate")
	assert.Contains(t, err.Error(), "filter 5: table holds 2 requests already")
	fs := p.Flows(epoch)
	require.Len(t, fs, 2)
	assert.Equal(t, 1.0, fs[0].Quota, "a quota of 0 is taken as MinRate")
	assert.Equal(t, uint64(1), p.Stats().Raised)
	// An infinite quota withdraws the request.
	require.NoError(t, p.Feedback(Feedback{Subscriber: 9, SentAt: epoch, Requests: []Request{{Filter: 3, Quota: math.Inf(1)}}}, epoch))
	assert.Len(t, p.Flows(epoch), 1)
	p.Forget(9)
	assert.Empty(t, p.Flows(epoch))
	assert.Equal(t, uint64(4), p.Stats().CLRChanges, "two flows came and went")
}

// TestFeedbackDelayRidesOnTags: δ_feedback is the publisher's clock at
// arrival minus the subscriber's at sending (Malekpour11 §III-B-4).
func TestFeedbackDelayRidesOnTags(t *testing.T) {
	p := newPub(t, nil)
	sentAt := epoch.Add(-5 * time.Second) // the subscriber's clock is behind
	require.NoError(t, p.Feedback(Feedback{Subscriber: 7, SentAt: sentAt, Requests: []Request{{Filter: 1, Bloom: bits(1), Quota: 10}}}, epoch))
	_, h := p.Offer(0, bits(1), epoch)
	require.Len(t, h.Tags, 1)
	assert.Equal(t, 5*time.Second, h.Tags[0].Feedback)
}

// TestEchoRidesOnMatchingMessages: an echo is answered on the messages
// that match the subscriber, with the time the publisher held it, until
// EchoTimeout.
func TestEchoRidesOnMatchingMessages(t *testing.T) {
	p := newPub(t, nil)
	require.Error(t, p.Echo(Echo{Subscriber: 7, SentAt: epoch}, epoch), "an echo without filters matches nothing")
	require.NoError(t, p.Echo(Echo{Subscriber: 7, SentAt: epoch, Filters: []encoding.Bloom{bits(1)}}, epoch))
	_, h := p.Offer(0, bits(2), epoch.Add(time.Millisecond))
	assert.Empty(t, h.Echoes)
	_, h = p.Offer(1, bits(1, 2), epoch.Add(3*time.Millisecond))
	assert.Equal(t, []EchoReply{{Subscriber: 7, SentAt: epoch, Held: 3 * time.Millisecond}}, h.Echoes)
	_, h = p.Offer(2, bits(1), epoch.Add(p.cfg.EchoTimeout))
	assert.Empty(t, h.Echoes, "expired")
}

func TestConfigValidate(t *testing.T) {
	for name, edit := range map[string]func(*Config){
		"RecordSize 0 is not positive":        func(c *Config) { c.RecordSize = 0 },
		"RecordSize 257 is above 256":         func(c *Config) { c.RecordSize = 257 },
		"Alpha 0 is outside":                  func(c *Config) { c.Alpha = 0 },
		"MinRate NaN is not a positive rate":  func(c *Config) { c.MinRate = math.NaN() },
		"FlowTimeout 0s is not positive":      func(c *Config) { c.FlowTimeout = 0 },
		"MaxQueue -1 is not positive":         func(c *Config) { c.MaxQueue = -1 },
		"MinRate +Inf is not a positive rate": func(c *Config) { c.MinRate = math.Inf(1) },
		"ShareWindow 0 is not positive":       func(c *Config) { c.ShareWindow = 0 },
		"MaxQuotaScale 0.5 is not a factor":   func(c *Config) { c.MaxQuotaScale = 0.5 },
		"MaxQuotaScale NaN is not a factor":   func(c *Config) { c.MaxQuotaScale = math.NaN() },
	} {
		cfg := DefaultConfig()
		edit(&cfg)
		_, err := NewPublisher(1, cfg)
		require.ErrorContains(t, err, name)
		_, err = NewSubscriber(1, cfg)
		require.ErrorContains(t, err, name)
	}
	require.NoError(t, DefaultConfig().Validate())
}

// referenceRelease is Release without its shortcut: every held message is
// matched against every flow on every pass.
func referenceRelease(p *Publisher, now time.Time) []Released {
	if len(p.held) == 0 {
		return nil
	}
	p.expire(now)
	p.pass++
	var out []Released
	kept := p.held[:0]
	for _, h := range p.held {
		flows := p.flows.match(nil, h.bloom)
		ready := true
		for _, r := range flows {
			r.refill(now, p.cfg.BucketDepth)
			if r.pass == p.pass || r.tokens < 1 {
				ready = false
			}
		}
		if !ready {
			for _, r := range flows {
				r.pass = p.pass
			}
			kept = append(kept, h)
			continue
		}
		for _, r := range flows {
			r.tokens--
		}
		for _, r := range h.flows {
			r.held--
		}
		p.stats.Waited += now.Sub(h.since)
		out = append(out, Released{ID: h.id, Header: p.stamp(h.bloom, flows, now)})
	}
	clear(p.held[len(kept):])
	p.held = kept
	return out
}

// TestReleaseMatchesReference drives two publishers through the same
// random feedback, offers, releases and pauses (long enough for flows to
// expire and let their messages go): Release, which stops a pass once every
// flow is blocked, must release what the reference does, in the same
// order, with the same headers, every time.
func TestReleaseMatchesReference(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MaxQueue = 64
	for seed := range uint64(50) {
		rng := rand.New(rand.NewPCG(seed, 9))
		fast, err := NewPublisher(1, cfg)
		require.NoError(t, err)
		ref, err := NewPublisher(1, cfg)
		require.NoError(t, err)
		now := epoch
		released := 0
		for i := range 600 {
			if rng.IntN(50) == 0 {
				now = now.Add(cfg.FlowTimeout) // every flow expires
			} else {
				now = now.Add(time.Duration(rng.IntN(int(20 * time.Millisecond))))
			}
			switch rng.IntN(8) {
			case 0:
				fb := Feedback{Publisher: 1, Subscriber: rng.Uint64N(4), SentAt: now}
				for range 1 + rng.IntN(3) {
					fb.Requests = append(fb.Requests, Request{Filter: rng.Uint32N(3), Bloom: subsetBloom(uint(rng.IntN(8))), Quota: 1 + 40*rng.Float64()})
				}
				require.Equal(t, ref.Feedback(fb, now), fast.Feedback(fb, now))
			case 1, 2:
				want := referenceRelease(ref, now)
				got := fast.Release(now)
				require.Equal(t, want, got, "seed %d, step %d", seed, i)
				released += len(got)
			default:
				m := subsetBloom(uint(rng.IntN(64)))
				v1, h1 := ref.Offer(uint64(i), m, now)
				v2, h2 := fast.Offer(uint64(i), m, now)
				require.Equal(t, v1, v2)
				require.Equal(t, h1, h2)
			}
			if ref.Queued() != fast.Queued() || ref.Stats() != fast.Stats() {
				require.Equal(t, ref.Stats(), fast.Stats(), "seed %d, step %d", seed, i)
				require.Equal(t, ref.Queued(), fast.Queued(), "seed %d, step %d", seed, i)
			}
		}
		require.Positive(t, released, "seed %d released nothing: the comparison saw no release", seed)
	}
}
