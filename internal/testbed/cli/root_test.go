package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/dripmesh/drip/internal/testbed/congestion"
)

// execute runs the driplab command tree in-process.
func execute(ctx context.Context, stdin string, args ...string) (stdout, stderr string, err error) {
	root := NewRoot()
	var out, errOut bytes.Buffer
	root.SetIn(strings.NewReader(stdin))
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs(args)
	err = root.ExecuteContext(ctx)
	return out.String(), errOut.String(), err
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// noLeaks checks at the end of a test that its commands left no goroutine.
func noLeaks(t *testing.T) {
	t.Cleanup(func() { goleak.VerifyNone(t) })
}

func TestRootCommands(t *testing.T) {
	var names []string
	for _, c := range NewRoot().Commands() {
		names = append(names, c.Name())
	}
	assert.ElementsMatch(t, []string{"version", "lab", "experiment", "churn", "perf", "harmony", "congestion", "fanout"}, names)
}

func TestHarmonyFlagErrors(t *testing.T) {
	// Refused before any lab is started.
	_, _, err := execute(testCtx(t), "", "harmony", "--scenario", "storm", "--out", t.TempDir())
	assert.ErrorContains(t, err, `--scenario "storm": want delay, failure or all`)
	_, _, err = execute(testCtx(t), "", "harmony", "--scenario", "delay")
	assert.ErrorContains(t, err, "--out: a directory for the results is required")
}

func TestCongestionFlagErrors(t *testing.T) {
	// Refused before any lab is started.
	_, _, err := execute(testCtx(t), "", "congestion", "--scenario", "fig7,fig11", "--out", t.TempDir())
	assert.ErrorContains(t, err, `--scenario "fig11": want one of fig7, fig8, fig9, fig10, ive, or all`)
	_, _, err = execute(testCtx(t), "", "congestion", "--scenario", "fig7")
	assert.ErrorContains(t, err, "--out: a directory for the results is required")
	_, _, err = execute(testCtx(t), "", "congestion", "--scale", "0", "--out", t.TempDir())
	assert.ErrorContains(t, err, "congestion: scale 0, want (0, 10]")
}

func TestFanoutFlagErrors(t *testing.T) {
	// Refused before any broker is started.
	_, _, err := execute(testCtx(t), "", "fanout", "--drip", "true")
	assert.ErrorContains(t, err, "--out: a file for the samples is required")
	_, _, err = execute(testCtx(t), "", "fanout", "--drip", filepath.Join(t.TempDir(), "none"), "--out", filepath.Join(t.TempDir(), "x.json"))
	assert.ErrorContains(t, err, "--drip")
}

func TestVersion(t *testing.T) {
	out, _, err := execute(context.Background(), "", "version")
	require.NoError(t, err)
	assert.Regexp(t, `^driplab \S+ \(go\S+ \w+/\w+\)\n$`, out)
}

// The lab's brokers are the drip binary beside driplab (make build puts
// both in bin/), else drip on PATH, and without either the error says how
// to get one.
func TestFindDrip(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("PATH", dir)
	_, err := findDrip()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "run make build")
	assert.Contains(t, err.Error(), "--drip-binary")

	drip := filepath.Join(dir, "drip")
	require.NoError(t, os.WriteFile(drip, []byte("#!/bin/sh\n"), 0o755))
	got, err := findDrip()
	require.NoError(t, err)
	assert.Equal(t, drip, got)
}

// driplab churn refuses an unknown scenario before it starts anything,
// naming the ones it has.
func TestChurnUnknownScenario(t *testing.T) {
	_, _, err := execute(testCtx(t), "", "churn", "--scenario", "nope", "--drip-binary", "/nonexistent/drip")
	require.Error(t, err)
	assert.Contains(t, err.Error(), `--scenario: unknown scenario "nope": want one of kill, term, kill-cut, all`)
}

func TestPickVariants(t *testing.T) {
	all := congestion.AllVariants()
	pick := func(list string) []congestion.Variant {
		t.Helper()
		got, err := pickVariants(all, list)
		require.NoError(t, err)
		return got
	}
	assert.Equal(t, all, pick(""))
	assert.Equal(t, all[1:2], pick("drip+cc"))
	assert.Equal(t, []congestion.Variant{all[0], all[2]}, pick("NATS,drip"), "in the scenario's order")
	assert.Equal(t, all[3:], pick("activemq"), "in any case")
	fig9 := all[:2] // a scenario without the peers
	got, err := pickVariants(fig9, "nats")
	require.NoError(t, err, "a variant of other scenarios")
	assert.Empty(t, got)
	_, err = pickVariants(all, "drip,natz")
	require.Error(t, err)
	assert.Equal(t, `--variants: unknown variant "natz": want some of drip, drip+cc, NATS, ActiveMQ`, err.Error())
}
