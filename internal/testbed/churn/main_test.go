package churn

import (
	"fmt"
	"os"
	"testing"

	dripcli "github.com/dripmesh/drip/internal/cli"
)

// actAsDrip makes the test binary act as drip, so that the live tests can
// start `drip broker` processes without building drip.
const actAsDrip = "DRIP_CHURN_TEST_ACT_AS_DRIP"

func TestMain(m *testing.M) {
	if os.Getenv(actAsDrip) == "1" {
		if err := dripcli.NewRoot().Execute(); err != nil {
			fmt.Fprintln(os.Stderr, "drip:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}
