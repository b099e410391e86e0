// Command drip is the single drip binary: broker, clients, benchmarks and
// tools are its subcommands (see internal/cli).
package main

import (
	"fmt"
	"os"

	"github.com/dripmesh/drip/internal/cli"
)

func main() {
	if err := cli.NewRoot().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "drip:", err)
		os.Exit(1)
	}
}
