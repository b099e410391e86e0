package transport

import (
	"bytes"
	"testing"
	"time"

	"github.com/bits-and-blooms/bitset"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dripmesh/drip/internal/dedup"
	"github.com/dripmesh/drip/internal/drp"
	"github.com/dripmesh/drip/internal/qos"
	"github.com/dripmesh/drip/internal/wire"
	testingclock "k8s.io/utils/clock/testing"
)

// tagged is a bundle whose single byte names it.
func tagged(c byte) []byte { return []byte{c} }

func names(f Batch) string {
	var b bytes.Buffer
	for _, x := range f.Bundles {
		b.Write(x)
	}
	return b.String()
}

func TestQueueSendsUrgentFirst(t *testing.T) {
	// Kim10 §2.2: traffic is scheduled by urgency. Bundles with a SendBy
	// leave first, soonest first and in arrival order among equals; the
	// others keep their arrival order.
	q := NewQueue(1 << 20)
	require.True(t, q.PushBundle(tagged('a')))
	ok, _ := q.TryPushUrgent(tagged('x'), qos.Urgency{SendBy: 30})
	require.True(t, ok)
	require.True(t, q.PushBundle(tagged('b')))
	ok, _ = q.TryPushUrgent(tagged('y'), qos.Urgency{SendBy: 10})
	require.True(t, ok)
	ok, _ = q.TryPushUrgent(tagged('z'), qos.Urgency{SendBy: 30})
	require.True(t, ok)
	ok, _ = q.TryPushUrgent(tagged('c'), qos.Urgency{Deadline: 99}) // a deadline but no time to spare: in order
	require.True(t, ok)
	assert.Equal(t, 6, q.Bytes())
	f, ok := q.Next(closedCh, 1<<20)
	require.True(t, ok)
	assert.Equal(t, "yxzabc", names(f))
	assert.Equal(t, []int64{0, 0, 0, 0, 0, 99}, f.Deadlines)
	assert.Zero(t, q.Bytes())
}

func TestQueueUrgentRespectsFramesAndBounds(t *testing.T) {
	q := NewQueue(3)
	for i, c := range []byte("pqr") {
		ok, _ := q.TryPushUrgent(tagged(c), qos.Urgency{SendBy: int64(10 - i)})
		require.True(t, ok)
	}
	ok, room := q.TryPushUrgent(tagged('s'), qos.Urgency{SendBy: 1})
	assert.False(t, ok, "urgent bundles count against the byte bound")
	require.NotNil(t, room)
	f, _ := q.Next(closedCh, 2)
	assert.Equal(t, "rq", names(f), "a frame holds what fits")
	assert.Nil(t, f.Deadlines)
	<-room
	assert.Equal(t, 1, q.Close(), "Close counts urgent bundles left")
}

func TestLinkSetsBudgetAsBundlesLeave(t *testing.T) {
	// The budget a receiver reads is the time left when the bundle left
	// the sender's queue, less the link's one-way delay: queueing at the
	// sender is charged to the message.
	var ra, rb recorder
	a, b, _, _ := linkPair(t, false, &ra, &rb)
	clock := testingclock.NewFakeClock(time.Unix(1000, 0))
	a.clock, a.made = clock, clock.Now().Add(-999) // Now reads 1000
	a.SetOneWay(7)
	q := wire.BundleQoS{Deadline: int64(50 * time.Millisecond), Budget: 123}
	raw := wire.AppendBundleQoS(nil, drp.Bundle{Source: 1, Dest: bitset.New(8).Set(2), HopsLeft: 3}, dedup.Stamp{Origin: 1, Epoch: 1, Seq: 1}, 0, 0, []byte("m"), q)
	require.True(t, a.PushUrgent(raw, qos.Urgency{SendBy: 1500, Deadline: 5000}))
	require.True(t, a.PushBundle(numbered(1)))
	clock.Step(1000)
	f, ok, err := a.TakeFrame()
	require.NoError(t, err)
	require.True(t, ok)
	require.NoError(t, b.Deliver(f))
	require.Len(t, rb.frames, 1)
	require.Len(t, rb.frames[0].Bundles, 2)
	assert.Equal(t, int64(5000-2000-7), rb.frames[0].Bundles[0].GetBudgetNs())
	assert.Equal(t, uint64(1), rb.frames[0].Bundles[1].GetSeq())
	a.Close(nil)
}
