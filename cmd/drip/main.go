// Command drip is the binary that ships: the broker, the clients, the
// benchmark, the self-test and the netem sidecar are its subcommands (see
// internal/cli). The testbed that measures it is cmd/driplab, which this
// binary does not link (deps_test.go checks).
package main

import (
	"os"

	"github.com/dripmesh/drip/internal/cli"
)

func main() {
	os.Exit(cli.Execute(cli.NewRoot()))
}
