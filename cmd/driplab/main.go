// Command driplab is drip's testbed: the emulated-WAN lab and the
// comparative experiments (see internal/testbed/cli). The broker itself is
// the drip binary (cmd/drip), which links none of this.
package main

import (
	"fmt"
	"os"

	"github.com/dripmesh/drip/internal/testbed/cli"
)

func main() {
	if err := cli.NewRoot().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "driplab:", err)
		os.Exit(1)
	}
}
