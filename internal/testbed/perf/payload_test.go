package perf

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestPayloadStampRoundTrip(t *testing.T) {
	clk := NewClock(7)
	before := clk.Now()
	b := clk.payload(42)
	require.Len(t, b, PayloadSize)
	run, seq, sent, ok := readStamp(b)
	require.True(t, ok)
	assert.Equal(t, uint32(7), run)
	assert.Equal(t, uint32(42), seq)
	assert.GreaterOrEqual(t, sent, before)
	assert.LessOrEqual(t, sent, clk.Now())
	time.Sleep(2 * time.Millisecond)
	assert.GreaterOrEqual(t, clk.Now()-sent, 2*time.Millisecond, "latency from the same monotonic clock")

	_, seq, _, ok = readStamp(clk.payload(probeSeq))
	require.True(t, ok)
	assert.Equal(t, uint32(probeSeq), seq)

	_, _, _, ok = readStamp([]byte("not a stamp"))
	assert.False(t, ok)
}

// A subscriber counts its own run's messages, the probes apart, and
// neither another run's nor a payload the harness did not write.
func TestSubReceive(t *testing.T) {
	mine, other := NewClock(1), NewClock(2)
	lat := &latencies{from: 0, to: time.Hour}
	s := &sub{clk: mine, lat: lat}
	s.receive(mine.payload(0))
	s.receive(mine.payload(1))
	s.receive(mine.payload(probeSeq))
	s.receive(other.payload(0))
	s.receive([]byte("foreign"))
	assert.Equal(t, uint64(2), s.delivered.Load())
	assert.True(t, s.probed.Load())
	assert.Equal(t, uint64(1), s.stale.Load())
	assert.Equal(t, uint64(1), s.foreign.Load())
	assert.Equal(t, 2, lat.summary().N, "a latency per delivery of the run")
}
