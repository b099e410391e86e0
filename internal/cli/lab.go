package cli

import (
	"errors"

	"github.com/spf13/cobra"
)

// newLabCmd is replaced by the emulated-WAN lab command.
func newLabCmd() *cobra.Command {
	return &cobra.Command{
		Use:    "lab",
		Short:  "Emulated wide-area lab in network namespaces",
		Hidden: true,
		RunE:   func(*cobra.Command, []string) error { return errors.New("lab: not built yet") },
	}
}
