package cli

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/spf13/cobra"
)

// Execute runs root and returns the process's exit status. An error is
// printed once, as "drip SUBCOMMAND: what went wrong" (errorText), on
// root's standard error.
func Execute(root *cobra.Command) int {
	cmd, err := root.ExecuteC()
	if err == nil {
		return 0
	}
	if cmd == nil {
		cmd = root
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "%s: %s\n", cmd.CommandPath(), errorText(err))
	return 1
}

// rpcStatus matches grpc-go's rendering of a status error, which says the
// code in Go's words; the description after it is the broker's or the
// client's own sentence.
var rpcStatus = regexp.MustCompile(`rpc error: code = \w+ desc = `)

// errorText is err as a user of the command line should read it: without
// the Go client's "drip client: " prefix (the command line names itself
// already) and gRPC's status wrapping, and with a parse error's position
// read as one phrase ("predicate at byte 7: ...").
func errorText(err error) string {
	s := err.Error()
	s = strings.ReplaceAll(s, "drip client: ", "")
	s = rpcStatus.ReplaceAllString(s, "")
	s = strings.ReplaceAll(s, "predicate: at byte ", "predicate at byte ")
	return s
}
