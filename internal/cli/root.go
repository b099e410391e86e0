package cli

import (
	"fmt"

	"github.com/spf13/cobra"
)

// NewRoot returns the drip command tree: the broker and what ships with it
// (clients, benchmark, self-test, netem sidecar). The testbed — the lab and
// the comparative experiments — is the driplab binary (internal/testbed/cli).
func NewRoot() *cobra.Command {
	root := &cobra.Command{
		Use:   "drip",
		Short: "drip is a content-based publish/subscribe broker mesh for wide-area networks",
		Long: `drip routes messages by their content across a mesh of brokers using B-DRP:
link-state unicast routes, Bloom-filter-encoded predicates matched once at the
ingress broker, and message bundles forwarded with dynamic receiver partitioning.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(NewVersionCmd("drip"), newBrokerCmd(), newLocalCmd())
	root.AddCommand(newPubCmd(), newSubCmd(), newBenchCmd())
	root.AddCommand(newNetemCmd(), newSelftestCmd())
	for _, name := range []string{"lab", "experiment"} {
		root.AddCommand(movedToDriplab(name))
	}
	return root
}

// movedToDriplab is a hidden stand-in for a testbed command that drip had
// before the testbed became its own binary: it says where the command is.
func movedToDriplab(name string) *cobra.Command {
	return &cobra.Command{
		Use:                name,
		Hidden:             true,
		DisableFlagParsing: true,
		RunE: func(*cobra.Command, []string) error {
			return fmt.Errorf("%s is a driplab command: run driplab %s (make build writes bin/driplab beside bin/drip)", name, name)
		},
	}
}
