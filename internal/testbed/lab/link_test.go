package lab

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const ms = time.Millisecond

// A saturated link serialises back-to-back packets at exactly its rate,
// then adds the one-way delay (Carzaniga09 §5.2.1: 1 MB/s links).
func TestLinkRateAndDelay(t *testing.T) {
	l := NewLink(Params{Bandwidth: 1e6, Delay: 20 * ms, QueueBytes: 1 << 30}, 1)
	for i := range 1000 {
		at, drop := l.Offer(1000, 0)
		require.Equal(t, DropNone, drop)
		require.Equal(t, time.Duration(i+1)*ms+20*ms, at, "packet %d", i)
	}
	c := l.Counters()
	assert.Equal(t, LinkCounters{Packets: 1000, Bytes: 1e6}, c)
	assert.Equal(t, 999_000, l.Backlog(ms), "everything but the first packet still queued after 1 ms")
	assert.Equal(t, 0, l.Backlog(time.Second))

	// An idle link only adds the serialisation of the packet itself.
	at, _ := l.Offer(500, 2*time.Second)
	assert.Equal(t, 2*time.Second+500*time.Microsecond+20*ms, at)

	// Unlimited bandwidth: delay only, no queue.
	u := NewLink(Params{Delay: 5 * ms}, 1)
	for range 100 {
		at, drop := u.Offer(1500, 7*ms)
		require.Equal(t, DropNone, drop)
		require.Equal(t, 12*ms, at)
	}
	assert.Zero(t, u.Backlog(7*ms))
}

func TestLinkQueueOverflow(t *testing.T) {
	l := NewLink(Params{Bandwidth: 1e6, QueueBytes: 10_000}, 1)
	accepted := 0
	for range 20 {
		if _, drop := l.Offer(1000, 0); drop == DropNone {
			accepted++
		} else {
			require.Equal(t, DropQueue, drop)
		}
	}
	// The k-th packet finds k·1000 bytes ahead of it; it fits while
	// k·1000 + 1000 ≤ 10 000.
	assert.Equal(t, 10, accepted)
	assert.Equal(t, uint64(10), l.Counters().Queue)

	// After 5 ms, five packets have left and five fit again.
	accepted = 0
	for range 10 {
		if _, drop := l.Offer(1000, 5*ms); drop == DropNone {
			accepted++
		}
	}
	assert.Equal(t, 5, accepted)

	// A packet larger than the queue still crosses an idle link.
	big := NewLink(Params{Bandwidth: 1e6, QueueBytes: 100}, 1)
	_, drop := big.Offer(9000, 0)
	assert.Equal(t, DropNone, drop)
	_, drop = big.Offer(1, 0)
	assert.Equal(t, DropQueue, drop)
}

func TestLinkLoss(t *testing.T) {
	const n = 100_000
	count := func(seed uint64) int {
		l := NewLink(Params{Loss: 0.05}, seed)
		lost := 0
		for i := range n {
			if _, drop := l.Offer(100, time.Duration(i)); drop == DropLoss {
				lost++
			}
		}
		require.Equal(t, uint64(lost), l.Counters().Loss)
		require.Equal(t, uint64(n-lost), l.Counters().Packets)
		return lost
	}
	lost := count(7)
	// Binomial(1e5, 0.05) has a standard deviation of 69 packets.
	assert.InDelta(t, 0.05, float64(lost)/n, 0.003)
	assert.Equal(t, lost, count(7), "same seed, same losses")
	assert.NotEqual(t, lost, count(8), "another seed draws other losses")

	none := NewLink(Params{Loss: 0}, 1)
	all := NewLink(Params{Loss: 1}, 1)
	for i := range 1000 {
		_, d := none.Offer(1, time.Duration(i))
		require.Equal(t, DropNone, d)
		_, d = all.Offer(1, time.Duration(i))
		require.Equal(t, DropLoss, d)
	}
}

