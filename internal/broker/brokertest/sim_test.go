package brokertest

import (
	"flag"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

var (
	seedFlag  = flag.Uint64("seed", 0, "run only this seed of TestChurnProperty (replay)")
	seedsFlag = flag.Int("seeds", 0, "how many seeds TestChurnProperty runs (default 200; 20 with -short, 25 under the race detector)")
)

// TestChurnProperty runs random fault schedules — kills, graceful stops,
// restarts, cut links, partitions, slow links — on random meshes of 3–16
// brokers with random workloads, and checks that no subscriber receives a
// message twice or one it did not ask for, and that every message
// published while the mesh was converged reaches every subscriber it
// matches (docs/design.md §10). A failing seed prints the command that
// replays it.
func TestChurnProperty(t *testing.T) {
	first, n := uint64(1), uint64(200)
	switch {
	case *seedFlag != 0:
		first, n = *seedFlag, 1
	case *seedsFlag > 0:
		n = uint64(*seedsFlag)
	case testing.Short():
		n = 20
	case raceEnabled:
		// The race detector slows the simulation tenfold; make test runs
		// all 200 seeds once more without it.
		n = 25
	}
	for seed := first; seed < first+n; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			t.Parallel()
			sc := RandomSchedule(seed)
			s, rep, err := Run(sc)
			require.NoError(t, err)
			require.Empty(t, s.Errors())
			replay := fmt.Sprintf("replay: go test ./internal/broker/brokertest -run TestChurnProperty -v -args -seed %d", seed)
			if !rep.OK() || testing.Verbose() {
				t.Logf("%s\n%s", sc, rep)
			}
			require.True(t, rep.OK(), "%s\n%s", rep, replay)
			require.Greater(t, rep.Protected, 0, "the schedule left nothing to check\n%s", replay)
		})
	}
}
