package experiment_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dripmesh/drip/internal/testbed/experiment"
	"github.com/dripmesh/drip/internal/testbed/lab"
	"github.com/dripmesh/drip/internal/testbed/systems"
)

// TestSmokeLab runs the smoke scenario on all three systems in an emulated
// WAN, as `driplab experiment run --lab` does: each site in a network
// namespace, drip as one broker process per site, links of the scenario's
// bandwidth and 5 ms one-way delay. Every system must deliver exactly what
// the oracle expects, the lab's counters must see the traffic on the
// links, and the lab must be gone afterwards. Needs root.
func TestSmokeLab(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: builds a lab of network namespaces and TUN devices")
	}
	all := []systems.System{systems.NewDrip(systems.DripOptions{Binary: os.Args[0], Env: []string{actAs + "=drip"}})}
	for _, s := range systems.All() {
		if strings.HasPrefix(s.Name(), "drip") {
			continue // drip runs above, as processes
		}
		if err := s.Available(); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("CI=true but %s is not installed: %v", s.Name(), err)
			}
			t.Logf("%s not installed, not run: %v", s.Name(), err)
			continue
		}
		all = append(all, s)
	}
	scenarios, err := experiment.Lookup("smoke")
	require.NoError(t, err)
	name := fmt.Sprintf("xs%x", os.Getpid())
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rs, err := experiment.Run(ctx, experiment.Config{
		Scenario: scenarios[0], Systems: all, Scale: 1, Dir: t.TempDir(),
		Lab: &experiment.LabConfig{
			Name: name, Delay: 5 * time.Millisecond,
			Executable: os.Args[0], Args: []string{"lab", "daemon"}, Env: []string{actAs + "=driplab"},
		},
	})
	require.NoError(t, err)
	require.Len(t, rs, len(all))
	for i, r := range rs {
		t.Run(all[i].Name(), func(t *testing.T) {
			require.Empty(t, r.Error)
			tot := r.Totals
			assert.Positive(t, tot.Sent)
			assert.Equal(t, tot.Ideal, tot.Delivered, "delivered")
			assert.Zero(t, tot.FalsePositives, "false positives")
			assert.Zero(t, tot.Duplicates, "duplicates")
			assert.Contains(t, r.Environment.Placement, "lab "+name)
			assert.Empty(t, r.LinkError)
			require.NotNil(t, r.Lab, "lab report")
			assert.Positive(t, r.Lab.Packets, "packets crossed the emulated links")
			assert.Positive(t, r.Lab.DaemonCPU, "the daemon's CPU time is measured")
			assert.Zero(t, r.Lab.DroppedQueue, "no queue drops at this rate")
			busy := 0
			for _, p := range r.Series {
				if p.LinkBytes > 0 {
					busy++
					assert.Less(t, p.Utilisation, 1.05, "second %d: a link carried more than its bandwidth", p.T)
				}
			}
			assert.Positive(t, busy, "lab link counters saw traffic")
		})
	}
	assert.NotContains(t, lab.Labs(), name, "the lab is removed after the run")
}