func TestLinkJitter(t *testing.T) {
	// Sparse packets: each delay is uniform in [Delay−Jitter, Delay+Jitter].
	l := NewLink(Params{Delay: 20 * ms, Jitter: 5 * ms}, 3)
	var lo, hi, sum time.Duration = time.Hour, 0, 0
	const n = 10_000
	for i := range n {
		now := time.Duration(i) * 100 * ms
		at, _ := l.Offer(100, now)
		d := at - now
		lo, hi, sum = min(lo, d), max(hi, d), sum+d
	}
	assert.GreaterOrEqual(t, lo, 15*ms)
	assert.LessOrEqual(t, hi, 25*ms)
	assert.Less(t, lo, 15*ms+100*time.Microsecond, "the range is used")
	assert.Greater(t, hi, 25*ms-100*time.Microsecond, "the range is used")
	assert.InDelta(t, float64(20*ms), float64(sum/n), float64(100*time.Microsecond), "mean delay")

	// Dense packets stay in order: an arrival never precedes the previous.
	dense := NewLink(Params{Delay: 20 * ms, Jitter: 10 * ms}, 3)
	var last time.Duration
	for i := range n {
		now := time.Duration(i) * 100 * time.Microsecond
		at, _ := dense.Offer(100, now)
		require.GreaterOrEqual(t, at, last, "packet %d", i)
		require.GreaterOrEqual(t, at, now+10*ms, "packet %d: at least Delay−Jitter", i)
		last = at
	}

	// Jitter larger than the delay never makes a packet arrive early.
	wide := NewLink(Params{Delay: 1 * ms, Jitter: 10 * ms}, 3)
	for i := range 1000 {
		now := time.Duration(i) * time.Second
		at, _ := wide.Offer(100, now)
		require.GreaterOrEqual(t, at, now)
	}
}

func TestLinkCutHeal(t *testing.T) {
	l := NewLink(Params{Bandwidth: 1e6, Delay: ms, QueueBytes: 1e6}, 1)
	_, drop := l.Offer(1000, 0)
	require.Equal(t, DropNone, drop)
	e := l.epoch
	l.Cut(0)
	assert.False(t, l.Up())
	assert.NotEqual(t, e, l.epoch, "a cut marks packets on the link as lost")
	_, drop = l.Offer(1000, ms)
	assert.Equal(t, DropCut, drop)
	l.Cut(5 * ms) // idempotent
	l.Heal()
	assert.True(t, l.Up())
	at, drop := l.Offer(1000, 10*ms)
	assert.Equal(t, DropNone, drop)
	assert.Equal(t, 12*ms, at, "a healed link starts idle")
	assert.Equal(t, uint64(1), l.Counters().Cut)
}

// refLink is a plain FIFO queue simulation: it keeps every accepted
// packet's transmission interval and computes the backlog from them.
type refLink struct {
	rate  float64
	limit int
	delay time.Duration
	txs   []struct{ start, end time.Duration }
}

func (r *refLink) offer(size int, now time.Duration) (time.Duration, bool) {
	backlog, free := 0.0, now
	for _, tx := range r.txs {
		if tx.end > now {
			backlog += float64(tx.end-max(tx.start, now)) * r.rate / float64(time.Second)
			free = max(free, tx.end)
		}
	}
	if free > now && int(backlog)+size > r.limit {
		return 0, false
	}
	end := free + time.Duration(float64(size)*float64(time.Second)/r.rate)
	r.txs = append(r.txs, struct{ start, end time.Duration }{free, end})
	return end + r.delay, true
}

