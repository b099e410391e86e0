package client

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestDeadlinesAndTwoPaths(t *testing.T) {
	// docs/design.md §11 through the client: a subscription's deadline and
	// two paths reach the broker, each delivery says how long the mesh
	// took, and a deadline no path keeps (1 ns) counts every remote
	// delivery as a miss while a generous one counts none. Two paths on a
	// line have one path twice: still delivered once.
	cl := line(t, 3, nil)
	sc, pc := dialAt(t, cl, 2), dialAt(t, cl, 0)
	ctx := testContext(t)
	tight, err := sc.Subscribe(ctx, `n >= 0`, WithDeadline(time.Nanosecond), WithTwoPaths())
	require.NoError(t, err)
	defer tight.Close()
	loose, err := sc.Subscribe(ctx, `n >= 0`, WithDeadline(time.Minute))
	require.NoError(t, err)
	defer loose.Close()
	converged(t, cl)

	const n = 50
	msgs := make([]Message, n)
	for i := range msgs {
		msgs[i] = Message{Attrs: Attrs{"n": i}}
	}
	msgs[7].Deadline = 30 * time.Second
	_, err = pc.Publish(ctx, msgs...)
	require.NoError(t, err)
	for _, sub := range []*Subscription{tight, loose} {
		for i := range n {
			d, err := sub.Next(ctx)
			require.NoError(t, err)
			require.Equal(t, int64(i), d.Attrs["n"])
			assert.Equal(t, 2, d.Hops)
			assert.Positive(t, d.Elapsed, "message %d: the mesh measured no time", i)
			assert.Less(t, d.Elapsed, 10*time.Second)
			if i == 7 {
				assert.Equal(t, 30*time.Second, d.Deadline, "the publisher's deadline travels with the message")
			}
		}
	}
	assert.Equal(t, uint64(n), tight.DeadlineMisses())
	assert.Zero(t, loose.DeadlineMisses())
	assert.Zero(t, tight.Duplicates(), "the broker passed on one copy of each")
}

func TestDeadlineOutOfRange(t *testing.T) {
	cl := line(t, 1, nil)
	c := dialAt(t, cl, 0)
	ctx := testContext(t)
	_, err := c.Subscribe(ctx, `n >= 0`, WithDeadline(-time.Second))
	require.Error(t, err)
	assert.Equal(t, codes.InvalidArgument, status.Code(err))
	assert.Contains(t, err.Error(), "deadline -1s: want 0 (none) or a duration up to 1h0m0s")
	_, err = c.Publish(ctx, Message{Attrs: Attrs{"n": 1}, Deadline: 2 * time.Hour})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "deadline 2h0m0s: want 0 (none) or a duration up to 1h0m0s")
}
