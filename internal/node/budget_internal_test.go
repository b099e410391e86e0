package node

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dripmesh/drip/internal/content"
	"github.com/dripmesh/drip/internal/encoding"
	"github.com/dripmesh/drip/internal/qos"
	"github.com/dripmesh/drip/internal/wire"
	testingclock "k8s.io/utils/clock/testing"
)

// budgetFixture is a subscriptions table under a budget, with no broker
// around it: deliveries are offered and taken by hand.
func budgetFixture(t *testing.T, limit int64, queue int) (*subscriptionTable, *Budget, *metrics) {
	t.Helper()
	b := &Budget{limit: limit}
	m := newMetrics(nil, "t", b)
	s := newSubscriptions(subscriptionsConfig{
		max: 1000, queue: queue, queueBytes: 1 << 30, enc: encoding.DefaultParams(),
		clock: testingclock.NewFakeClock(time.Unix(1, 0)), budget: b,
	}, m, func() {})
	return s, b, m
}

func addSub(t *testing.T, s *subscriptionTable) *Subscription {
	t.Helper()
	sub, err := s.add(content.MustParse(`a exists`), qos.Flow{}, "c")
	require.NoError(t, err)
	return sub
}

// delivery is a delivery of size bytes (with the queue's overhead) whose
// first bytes name it.
func delivery(id uint64, size int) Queued {
	b := make([]byte, size-queuedOverhead)
	binary.BigEndian.PutUint64(b, id)
	p := wire.NewPublished(b, wire.PublishedHeader{})
	return Queued{&p}
}

// refSub is the reference model of one subscriber's queue.
type refSub struct {
	ids   []uint64
	sizes []int64
	lost  uint64
}

func (r *refSub) bytes() int64 {
	var n int64
	for _, s := range r.sizes {
		n += s
	}
	return n
}