// The virtual-clock link agrees with an explicit FIFO queue on random
// traffic.
func TestLinkMatchesReference(t *testing.T) {
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 0))
		p := Params{Bandwidth: float64(100_000 + rng.IntN(2_000_000)), Delay: time.Duration(rng.IntN(50)) * ms, QueueBytes: 1500 + rng.IntN(50_000)}
		l := NewLink(p, seed)
		ref := &refLink{rate: p.Bandwidth, limit: p.QueueBytes, delay: p.Delay}
		var now time.Duration
		for i := range 2000 {
			now += time.Duration(rng.ExpFloat64() * float64(ms))
			size := 40 + rng.IntN(1460)
			at, drop := l.Offer(size, now)
			want, ok := ref.offer(size, now)
			require.Equal(t, ok, drop == DropNone, "seed %d packet %d", seed, i)
			if ok {
				require.InDelta(t, float64(want), float64(at), 1000, "seed %d packet %d", seed, i)
			}
		}
	}
}

func TestDropString(t *testing.T) {
	for d, s := range map[Drop]string{DropNone: "none", DropLoss: "loss", DropQueue: "queue", DropCut: "cut", DropNoRoute: "no_route", 99: "unknown"} {
		assert.Equal(t, s, d.String())
	}
}

func TestLinkSent(t *testing.T) {
	l := NewLink(Params{Bandwidth: 1e6, QueueBytes: 1e6}, 1)
	for range 10 {
		l.Offer(1000, 0)
	}
	assert.Equal(t, uint64(0), l.Sent(0))
	assert.Equal(t, uint64(2000), l.Sent(2*ms))

	// At 2 ms the rate doubles: the 8000 queued bytes drain in 4 ms, and
	// a packet offered at 3 ms is serialised after them, from 6 to 6.5 ms.
	// It still arrives after the packets already scheduled at the old
	// rate (the last at 10 ms), since the link never reorders.
	l.SetParams(Params{Bandwidth: 2e6, QueueBytes: 1e6}, 2*ms)
	assert.Equal(t, 8000, l.Backlog(2*ms))
	at, _ := l.Offer(1000, 3*ms)
	assert.Equal(t, 10*ms, at)
	assert.Equal(t, 5000, l.Backlog(4*ms))
	assert.Equal(t, uint64(6000), l.Sent(4*ms))

	// A cut flushes the queue: those bytes are never sent.
	l.Cut(5 * ms)
	sent := l.Sent(5 * ms)
	assert.Equal(t, uint64(8000), sent)
	assert.Equal(t, sent, l.Sent(time.Second), "nothing is sent after the cut")
	assert.Equal(t, uint64(11_000), l.Counters().Bytes, "accepted bytes stay counted")

	// Unlimited rate sends the queue at once.
	u := NewLink(Params{Bandwidth: 1e6, QueueBytes: 1e6}, 1)
	u.Offer(5000, 0)
	u.SetParams(Params{}, ms)
	assert.Equal(t, uint64(5000), u.Sent(ms))
}

// Sent never decreases and never runs faster than the link, whatever
// happens to the link (it is exported as a counter).
func TestLinkSentProperty(t *testing.T) {
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 1))
		p := Params{Bandwidth: float64(1000 + rng.IntN(3_000_000)), QueueBytes: 1500 + rng.IntN(100_000)}
		l := NewLink(p, seed)
		var now time.Duration
		last := uint64(0)
		for i := range 5000 {
			dt := time.Duration(rng.ExpFloat64() * float64(500*time.Microsecond))
			now += dt
			before := l.Sent(now)
			require.GreaterOrEqual(t, before, last, "seed %d step %d", seed, i)
			if p.Bandwidth > 0 {
				require.LessOrEqual(t, float64(before-last), p.Bandwidth*dt.Seconds()+1, "seed %d step %d: faster than the link", seed, i)
			}
			switch r := rng.IntN(100); {
			case r < 2:
				p.Bandwidth = float64(rng.IntN(3_000_000))
				l.SetParams(p, now)
			case r < 3:
				l.Cut(now)
			case r < 5:
				l.Heal()
			default:
				l.Offer(1+rng.IntN(1500), now)
			}
			last = l.Sent(now)
			require.GreaterOrEqual(t, last, before, "seed %d step %d", seed, i)
			require.LessOrEqual(t, last, l.Counters().Bytes)
		}
	}
}
