package perf

import (
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseStatCPU(t *testing.T) {
	// A command name with spaces and a parenthesis; utime 250, stime 75
	// ticks.
	line := "1234 (drip (x) y) S 1 1234 1234 0 -1 4194304 100 0 0 0 250 75 0 0 20 0 9 0 100 1000 50\n"
	got, err := parseStatCPU([]byte(line))
	require.NoError(t, err)
	assert.Equal(t, 3250*time.Millisecond, got)

	_, err = parseStatCPU([]byte("1234 drip S 1"))
	assert.ErrorContains(t, err, "no command name")
	_, err = parseStatCPU([]byte("1234 (drip) S 1 2 3"))
	assert.ErrorContains(t, err, "want at least 13")
	_, err = parseStatCPU([]byte("1 (a) S 1 1 1 0 -1 0 0 0 0 0 x 0 0"))
	assert.ErrorContains(t, err, `CPU time "x"`)
}

// This process's CPU time read from /proc grows with work and agrees with
// getrusage to the /proc tick.
func TestProcessCPU(t *testing.T) {
	before, err := ProcessCPU(os.Getpid())
	require.NoError(t, err)
	self0, err := SelfCPU()
	require.NoError(t, err)
	end := time.Now().Add(150 * time.Millisecond)
	x := 0
	for time.Now().Before(end) {
		x++
	}
	after, err := ProcessCPU(os.Getpid())
	require.NoError(t, err)
	self1, err := SelfCPU()
	require.NoError(t, err)
	assert.Greater(t, after-before, 50*time.Millisecond, "busy for 150 ms (%d loops)", x)
	assert.Greater(t, self1-self0, 50*time.Millisecond)
	assert.InDelta(t, float64(self1), float64(after), float64(30*time.Millisecond))

	_, err = ProcessCPU(1 << 30)
	assert.ErrorContains(t, err, "reading the CPU time of process")
}
