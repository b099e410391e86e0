package cli

import (
	"github.com/spf13/cobra"

	dripcli "github.com/dripmesh/drip/internal/cli"
)

// NewRoot returns the driplab command tree.
func NewRoot() *cobra.Command {
	root := &cobra.Command{
		Use:   "driplab",
		Short: "driplab measures drip: an emulated WAN lab and experiments against ActiveMQ and NATS",
		Long: `driplab is drip's testbed, a binary of its own so that the broker ships
without it. lab runs a topology as an emulated wide-area network in network
namespaces (root only; docs/lab.md); experiment runs Carzaniga09 §5's
scenarios on drip, ActiveMQ and NATS and plots them (docs/experiments.md);
perf measures the data plane against nats-server and ActiveMQ on this
machine (docs/results/perf.md); harmony runs Kim10 §4's deadline and
two-path experiments (docs/results/harmony.md); congestion runs Malekpour11
§IV's congestion-control experiments (docs/results/congestion.md); fanout measures one broker's
memory under a wide fan-out (docs/results/memory-budget.md).
The brokers it measures are drip's own: drip broker processes in the lab, or
the broker package in this process on loopback.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(dripcli.NewVersionCmd("driplab"), newLabCmd(), newExperimentCmd(), newChurnCmd(), newPerfCmd(), newHarmonyCmd(), newCongestionCmd(), newFanoutCmd())
	return root
}
