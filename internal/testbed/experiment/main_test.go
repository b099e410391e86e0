package experiment_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/dripmesh/drip/internal/cli"
)

// actAsDrip makes the test binary act as the drip binary, so that the lab
// smoke test can start the lab daemon (`drip lab daemon`) and one broker
// process per site (`drip broker`) without building drip first.
const actAsDrip = "DRIP_EXPERIMENT_TEST_ACT_AS_DRIP"

func TestMain(m *testing.M) {
	if os.Getenv(actAsDrip) == "1" {
		if err := cli.NewRoot().Execute(); err != nil {
			fmt.Fprintln(os.Stderr, "drip:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}
