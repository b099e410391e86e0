package client_test

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/dripmesh/drip/client"
)

// TestMain runs the examples against a real broker and checks, after every
// test, that no goroutine was left behind (subscriptions' receive
// goroutines, streams, servers).
func TestMain(m *testing.M) {
	addr, stop := client.StartBroker()
	brokerAddr = addr
	code := m.Run()
	stop()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}
