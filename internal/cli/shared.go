package cli

import (
	"context"
	"fmt"
	"io"
	"sync"

	"github.com/spf13/cobra"

	"github.com/dripmesh/drip/internal/buildinfo"
)

// What the driplab command tree (internal/testbed/cli) shares with drip's,
// so that the two binaries stop, print and complete alike. The testbed
// imports the product's commands, never the other way round.

// NewVersionCmd is the version command of the named binary: it prints
// "NAME VERSION (GO OS/ARCH)" to standard output, where scripts read it.
func NewVersionCmd(binary string) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the " + binary + " version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintln(cmd.OutOrStdout(), buildinfo.Of(binary))
			return err
		},
	}
}

// SignalContext is cancelled on SIGINT or SIGTERM; a second signal kills
// a command that does not stop.
func SignalContext(parent context.Context) (context.Context, context.CancelFunc) {
	return signalContext(parent)
}

// FixedCompletions completes a flag from a fixed list.
func FixedCompletions(values ...string) func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	return fixedCompletions(values...)
}

// Plural is n followed by one or many, whichever n calls for: "1 hop",
// "2 hops".
func Plural(n int64, one, many string) string {
	if n == 1 || n == -1 {
		return fmt.Sprintf("%d %s", n, one)
	}
	return fmt.Sprintf("%d %s", n, many)
}

// LockedWriter serialises writes from several goroutines, so that lines
// printed concurrently do not interleave.
type LockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

// NewLockedWriter returns a LockedWriter writing to w.
func NewLockedWriter(w io.Writer) *LockedWriter { return &LockedWriter{w: w} }

func (l *LockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
