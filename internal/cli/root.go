package cli

import (
	"github.com/spf13/cobra"

	"github.com/dripmesh/drip/internal/buildinfo"
)

// NewRoot returns the drip command tree.
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
	root.AddCommand(newVersionCmd(), newBrokerCmd(), newLocalCmd())
	root.AddCommand(newPubCmd(), newSubCmd(), newBenchCmd())
	root.AddCommand(newNetemCmd(), newLabCmd(), newSelftestCmd())
	root.AddCommand(newExperimentCmd())
	return root
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the drip version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cmd.Println(buildinfo.String())
			return nil
		},
	}
}
