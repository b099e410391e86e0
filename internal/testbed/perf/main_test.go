package perf_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/spf13/cobra"

	dripcli "github.com/dripmesh/drip/internal/cli"
	labcli "github.com/dripmesh/drip/internal/testbed/cli"
)

// actAs makes the test binary act as one of the project's binaries, so
// that the smoke test can start drip broker processes (drip) and the
// content-routing subscriber process (driplab: perf subscribers) without
// building either.
const actAs = "DRIP_PERF_TEST_ACT_AS"

func TestMain(m *testing.M) {
	var root *cobra.Command
	switch os.Getenv(actAs) {
	case "":
		os.Exit(m.Run())
	case "drip":
		root = dripcli.NewRoot()
	case "driplab":
		root = labcli.NewRoot()
	default:
		fmt.Fprintf(os.Stderr, "%s=%q: want drip or driplab\n", actAs, os.Getenv(actAs))
		os.Exit(2)
	}
	if err := root.Execute(); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", os.Getenv(actAs), err)
		os.Exit(1)
	}
	os.Exit(0)
}
