package cli

import (
	"errors"

	"github.com/spf13/cobra"
)

// newSelftestCmd is replaced by the delivery self-test (helm test hook).
func newSelftestCmd() *cobra.Command {
	return &cobra.Command{
		Use:    "selftest",
		Short:  "Check delivery across brokers",
		Hidden: true,
		RunE:   func(*cobra.Command, []string) error { return errors.New("selftest: not built yet") },
	}
}
