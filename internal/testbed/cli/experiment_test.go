package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestExperimentList(t *testing.T) {
	out, _, err := execute(testCtx(t), "", "experiment", "list")
	require.NoError(t, err)
	for _, want := range []string{"single-broker", "brokers-8", "smoke", "scaling", "brokers-1,brokers-2,brokers-4,brokers-8", "drip               yes", "drip-uncompressed  yes"} {
		assert.Contains(t, out, want)
	}
}

// A short drip-only run writes its JSON and plots, and plot redraws them.
func TestExperimentRunAndPlot(t *testing.T) {
	noLeaks(t)
	dir := t.TempDir()
	out, _, err := execute(testCtx(t), "", "experiment", "run", "--scenario", "smoke", "--systems", "drip",
		"--duration", "1s", "--scale", "0.5", "--out", dir, "--quiet")
	require.NoError(t, err)
	for _, f := range []string{"smoke-drip.json", "smoke-drip.png", "smoke-compare.png"} {
		assert.Contains(t, out, filepath.Join(dir, f))
		assert.FileExists(t, filepath.Join(dir, f))
	}
	require.NoError(t, os.Remove(filepath.Join(dir, "smoke-drip.png")))
	out, _, err = execute(testCtx(t), "", "experiment", "plot", "--scenario", "smoke", "--systems", "drip,nats", "--dir", dir)
	require.NoError(t, err)
	assert.Contains(t, out, "smoke-drip.png")
	assert.FileExists(t, filepath.Join(dir, "smoke-drip.png"))
}

// --drip-congestion-feedback turns the clients' congestion feedback on and
// the run's record says so.
func TestExperimentRunWithCongestionFeedback(t *testing.T) {
	noLeaks(t)
	dir := t.TempDir()
	_, _, err := execute(testCtx(t), "", "experiment", "run", "--scenario", "smoke", "--systems", "drip",
		"--duration", "1s", "--scale", "0.5", "--out", dir, "--quiet", "--drip-congestion-feedback")
	require.NoError(t, err)
	data, err := os.ReadFile(filepath.Join(dir, "smoke-drip.json"))
	require.NoError(t, err)
	var run struct {
		System struct {
			Config map[string]string `json:"config"`
		} `json:"system"`
		Totals struct {
			Feedback uint64 `json:"congestion_feedback"`
		} `json:"totals"`
	}
	require.NoError(t, json.Unmarshal(data, &run))
	assert.Contains(t, run.System.Config["congestion_control"], "subscriptions ask", "the record says control was on")
	assert.Positive(t, run.Totals.Feedback, "the subscriptions asked the publishers (an echo at least)")
}

func TestExperimentRunErrors(t *testing.T) {
	_, _, err := execute(testCtx(t), "", "experiment", "run", "--scenario", "nope")
	assert.ErrorContains(t, err, `--scenario: unknown scenario "nope"`)
	_, _, err = execute(testCtx(t), "", "experiment", "run", "--scenario", "smoke", "--systems", "kafka")
	assert.ErrorContains(t, err, `--systems: unknown system "kafka"`)
	_, _, err = execute(testCtx(t), "", "experiment", "run", "--scenario", "smoke", "--fault", "cut:s0@1s+1s")
	assert.ErrorContains(t, err, "--fault: fault \"cut:s0@1s+1s\": a cut names two sites")
	_, _, err = execute(testCtx(t), "", "experiment", "run", "--scenario", "smoke", "--fault", "cut:s0/s1@1s+1s")
	assert.ErrorContains(t, err, "a link cut needs a lab", "on loopback")
	_, _, err = execute(testCtx(t), "", "experiment", "run", "--scenario", "smoke", "--fault", "restart:s7@1s+1s")
	assert.ErrorContains(t, err, `no site "s7"`)
	_, _, err = execute(testCtx(t), "", "experiment", "plot", "--scenario", "smoke", "--dir", t.TempDir())
	assert.ErrorContains(t, err, "no results for scenario smoke")
}

// --ready-timeout bounds the wait for routing to settle: a nanosecond is
// never enough, and the run says it failed; a negative one is refused.
func TestExperimentRunReadyTimeout(t *testing.T) {
	noLeaks(t)
	dir := t.TempDir()
	_, _, err := execute(testCtx(t), "", "experiment", "run", "--scenario", "smoke", "--systems", "drip",
		"--duration", "1s", "--scale", "0.5", "--out", dir, "--quiet", "--ready-timeout", "1ns")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "1 run(s) failed")
	data, err := os.ReadFile(filepath.Join(dir, "smoke-drip.json"))
	require.NoError(t, err)
	assert.Contains(t, string(data), "deadline exceeded")

	_, _, err = execute(testCtx(t), "", "experiment", "run", "--scenario", "smoke", "--systems", "drip",
		"--out", dir, "--quiet", "--ready-timeout", "-1s")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "--ready-timeout -1s: want a positive time")
}
