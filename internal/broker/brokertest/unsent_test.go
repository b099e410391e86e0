package brokertest

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dripmesh/drip/internal/broker"
)

// TestBundlesQueuedOnAnEndedLinkGoAround stalls the first link on the
// path from router 0 to router 3 of a ring of six at 0's end, so that what
// 0 routes over it waits in the link's queue, then ends the connection: the
// link's end closes with those bundles unsent. Taken back and decided
// again on the routes around the link (node's resendUnsent), they arrive;
// dropped with the link, as they once were, their deliveries were lost
// though the ring had another way (the e2e rolling restart lost 1–3 of
// 160,090 deliveries with a link_down drop counted and no other).
func TestBundlesQueuedOnAnEndedLinkGoAround(t *testing.T) {
	for _, seed := range []int64{1, 2, 3} {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			s, next := ringOfSix(t, seed, 5*time.Millisecond, nil)
			stallAt := s.Now()
			s.Stall(0, next)
			s.RunUntil(stallAt + 100*time.Millisecond)
			s.Cut(0, next)
			s.RunUntil(stallAt + 2*time.Second)
			s.Heal(0, next)
			s.RunUntil(stallAt + 4*time.Second)
			require.Empty(t, s.Errors())

			resent := s.CountersOf(0, "drip_bundles_unsent_resent_total", "")[""]
			assert.Positive(t, resent, "no bundle was queued when the link ended: the test shows nothing")
			assert.Zero(t, s.CountersOf(0, "drip_link_dropped_bundles_total", "reason")["link_down"])
			missed, expected := 0, 0
			for sub := range 8 {
				m, e := missing(s, sub, stallAt-time.Second, stallAt+3*time.Second)
				missed += m
				expected += e
			}
			t.Logf("%v bundles sent again around the ended link; %d of %d deliveries missed", resent, missed, expected)
			require.Positive(t, expected)
			assert.Zero(t, missed)
			for sub := range 8 {
				assert.Zero(t, s.Ledger().subs[sub].streamDuplicates, "subscriber %d got a copy twice", sub)
			}
		})
	}
}

// TestMarksReachTheDeliveries stalls the first link on the path from
// router 0 to router 3 of a ring of six for 50 ms, with brokers that mark
// what they queue on a link holding any bytes at all: the bundles 0 queued
// behind the first are marked, carried on through the transit broker, and
// delivered marked (Published.congestion_experienced), which is what
// subscriptions with congestion control take as a loss event. Without the
// stall, or without marking, no delivery is marked.
func TestMarksReachTheDeliveries(t *testing.T) {
	run := func(markBytes int, stall bool) (marked, delivered int, counted float64) {
		s, next := ringOfSix(t, 1, 5*time.Millisecond, func(o *Options) {
			o.Config = func(c *broker.Config) { c.LinkMarkBytes = markBytes }
		})
		if stall {
			s.Stall(0, next)
			s.RunUntil(s.Now() + 50*time.Millisecond)
			s.Unstall(0, next)
		}
		s.RunUntil(s.Now() + time.Second)
		require.Empty(t, s.Errors())
		for sub := range 8 {
			marked += s.Ledger().Marked(sub)
			delivered += len(s.Ledger().Received(sub))
		}
		return marked, delivered, s.CountersOf(0, "drip_bundles_marked_total", "")[""]
	}
	marked, delivered, counted := run(1, true)
	t.Logf("stalled, marking: %d of %d deliveries marked; broker 0 marked %v bundles", marked, delivered, counted)
	assert.Positive(t, marked)
	assert.Positive(t, counted)
	marked, _, counted = run(1, false)
	assert.Zero(t, marked, "nothing queued, nothing marked")
	assert.Zero(t, counted)
	marked, _, _ = run(0, true)
	assert.Zero(t, marked, "marking off")
}
