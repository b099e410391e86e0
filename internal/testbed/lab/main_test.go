package lab

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"testing"

	"go.uber.org/goleak"
	"go.uber.org/zap"
)

// testDaemonEnv makes the test binary act as the lab daemon, so Up can
// start one in tests without a driplab binary: Up runs
// `<test binary> --name <lab>` with it set.
const testDaemonEnv = "DRIP_LAB_TEST_DAEMON"

func TestMain(m *testing.M) {
	if os.Getenv(testDaemonEnv) == "1" {
		os.Exit(testDaemon())
	}
	goleak.VerifyTestMain(m)
}

func testDaemon() int {
	name := os.Args[len(os.Args)-1]
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	log, err := zap.NewDevelopment()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := RunDaemon(ctx, name, log); err != nil {
		fmt.Fprintln(os.Stderr, "lab daemon:", err)
		return 1
	}
	return 0
}