// TestBudgetAgainstReference drives random offers, dequeues, closes and
// link traffic against a simple reference: FIFO queues per subscriber.
// After every step the budget holds exactly the bytes the reference holds,
// the subscriber queues never more than the limit, and after an offer
// the whole (links included) is within the limit unless the links alone
// exceed it; every loss is the offered delivery or the oldest deliveries
// of a subscriber that held the most; each delivery taken is the
// reference's head.
func TestBudgetAgainstReference(t *testing.T) {
	const (
		limit   = 16 << 10
		maxSize = 2 << 10
		queue   = 10 // messages: some drops are the subscriber's own bound
	)
	for seed := range uint64(200) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 17))
			s, b, m := budgetFixture(t, limit, queue)
			var subs []*Subscription
			ref := map[*Subscription]*refSub{}
			var linkBytes int64
			var nextID uint64
			check := func(step int, what string) {
				var sum int64
				for sub, r := range ref {
					require.Equal(t, r.bytes(), sub.bytes.Load(), "step %d (%s): subscription %d's bytes", step, what, sub.id)
					require.Equal(t, r.lost, sub.Lost(), "step %d (%s): subscription %d's losses", step, what, sub.id)
					sum += r.bytes()
				}
				require.Equal(t, sum+linkBytes, b.Used(), "step %d (%s): accounted bytes", step, what)
				require.LessOrEqual(t, sum, int64(limit), "step %d (%s): subscriber queues over the budget", step, what)
				if what == "offer" && sum > 0 {
					// Links are not shed, but subscribers make room for them.
					require.LessOrEqual(t, b.Used(), int64(limit), "step %d (%s): over the budget", step, what)
				}
			}
			for step := range 300 {
				switch op := rng.IntN(10); {
				case op == 0 || len(subs) == 0:
					sub := addSub(t, s)
					subs = append(subs, sub)
					ref[sub] = &refSub{}
					check(step, "add")
				case op <= 5:
					sub := subs[rng.IntN(len(subs))]
					size := queuedOverhead + 8 + rng.IntN(maxSize-queuedOverhead-8)
					nextID++
					before := map[*Subscription]uint64{}
					held := map[*Subscription]int64{}
					for o, r := range ref {
						before[o] = o.Lost()
						held[o] = r.bytes()
					}
					dropped := testutil.ToFloat64(m.subscriberDropped)
					sub.offer(delivery(nextID, size))
					shedFrom := map[*Subscription]bool{}
					for o, r := range ref {
						k := o.Lost() - before[o]
						if o == sub {
							// Its oldest may be shed, then the new one is
							// queued; or the new one is lost: to its own
							// full queue, or to a budget held by links.
							full := testutil.ToFloat64(m.subscriberDropped) > dropped
							if !full && (k == 0 || len(r.ids) > 0) {
								if k > 0 {
									shedFrom[o] = true
									r.ids, r.sizes, r.lost = r.ids[k:], r.sizes[k:], r.lost+k
								}
								r.ids, r.sizes = append(r.ids, nextID), append(r.sizes, int64(size))
							} else {
								require.Equal(t, uint64(1), k, "step %d: the offered delivery is lost once", step)
								r.lost++
							}
							continue
						}
						if k > 0 {
							shedFrom[o] = true
							require.LessOrEqual(t, k, uint64(len(r.ids)), "step %d: shed more than it held", step)
							r.ids, r.sizes, r.lost = r.ids[k:], r.sizes[k:], r.lost+k
						}
					}
					// Only subscribers that held the most are shed: none
					// left unshed held more, the offerer included.
					for o := range shedFrom {
						for p, n := range held {
							if !shedFrom[p] {
								require.GreaterOrEqual(t, held[o], n, "step %d: shed a subscriber holding %d while one held %d", step, held[o], n)
							}
						}
					}
					check(step, "offer")
				case op <= 7:
					sub := subs[rng.IntN(len(subs))]
					r := ref[sub]
					if len(r.ids) == 0 {
						continue
					}
					q, ok := sub.Take()
					require.True(t, ok)
					sub.Dequeued(q)
					require.Equal(t, r.ids[0], binary.BigEndian.Uint64(q.Msg), "step %d: FIFO order", step)
					r.ids, r.sizes = r.ids[1:], r.sizes[1:]
					check(step, "dequeue")
				case op == 8:
					k := rng.IntN(len(subs))
					sub := subs[k]
					sub.Close()
					subs = append(subs[:k], subs[k+1:]...)
					delete(ref, sub)
					check(step, "close")
				default:
					// A link queue's bytes come and go; kept small so that
					// the subscribers' part is what the budget bounds.
					d := int64(rng.IntN(maxSize))
					if linkBytes+d > limit/4 || rng.IntN(2) == 0 {
						d = -min(d, linkBytes)
					}
					b.Account(d)
					linkBytes += d
					check(step, "link")
				}
			}
			var lost uint64
			for _, sub := range subs {
				lost += sub.Lost()
			}
			for sub := range ref {
				assert.Contains(t, subs, sub)
			}
			// Every loss is counted under one reason or the other (closed
			// subscriptions' losses are gone from lost, so ≥).
			assert.GreaterOrEqual(t, testutil.ToFloat64(m.budgetShed)+testutil.ToFloat64(m.subscriberDropped), float64(lost))
		})
	}
}

