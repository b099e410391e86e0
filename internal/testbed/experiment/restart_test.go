package experiment_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dripmesh/drip/internal/testbed/experiment"
	"github.com/dripmesh/drip/internal/testbed/systems"
)

// TestDripRestart: a drip broker process killed as a crash would be
// (Restarter.Kill) leaves the mesh unready, and Restart brings it back on
// its addresses, with a log of its own, until routing settles again; a
// running broker cannot be restarted. Two broker processes on loopback.
func TestDripRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: starts two drip broker processes on loopback, a few seconds (make test runs it)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := t.TempDir()
	dep, err := systems.NewDrip(systems.DripOptions{Binary: os.Args[0], Env: []string{actAs + "=drip"}}).
		Start(ctx, systems.Spec{Topology: experiment.Topology(2), Dir: dir})
	require.NoError(t, err)
	defer func() { assert.NoError(t, dep.Close()) }()
	require.NoError(t, dep.Ready(ctx))
	r, ok := dep.(systems.Restarter)
	require.True(t, ok, "drip's deployment is a Restarter")
	pid := func() int { return dep.(systems.ServerLister).Servers()[1].PID }
	before := pid()

	require.ErrorContains(t, r.Restart(ctx, "s1"), "still runs")
	require.ErrorContains(t, r.Kill("nowhere"), `no broker process at site "nowhere"`)
	require.NoError(t, r.Kill("s1"))
	short, cancelShort := context.WithTimeout(ctx, 2*time.Second)
	defer cancelShort()
	require.ErrorContains(t, dep.Ready(short), "exited", "routing is not ready with a broker down")

	require.NoError(t, r.Restart(ctx, "s1"))
	require.NoError(t, dep.Ready(ctx), "routing settles again with the broker back")
	assert.NotEqual(t, before, pid(), "a new process")
	_, err = os.Stat(filepath.Join(dir, "drip-s1.restart-1.log"))
	assert.NoError(t, err, "the restarted broker logs to a file of its own")
}
