package systems

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Stopping a broker stops what it started too: each runs in a process
// group of its own, and stop signals the group.
func TestStopKillsProcessGroup(t *testing.T) {
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "child.pid")
	// The shell ignores SIGTERM, so stop must escalate; its child writes
	// its PID and sleeps.
	script := "trap '' TERM; sleep 60 & echo $! > " + pidFile + "; wait"
	pr, err := startProcess(Loopback{}, "s0", "sh", filepath.Join(dir, "sh.log"), []string{"sh", "-c", script}, nil)
	require.NoError(t, err)
	var child int
	require.Eventually(t, func() bool {
		b, err := os.ReadFile(pidFile)
		if err != nil {
			return false
		}
		child, err = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil
	}, 10*time.Second, 10*time.Millisecond)
	pgid, err := syscall.Getpgid(pr.cmd.Process.Pid)
	require.NoError(t, err)
	assert.Equal(t, pr.cmd.Process.Pid, pgid, "the process leads its own group")
	assert.NotEqual(t, syscall.Getpgrp(), pgid)

	pr.stop(200 * time.Millisecond)
	assert.Error(t, pr.alive(), "stopped")
	// The child is reaped by init once killed; until then it may linger
	// as a zombie, which /proc shows with state Z.
	assert.Eventually(t, func() bool {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(child) + "/stat")
		return err != nil || strings.Contains(string(b), ") Z ")
	}, 5*time.Second, 10*time.Millisecond, "the broker's child %d was killed with its group", child)
}

// A site is up when try first succeeds; failures before that are retried,
// and the process dying or the deadline ends the wait with what went wrong.
func TestWaitAcceptingRetriesUntilReady(t *testing.T) {
	refused := errors.New("handshake: unexpected EOF")
	for _, tc := range []struct {
		name     string
		failures int
		alive    error
		wait     time.Duration
		want     string
	}{
		{name: "ready at once", failures: 0},
		{name: "ready after refusals", failures: 3},
		{name: "dies", failures: 1 << 30, alive: errors.New("exited: status 1"), want: "exited: status 1"},
		{name: "never ready", failures: 1 << 30, wait: 300 * time.Millisecond, want: "never accepted a connection (last: handshake: unexpected EOF)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.wait == 0 {
				tc.wait = time.Minute
			}
			ctx, cancel := context.WithTimeout(context.Background(), tc.wait)
			defer cancel()
			tries := 0
			err := waitAccepting(ctx, "127.0.0.1:1", func() error { return tc.alive }, func(context.Context) error {
				tries++
				if tries <= tc.failures {
					return refused
				}
				return nil
			})
			if tc.want != "" {
				require.ErrorContains(t, err, tc.want)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.failures+1, tries)
		})
	}
}