// TestBudgetShedsTheSlowSubscriber: one subscriber that never reads and
// three that read everything share a budget far smaller than what is
// published; the slow one loses its oldest deliveries to the budget, the
// fast ones lose nothing, and every delivery is accounted for.
func TestBudgetShedsTheSlowSubscriber(t *testing.T) {
	const limit, size, total = 64 << 10, 1 << 10, 2000
	s, b, m := budgetFixture(t, limit, 1<<20)
	slow := addSub(t, s)
	fast := []*Subscription{addSub(t, s), addSub(t, s), addSub(t, s)}
	got := make([]int, len(fast))
	for id := range uint64(total) {
		for _, sub := range append([]*Subscription{slow}, fast...) {
			sub.offer(delivery(id, size))
		}
		require.LessOrEqual(t, b.Used(), int64(limit+size))
		if id%10 == 9 {
			for k, sub := range fast {
				for q, ok := sub.Take(); ok; q, ok = sub.Take() {
					sub.Dequeued(q)
					got[k]++
				}
			}
		}
	}
	for k, sub := range fast {
		assert.Equal(t, total, got[k], "fast subscriber %d received everything", k)
		assert.Zero(t, sub.Lost(), "fast subscriber %d lost nothing", k)
	}
	held := slow.Queued()
	assert.Positive(t, slow.Lost())
	assert.Equal(t, uint64(total), slow.Lost()+uint64(held), "every delivery to the slow subscriber is queued or lost")
	assert.Equal(t, float64(slow.Lost()), testutil.ToFloat64(m.budgetShed))
	assert.Zero(t, testutil.ToFloat64(m.subscriberDropped))
	// What it still holds is the newest: the oldest were shed.
	q, ok := slow.Take()
	require.True(t, ok)
	assert.Equal(t, uint64(total-held), binary.BigEndian.Uint64(q.Msg))
	slow.Dequeued(q)

	// Closing the subscriptions gives their bytes back.
	for _, sub := range append([]*Subscription{slow}, fast...) {
		sub.Close()
	}
	assert.Zero(t, b.Used())
}

// TestBudgetOffWhenZero: a zero budget sheds nothing.
func TestBudgetOffWhenZero(t *testing.T) {
	s, b, m := budgetFixture(t, 0, 1<<20)
	sub := addSub(t, s)
	for id := range uint64(1000) {
		sub.offer(delivery(id, 1<<10))
	}
	assert.Equal(t, 1000, sub.Queued())
	assert.Equal(t, int64(1000<<10), b.Used())
	assert.Zero(t, testutil.ToFloat64(m.budgetShed))
}

// TestOfferToAClosedSubscription: a delivery matched just before its
// subscriber left neither waits for room nor stays in the budget.
func TestOfferToAClosedSubscription(t *testing.T) {
	s, b, m := budgetFixture(t, 1<<20, 16)
	s.cfg.slow = SlowSubscribers{Stalled: time.Second, Behind: time.Hour}
	sub := addSub(t, s)
	sub.Attach() // a sender was serving it: a full queue would make the publisher wait
	sub.Close()
	done := make(chan struct{})
	go func() {
		sub.offer(delivery(1, queuedOverhead+8))
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("offer to a closed subscription waits for room")
	}
	assert.Zero(t, b.Used())
	assert.Zero(t, testutil.ToFloat64(m.delivered))
}

// TestBudgetHoldsStreams: open streams count against the budget up to
// three quarters of it, beyond which they are refused; each release gives
// its bytes back, and a zero budget counts but refuses nothing.
func TestBudgetHoldsStreams(t *testing.T) {
	for _, tc := range []struct {
		name  string
		limit int64
		fits  int // streams of 10 bytes held before the first refusal (-1: none)
	}{
		{"no budget", 0, -1},
		{"three quarters", 100, 7}, // 70 ≤ 75 < 80
		{"exactly three quarters", 400, 30},
		{"not even one", 12, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := &Budget{limit: tc.limit}
			var releases []func()
			for range 50 {
				release, ok := b.HoldStream(10)
				if !ok {
					break
				}
				releases = append(releases, release)
			}
			if tc.fits < 0 {
				assert.Len(t, releases, 50)
			} else {
				assert.Len(t, releases, tc.fits)
			}
			assert.Equal(t, int64(10*len(releases)), b.Streams())
			assert.Equal(t, b.Streams(), b.Used(), "streams are part of what is used")
			if len(releases) > 0 {
				releases[0]()
				var ok bool
				releases[0], ok = b.HoldStream(10)
				require.True(t, ok, "a released stream makes room for the next")
			}
			for _, r := range releases {
				r()
			}
			assert.Zero(t, b.Used())
			assert.Zero(t, b.Streams())
		})
	}
}
