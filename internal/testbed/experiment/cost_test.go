package experiment

import (
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseProcStat(t *testing.T) {
	for _, tt := range []struct {
		name        string
		in          string
		busy, total uint64
		err         string
	}{
		{"kernel 6", "cpu  100 5 50 800 40 3 2 1 0 0\ncpu0 50 2 25 400 20 1 1 0 0 0\n", 161, 1001, ""},
		{"old kernel, 4 counters", "cpu 10 0 10 80\n", 20, 100, ""},
		{"only per-cpu lines", "cpu0 1 2 3 4\n", 0, 0, "no aggregate cpu line"},
		{"short", "cpu 1 2 3\n", 0, 0, "at least 4 counters"},
		{"garbage", "cpu 1 x 3 4\n", 0, 0, "cpu counter 2"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			busy, total, err := parseProcStat([]byte(tt.in))
			if tt.err != "" {
				assert.ErrorContains(t, err, tt.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, [2]uint64{tt.busy, tt.total}, [2]uint64{busy, total})
		})
	}
}

func TestSplit(t *testing.T) {
	t0 := time.Unix(1000, 0)
	a := cpuSample{wall: t0, self: time.Second, busy: 100, total: 1000, hasSys: true}
	for _, tt := range []struct {
		name string
		b    cpuSample
		want CPUSplit
	}{
		// 10 s; this process used 5 s; the machine (2 cores) was busy
		// 600 of 2000 jiffies: 0.6 of a core.
		{"both", cpuSample{wall: t0.Add(10 * time.Second), self: 6 * time.Second, busy: 700, total: 3000, hasSys: true},
			CPUSplit{Seconds: 10, RunnerShare: 0.5, MachineShare: 0.6}},
		{"no /proc/stat", cpuSample{wall: t0.Add(10 * time.Second), self: 3 * time.Second},
			CPUSplit{Seconds: 10, RunnerShare: 0.2}},
		{"no time passed", cpuSample{wall: t0, self: 3 * time.Second, busy: 700, total: 3000, hasSys: true},
			CPUSplit{}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := split(a, tt.b, 2)
			assert.InDelta(t, tt.want.Seconds, got.Seconds, 1e-9)
			assert.InDelta(t, tt.want.RunnerShare, got.RunnerShare, 1e-9)
			assert.InDelta(t, tt.want.MachineShare, got.MachineShare, 1e-9)
		})
	}
}

func TestCostMeter(t *testing.T) {
	m := startCost()
	m.sendStarted()
	deadline := time.Now().Add(30 * time.Millisecond)
	for time.Now().Before(deadline) { // burn some CPU to be measured
	}
	c := m.stop(&LabReport{DaemonCPUShare: 0.1})
	assert.Greater(t, c.RunnerCPU, 0.0)
	assert.Greater(t, c.Seconds, 0.0)
	require.NotNil(t, c.Sending)
	assert.GreaterOrEqual(t, c.SystemShare, 0.0)
	assert.LessOrEqual(t, c.SystemShare, c.MachineShare)
}

// A child process's CPU shows in the brokers' share once it was waited for.
func TestBrokerMeter(t *testing.T) {
	m := startBrokers()
	// A shell that burns some CPU, then exits and is waited for.
	cmd := exec.Command("sh", "-c", "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done")
	require.NoError(t, cmd.Run())
	c := &TestbedCost{}
	m.stop(c)
	assert.Greater(t, c.BrokerCPU, 0.0)
	assert.Greater(t, c.BrokerWall, 0.0)
	assert.InDelta(t, c.BrokerCPU/c.BrokerWall, c.BrokerShare, 1e-9)
	m.stop(nil) // a failed run has no cost record
}
