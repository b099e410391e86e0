package experiment

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dripmesh/drip/internal/testbed/systems"
)

// TestSmoke runs the smoke scenario (3 sites in a line, 12 clients, a
// constant low rate for 3 s) on every system that is installed: CI installs
// all three, and there a missing one fails. At this rate every system must
// deliver everything the oracle expects, once, and nothing else; and its
// output must follow its input times the replication factor (Carzaniga09
// §5.1.5: output throughput against the ideal).
func TestSmoke(t *testing.T) {
	sc := mustLookup(t, "smoke")[0]
	for _, sys := range systems.All() {
		t.Run(sys.Name(), func(t *testing.T) {
			if err := sys.Available(); err != nil {
				if os.Getenv("CI") == "true" {
					t.Fatalf("CI=true but %s is not installed: %v", sys.Name(), err)
				}
				t.Skipf("%s not installed: %v", sys.Name(), err)
			}
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			rs, err := Run(ctx, Config{Scenario: sc, Systems: []systems.System{sys}, Dir: t.TempDir(), PlacementName: "loopback"})
			require.NoError(t, err)
			require.Len(t, rs, 1)
			r := rs[0]
			require.Empty(t, r.Error)
			tot := r.Totals
			assert.Positive(t, tot.Sent)
			assert.Zero(t, tot.FalsePositives, "false positives")
			assert.Zero(t, tot.Duplicates, "duplicates")
			assert.GreaterOrEqual(t, float64(tot.Delivered), 0.95*float64(tot.Ideal), "delivered %d of %d", tot.Delivered, tot.Ideal)
			assert.InDelta(t, 3.5, r.Replication.Client, 2, "the smoke workload's replication")
			// Over the whole run output equals ideal; second by second it
			// tracks it (a generous bound: the machine is shared).
			var in, out, ideal uint64
			for _, p := range r.Series {
				in, out, ideal = in+p.Input, out+p.Output, ideal+p.Ideal
			}
			assert.Equal(t, tot.Sent, in)
			assert.Equal(t, tot.Ideal, ideal)
			ratio := float64(out) / float64(ideal)
			assert.InDelta(t, 1, ratio, 0.05, "output/ideal")
			assert.Empty(t, r.LinkError)
			busy := 0
			for _, p := range r.Series {
				if p.BusiestLink != "" && p.LinkBytes > 0 {
					busy++
				}
			}
			assert.Positive(t, busy, "link counters saw traffic")
			assert.Equal(t, sys.Name(), r.System.System)
			assert.NotEmpty(t, r.System.Version)
			assert.Equal(t, "smoke", r.Scenario.Name)
			assert.Equal(t, 2, r.Scenario.Diameter)
		})
	}
}
