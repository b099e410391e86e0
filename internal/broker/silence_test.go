package broker_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dripmesh/drip/internal/broker"
)

// TestSilentLinkIsRoutedAroundAndDialledAgain: whole brokers in virtual
// time, 0–1, 1–2 and 0–2, where the path of the link 0 dialled to 1
// starts dropping everything. The mesh routes around the link within
// 100 ms (three 20 ms keepalives and a tick); the adjacency dies after the
// dead interval; once the path heals, 0 has closed the silent connection
// and dials 1 again, and the direct route is back within a backoff and a
// database exchange, although the old connection never recovers.
func TestSilentLinkIsRoutedAroundAndDialledAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := startVirtualMesh(t, 3, [][2]int{{0, 1}, {1, 2}, {0, 2}}, func(c *broker.Config) {
			c.LinkState.Keepalive, c.LinkState.SuspectMultiplier = 20*time.Millisecond, 3
		})
		m.settled(0, 1, 2)
		nextHop := func(from int, to uint32) uint32 {
			in, err := m.brokers[from].Inspect(context.Background())
			require.NoError(t, err)
			return in.NextHops[to]
		}
		require.Equal(t, uint32(1), nextHop(0, 1))

		// until polls cond every 5 ms (virtual) for up to limit, and
		// returns how long it took to hold, 0 if it never did.
		until := func(limit time.Duration, cond func() bool) time.Duration {
			start := time.Now()
			for time.Since(start) < limit {
				time.Sleep(5 * time.Millisecond)
				if cond() {
					return time.Since(start)
				}
			}
			return 0
		}

		m.mem.Silence("b1")
		around := until(time.Second, func() bool { return nextHop(0, 1) == 2 && nextHop(1, 0) == 2 })
		t.Logf("routed around after %v", around)
		require.Positive(t, around, "not routed around within a second")
		assert.LessOrEqual(t, around, 100*time.Millisecond)

		time.Sleep(time.Second) // past the dead interval (400 ms)
		m.mem.Heal("b1")
		back := until(5*time.Second, func() bool { return nextHop(0, 1) == 1 && nextHop(1, 0) == 0 })
		t.Logf("direct again %v after the heal", back)
		require.Positive(t, back, "the direct link did not come back within 5 s of the heal")
		// The dial backoff (at most 200 ms), a dial, hellos both ways and
		// the database exchange.
		assert.LessOrEqual(t, back, 500*time.Millisecond)
	})
}
