package perf

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestPayloadStampRoundTrip(t *testing.T) {
	clk := NewClock()
	sent := clk.Now()
	b := newPayload(42, sent)
	require.Len(t, b, PayloadSize)
	seq, got, ok := readStamp(b)
	require.True(t, ok)
	assert.Equal(t, uint64(42), seq)
	assert.Equal(t, sent, got)
	time.Sleep(2 * time.Millisecond)
	assert.GreaterOrEqual(t, clk.Now()-got, 2*time.Millisecond, "latency from the same monotonic clock")

	seq, _, ok = readStamp(newPayload(probeSeq, 0))
	require.True(t, ok)
	assert.Equal(t, uint64(probeSeq), seq)

	_, _, ok = readStamp([]byte("not a stamp"))
	assert.False(t, ok)
}
