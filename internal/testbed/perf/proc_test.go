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
// getrusage to the /proc tick. The work is measured in CPU time, not wall
// time, so that a loaded machine cannot starve the test into failing.
func TestProcessCPU(t *testing.T) {
	before, err := ProcessCPU(os.Getpid())
	require.NoError(t, err)
	self0, err := SelfCPU()
	require.NoError(t, err)
	x := 0
	for {
		for range 1 << 16 {
			x++
		}
		now, err := SelfCPU()
		require.NoError(t, err)
		if now-self0 >= 200*time.Millisecond {
			break
		}
	}
	after, err := ProcessCPU(os.Getpid())
	require.NoError(t, err)
	self1, err := SelfCPU()
	require.NoError(t, err)
	assert.Greater(t, after-before, 150*time.Millisecond, "busy for 200 ms of CPU (%d loops)", x)
	// /proc counts in 10 ms ticks, and the reads are not simultaneous.
	assert.InDelta(t, float64(self1), float64(after), float64(30*time.Millisecond))

	_, err = ProcessCPU(1 << 30)
	assert.ErrorContains(t, err, "reading the CPU time of process")
}
