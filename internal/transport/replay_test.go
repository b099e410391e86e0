package transport

import (
	"bytes"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/dripmesh/drip/internal/linkstate"
)

func TestSentRingMatchesAReference(t *testing.T) {
	// Against a slice of everything recorded: the ring returns, for any
	// time, the newest of the bundles taken since then that fit its bounds
	// together, oldest first.
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 3))
		maxBytes := 64 + rng.IntN(4096)
		r := newSentRing(maxBytes)
		type rec struct {
			at int64
			b  []byte
		}
		var all []rec
		at := int64(0)
		for range 2000 {
			at += rng.Int64N(5)
			var bs [][]byte
			for range rng.IntN(4) {
				b := make([]byte, 1+rng.IntN(200))
				b[0] = byte(len(all))
				bs = append(bs, b)
				all = append(all, rec{at, b})
			}
			r.record(at, bs)
			if rng.IntN(10) == 0 {
				since := at - rng.Int64N(50)
				// The reference: the newest bundles within the bounds, of
				// those no larger than the bound.
				var kept []rec
				size := 0
				for i := len(all) - 1; i >= 0 && len(kept) < sentRingSlots; i-- {
					if len(all[i].b) > maxBytes {
						continue
					}
					if size+len(all[i].b) > maxBytes {
						break
					}
					size += len(all[i].b)
					kept = append(kept, all[i])
				}
				var want [][]byte
				for i := len(kept) - 1; i >= 0; i-- {
					if kept[i].at >= since {
						want = append(want, kept[i].b)
					}
				}
				got := r.since(since)
				require.Equal(t, len(want), len(got), "seed %d", seed)
				for i := range want {
					require.True(t, bytes.Equal(want[i], got[i]), "seed %d: bundle %d", seed, i)
				}
				require.LessOrEqual(t, r.bytes, maxBytes)
			}
		}
	}
}

func TestLinkRecentIsWhatItSent(t *testing.T) {
	clock := testingclock.NewFakeClock(time.Unix(1000, 0))
	ca, _ := memPipe(open(1), open(2))
	l, err := NewLink(ca, LinkConfig{QueueBytes: 1 << 16, MaxFrameBytes: 1 << 16, Metrics: newMetrics(), Clock: clock, ReplayBytes: 1 << 10},
		func(*Link, []linkstate.Message, [][]byte) error { return nil })
	require.NoError(t, err)
	var pushed [][]byte
	for i := range 10 {
		b := numbered(i)
		pushed = append(pushed, b)
		l.PushBundle(b)
		if i%2 == 1 {
			_, ok, err := l.TakeFrame()
			require.NoError(t, err)
			require.True(t, ok)
		}
		clock.Step(10 * time.Millisecond)
	}
	assert.Equal(t, pushed, l.Recent(0), "everything sent, oldest first")
	assert.Equal(t, pushed[6:], l.Recent(l.Now()-int64(40*time.Millisecond)), "the frames taken in the last 40 ms")
	var total int
	for _, b := range pushed {
		total += len(b)
	}
	for range 20 {
		l.PushBundle(numbered(99))
		total += len(numbered(99))
		_, _, err := l.TakeFrame()
		require.NoError(t, err)
	}
	require.Greater(t, total, 1<<10, "the bound is tested")
	kept := 0
	for _, b := range l.Recent(0) {
		kept += len(b)
	}
	assert.LessOrEqual(t, kept, 1<<10)
	assert.Empty(t, (&Link{}).Recent(0), "a link without ReplayBytes keeps nothing")
}
