package systems

import (
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
