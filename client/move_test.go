package client

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/dripmesh/drip/internal/dedup"
)

// A drained stream is still needed while it delivered, more than half an
// overlap ago, a message its replacement has not: some broker still routes
// to the old place only. Each check forgets what it judged.
func TestDrainedStreamStillNeeded(t *testing.T) {
	now := time.Unix(100, 0)
	stamp := func(seq uint64) dedup.Stamp { return dedup.Stamp{Origin: 1, Epoch: 1, Seq: seq} }
	for _, tc := range []struct {
		name      string
		uncovered map[dedup.Stamp]time.Duration // age of each
		needed    bool
		left      int
	}{
		{"nothing only here", nil, false, 0},
		{"only recent ones: the replacement may yet deliver them", map[dedup.Stamp]time.Duration{stamp(1): 10 * time.Millisecond, stamp(2): 99 * time.Millisecond}, false, 2},
		{"one older than half the overlap", map[dedup.Stamp]time.Duration{stamp(1): 101 * time.Millisecond, stamp(2): time.Millisecond}, true, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := &subStream{overlap: 200 * time.Millisecond, uncovered: map[dedup.Stamp]time.Time{}}
			for s, age := range tc.uncovered {
				st.uncovered[s] = now.Add(-age)
			}
			assert.Equal(t, tc.needed, st.stillNeeded(now))
			assert.Len(t, st.uncovered, tc.left)
			assert.False(t, st.stillNeeded(now), "what was judged is forgotten")
		})
	}
}

// While a subscription moves, what the old stream delivers first is
// remembered until the new stream delivers it too; the old stream closes
// at its time only if nothing it alone delivered is older than half the
// overlap, and otherwise stays for another half overlap.
func TestMoveKeepsOldStreamWhileItAloneDelivers(t *testing.T) {
	filter, err := dedup.New(dedup.ClientConfig())
	assert.NoError(t, err)
	s := &Subscription{}
	old := &subStream{overlap: 200 * time.Millisecond, draining: true, cancel: func() {}}
	repl := &subStream{acked: true, replaces: old, cancel: func() {}}
	rs := &runState{streams: []*subStream{old, repl}, filter: filter}
	old.closeAt, old.uncovered = time.Now().Add(old.overlap), map[dedup.Stamp]time.Time{}
	msg := func(seq uint64) Delivery { return Delivery{Ingress: 3, IngressEpoch: 1, Seq: seq} }

	assert.NoError(t, s.handle(rs, streamEvent{st: old, msgs: []Delivery{msg(1), msg(2)}}))
	assert.NoError(t, s.handle(rs, streamEvent{st: repl, msgs: []Delivery{msg(1), msg(3)}}))
	assert.Len(t, rs.backlog.all(), 3, "each message once")
	assert.Len(t, old.uncovered, 1, "message 2 came on the old stream only")

	// Its time has come, but message 2 is older than half the overlap.
	old.uncovered[dedup.Stamp{Origin: 3, Epoch: 1, Seq: 2}] = time.Now().Add(-time.Second)
	old.closeAt = time.Now().Add(-time.Millisecond)
	s.closeDrained(rs)
	assert.Contains(t, rs.streams, old, "kept: a broker still routes to the old place only")
	assert.True(t, old.closeAt.After(time.Now()))

	// Nothing came on the old stream alone since: it closes at its next time.
	old.closeAt = time.Now().Add(-time.Millisecond)
	s.closeDrained(rs)
	assert.NotContains(t, rs.streams, old)
	assert.Equal(t, []*subStream{repl}, rs.streams)
}
