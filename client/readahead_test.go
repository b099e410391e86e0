package client

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReadAheadBoundedPerClient: a client whose 40 subscriptions never
// read holds the read-ahead it was given, 1 MiB, for all of them — each
// its share, and the one event it read last — where it read ahead 1 MiB
// per subscription (2,000 subscriptions of the default 16 MiB took a
// client to 13.5 GB). What it cannot hold it counts as lost; a
// subscription that then reads gets the rest in order. In virtual time.
func TestReadAheadBoundedPerClient(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cl := line(t, 1, nil)
		const readAhead, subs = 1 << 20, 40
		c := dialAt(t, cl, 0, WithBufferSize(1), WithReadAhead(readAhead))
		ctx := testContext(t)
		var all []*Subscription
		for range subs {
			sub, err := c.Subscribe(ctx, `n >= 0`)
			require.NoError(t, err)
			defer sub.Close()
			all = append(all, sub)
		}
		converged(t, cl)
		p, err := dialAt(t, cl, 0).NewPublisher(ctx)
		require.NoError(t, err)
		payload := make([]byte, 4<<10)
		const n = 600 // 2.7 MB to each subscription
		peak := int64(0)
		for i := range n {
			require.NoError(t, p.Publish(Message{Attrs: Attrs{"n": i}, Payload: payload}))
			if i%20 == 0 {
				time.Sleep(10 * time.Millisecond)
				peak = max(peak, c.ReadAheadHeld())
			}
		}
		_, err = p.Close()
		require.NoError(t, err)
		time.Sleep(2 * time.Second)
		peak = max(peak, c.ReadAheadHeld())
		// Each subscription may be one event over its share: a batch the
		// broker closes once it passes 64 KiB, so a delivery of 4.5 KiB
		// more, each of its 15 deliveries costing its overhead besides.
		const event = 64<<10 + 4608 + 15*deliveryOverhead
		assert.LessOrEqual(t, peak, int64(readAhead+subs*event), "read ahead by 40 subscriptions that do not read")
		assert.Greater(t, peak, int64(readAhead/2), "the subscriptions read ahead")

		d, err := all[0].Next(ctx)
		require.NoError(t, err)
		last := d.Attrs["n"].(int64)
		delivered, lost := uint64(1), all[0].Lost()
		for delivered+all[0].Lost() < n {
			d, err := all[0].Next(ctx)
			require.NoError(t, err)
			require.Greater(t, d.Attrs["n"].(int64), last, "in order")
			last = d.Attrs["n"].(int64)
			delivered++
		}
		assert.Positive(t, lost+all[0].Lost(), "what did not fit was lost, and counted")
	})
}
