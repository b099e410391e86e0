package perf

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The subscriber process's protocol: ready once subscribed, counters for
// each snap, done at stop or at the end of its input; a bad command or a
// bad predicate is an error it also reports.
func TestRunSubscribersProtocol(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- RunSubscribers(ctx, SubscribersSpec{System: sysNATS, Addr: "unused:1"}, inR, outW)
		outW.Close()
	}()
	lines := bufio.NewScanner(outR)
	require.True(t, lines.Scan())
	var ready childReady
	require.NoError(t, json.Unmarshal(lines.Bytes(), &ready))
	assert.True(t, ready.Ready)

	_, err := io.WriteString(inW, "snap\n")
	require.NoError(t, err)
	require.True(t, lines.Scan())
	var c subCounts
	require.NoError(t, json.Unmarshal(lines.Bytes(), &c))
	assert.Equal(t, subCounts{Probed: true}, c, "no subscribers: nothing counted, nobody waiting for a probe")

	_, err = io.WriteString(inW, "stop\n")
	require.NoError(t, err)
	require.NoError(t, <-done)
	inW.Close()

	// Fresh pipes for each run: the goroutines above may still hold the
	// old ones (closing outW after sending on done).
	inR2, inW2 := io.Pipe()
	go func() { done <- RunSubscribers(ctx, SubscribersSpec{System: sysNATS}, inR2, io.Discard) }()
	_, err = io.WriteString(inW2, "dance\n")
	require.NoError(t, err)
	assert.ErrorContains(t, <-done, `unknown command "dance"`)
	inW2.Close()

	outR3, outW3 := io.Pipe()
	go func() {
		done <- RunSubscribers(ctx, SubscribersSpec{System: sysNATS, Predicates: []string{"n >"}}, inR2, outW3)
		outW3.Close()
	}()
	lines = bufio.NewScanner(outR3)
	require.True(t, lines.Scan())
	require.NoError(t, json.Unmarshal(lines.Bytes(), &ready))
	assert.False(t, ready.Ready)
	assert.Contains(t, ready.Error, `predicate 1 "n >"`)
	assert.ErrorContains(t, <-done, `predicate 1 "n >"`)

	_, err = openSubscribers(ctx, SubscribersSpec{System: "kafka", Predicates: []string{"n > 1"}})
	assert.ErrorContains(t, err, `no system "kafka"`)
}
