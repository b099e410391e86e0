package cli

import (
	"errors"

	"github.com/spf13/cobra"
)

// newNetemCmd is replaced by the netem sidecar command.
func newNetemCmd() *cobra.Command {
	return &cobra.Command{
		Use:    "netem",
		Short:  "Shape this host's egress per peer (tc-netem sidecar)",
		Hidden: true,
		RunE:   func(*cobra.Command, []string) error { return errors.New("netem: not built yet") },
	}
}
