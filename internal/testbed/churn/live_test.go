package churn

import (
	"context"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"
)

// liveEnv asks for the tests that start broker processes: they take about
// a minute and a dozen processes (make churn runs the measurement itself).
const liveEnv = "DRIP_CHURN_LIVE"

func requireLive(t *testing.T) {
	t.Helper()
	if os.Getenv(liveEnv) != "1" {
		t.Skip("starts 12 broker processes: set " + liveEnv + "=1 to run")
	}
}

// Brokers are killed, stopped and started again on their addresses, and
// Close leaves no process behind.
func TestMeshProcesses(t *testing.T) {
	requireLive(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p, err := NewPlan(1)
	require.NoError(t, err)
	addrs, err := FreeAddrs(Brokers)
	require.NoError(t, err)
	topo, err := p.Topology(addrs)
	require.NoError(t, err)
	m, err := NewMesh(ctx, MeshConfig{Binary: os.Args[0], Env: []string{actAsDrip + "=1"}, Dir: t.TempDir(), Topology: topo, Log: zaptest.NewLogger(t)})
	require.NoError(t, err)
	defer m.Close()

	require.NoError(t, m.Signal(3, syscall.SIGKILL))
	_, err = m.WaitExit(ctx, 3, 5*time.Second)
	require.NoError(t, err)
	assert.ErrorContains(t, m.Signal(3, syscall.SIGKILL), "broker b3 is not running")
	require.NoError(t, m.Start(3))
	assert.ErrorContains(t, m.Start(3), "broker b3: it is still running")
	require.NoError(t, m.waitListening(ctx, 3, addrs[3].Client), "the same addresses again")
	assert.Equal(t, 2, m.Incarnation(3))
	assert.Len(t, m.Logs(3), 2)

	require.NoError(t, m.Close())
	for i := range Brokers {
		_, err := m.WaitExit(ctx, i, time.Second)
		assert.NoError(t, err, "broker %d reaped", i)
		// The group is gone: signalling it fails.
		assert.ErrorIs(t, syscall.Kill(-m.procs[i].cmd.Process.Pid, 0), syscall.ESRCH)
	}
	assert.ErrorContains(t, m.Start(3), "the mesh is closed")
}

// A short kill and restart on real processes: the whole path from the plan
// to the result, checks included.
func TestRunLive(t *testing.T) {
	requireLive(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	s := Scenarios()[0]
	s.Down = 3 * time.Second
	cfg := DefaultConfig(s)
	cfg.Binary, cfg.Env, cfg.Dir = os.Args[0], []string{actAsDrip + "=1"}, t.TempDir()
	cfg.Duration, cfg.FaultAt, cfg.Rate, cfg.Subscribers, cfg.Publishers = 10*time.Second, 3*time.Second, 200, 16, 8
	cfg.ConvergeTimeout, cfg.Log = 30*time.Second, zaptest.NewLogger(t)
	r, err := Run(ctx, cfg)
	require.NoError(t, err)
	for _, c := range r.Checks {
		assert.True(t, c.OK, "%s: %s", c.Name, c.Detail)
	}
	require.NotNil(t, r.Times.RestartS)
	assert.InDelta(t, 6.0, *r.Times.RestartS, 0.5)
	assert.Positive(t, r.Gaps.Count, "the victim's subscribers failed over")
	assert.Positive(t, r.Failovers.Count, "the victim's publisher failed over")
	assert.Positive(t, r.BrokerCounters["drip_published_messages_total"])
	t.Logf("undelivered %d of %d, gaps %d (longest %.0f ms), parts agreed %.1f s after the fault, reconverged %.1f s after the restart",
		r.Undelivered, r.Ideal, r.Gaps.Count, r.Gaps.LongestMs, *r.Times.PartsAgreeAfterFaultS, *r.Times.ReconvergedAfterRestartS)
}
