package cli

import (
	"context"
	"fmt"
	"net"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dripmesh/drip/internal/bench/benchtest"
	"github.com/dripmesh/drip/internal/broker"
)

// startBrokers runs n real brokers on loopback joined by edges (the first
// of each pair dials) and returns their client addresses.
func startBrokers(t *testing.T, n int, edges [][2]int) []string {
	t.Helper()
	type listeners struct{ client, peer net.Listener }
	ls := make([]listeners, n)
	for i := range ls {
		var err error
		ls[i].client, err = net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		ls[i].peer, err = net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
	}
	addrs := make([]string, n)
	var wg sync.WaitGroup
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
	for i := range n {
		cfg := broker.DefaultConfig(uint32(i), fmt.Sprintf("b%d", i))
		cfg.Mesh = "selftest"
		// Default link-state timers: short dead intervals make links flap
		// on a loaded machine, and the self-test would rightly report the
		// messages lost with them.
		cfg.DialBackoffMin = 20 * time.Millisecond
		cfg.DrainTimeout = time.Second
		for _, e := range edges {
			if e[0] == i {
				cfg.Peers = append(cfg.Peers, broker.Peer{ID: uint32(e[1]), Addr: ls[e[1]].peer.Addr().String(), Weight: 1})
			}
		}
		srv, err := broker.NewServer(cfg, broker.ServerConfig{ClientListener: ls[i].client, PeerListener: ls[i].peer, StopTimeout: time.Second})
		require.NoError(t, err)
		addrs[i] = srv.ClientAddr()
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = srv.Serve(ctx)
		}()
	}
	return addrs
}

func selftestArgs(addrs []string, extra ...string) []string {
	args := []string{"selftest"}
	for _, a := range addrs {
		args = append(args, "--broker", a)
	}
	return append(args, extra...)
}

var pairLine = regexp.MustCompile(`(?m)^(ok  |FAIL) (\S+) → (\S+): `)

// Carzaniga09 §2: every message reaches every broker whose subscriber it
// matches, through forwarding across the mesh, exactly once.
func TestSelftestRealMesh(t *testing.T) {
	noLeaks(t)
	// A line b0–b1–b2: messages between the ends are forwarded by b1.
	addrs := startBrokers(t, 3, [][2]int{{0, 1}, {1, 2}})
	out, _, err := execute(testCtx(t), "", selftestArgs([]string{addrs[0], addrs[2], addrs[1]}, "--messages", "5", "--settle", "100ms", "--timeout", "20s")...)
	require.NoError(t, err, out)
	assert.Contains(t, out, "ok   subscribe at "+addrs[0]+": broker b0")
	assert.Contains(t, out, "ok   routes: every subscriber hears every broker")
	pairs := pairLine.FindAllStringSubmatch(out, -1)
	require.Len(t, pairs, 9, out)
	for _, p := range pairs {
		assert.Equal(t, "ok  ", p[1], p[0])
	}
	assert.Contains(t, out, "b0 → b2: 5/5 messages, each exactly once")
	assert.Contains(t, out, "drip selftest: passed")
	assert.NotContains(t, out, "FAIL")
}

// Two --broker flags naming one broker are two subscribers and two
// publishers there; the lines name them by address.
func TestSelftestSameBrokerTwice(t *testing.T) {
	noLeaks(t)
	m := testMesh(t, 1, benchtest.Fault{})
	a := m.Addrs()[0]
	out, _, err := execute(testCtx(t), "", selftestArgs([]string{a, a}, "--messages", "3", "--settle", "0s")...)
	require.NoError(t, err, out)
	assert.Contains(t, out, a+" → "+a+": 3/3 messages, each exactly once")
	assert.Len(t, pairLine.FindAllString(out, -1), 4)
}

// Runs on one mesh at once do not see each other's messages: each
// selects on its own token.
func TestSelftestConcurrentRuns(t *testing.T) {
	noLeaks(t)
	m := testMesh(t, 3, benchtest.Fault{})
	ctx := testCtx(t)
	errs := make(chan error, 3)
	for range 3 {
		go func() {
			out, _, err := execute(ctx, "", selftestArgs(m.Addrs(), "--messages", "20", "--settle", "50ms")...)
			if err != nil {
				err = fmt.Errorf("%w\n%s", err, out)
			}
			errs <- err
		}()
	}
	for range 3 {
		require.NoError(t, <-errs)
	}
}

// The self-test must fail when the mesh loses or duplicates messages; a
// test that passed regardless would be worthless in a helm test hook.
func TestSelftestDetectsFaults(t *testing.T) {
	tests := []struct {
		name  string
		fault benchtest.Fault
		want  []string
	}{
		{"drops", benchtest.Fault{DropEvery: 7}, []string{"missing seq", "deliveries incomplete after"}},
		{"duplicates", benchtest.Fault{DuplicateEvery: 5}, []string{"duplicated seq", "×2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			noLeaks(t)
			m := testMesh(t, 2, tt.fault)
			out, _, err := execute(testCtx(t), "", selftestArgs(m.Addrs(), "--messages", "10", "--settle", "200ms", "--timeout", "2s")...)
			require.Error(t, err)
			assert.Regexp(t, `^selftest failed: \d+ of \d+ checks?$`, err.Error())
			assert.Contains(t, out, "ok   routes:", "probes are repeated until they get through")
			assert.Regexp(t, `(?m)^FAIL \S+ → \S+: `, out)
			for _, w := range tt.want {
				assert.Contains(t, out, w)
			}
			assert.NotContains(t, out, "passed")
		})
	}
}

// Brokers that are not linked never hear each other's probes.
func TestSelftestDisconnectedMesh(t *testing.T) {
	noLeaks(t)
	addrs := startBrokers(t, 2, nil)
	out, _, err := execute(testCtx(t), "", selftestArgs(addrs, "--timeout", "1s")...)
	require.Error(t, err)
	assert.Contains(t, out, "FAIL routes: subscriber at b0 has not heard from b1")
	assert.Contains(t, out, "FAIL routes: subscriber at b1 has not heard from b0")
	assert.Contains(t, out, "FAIL routes incomplete after")
	assert.NotRegexp(t, pairLine, out, "no delivery checks without routes")
}

func TestSelftestUnreachableBroker(t *testing.T) {
	noLeaks(t)
	m := testMesh(t, 1, benchtest.Fault{})
	// It keeps retrying until --timeout (names may not resolve yet after an
	// install), then fails.
	// A port just released is very likely closed: connection refused.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	dead := l.Addr().String()
	require.NoError(t, l.Close())
	out, _, err := execute(testCtx(t), "", selftestArgs([]string{m.Addrs()[0], dead}, "--connect-timeout", "2s", "--timeout", "3s")...)
	require.Error(t, err)
	assert.Contains(t, out, "FAIL connect to "+dead)
	assert.Contains(t, out, "FAIL cannot go on without every broker")
}

func TestSelftestFlagErrors(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{nil, "--broker is required"},
		{[]string{"--broker", ""}, "empty address"},
		{[]string{"--broker", "x:1", "--messages", "0"}, "--messages 0: want at least 1"},
		{[]string{"--broker", "x:1", "--timeout", "0s"}, "--timeout 0s"},
		{[]string{"--broker", "x:1", "--settle", "-1s"}, "--settle -1s"},
		{[]string{"--broker", "x:1", "--probe-interval", "0s"}, "--probe-interval 0s"},
		{[]string{"--broker", "x:1", "--tls-cert", "c.pem"}, "--tls-cert and --tls-key go together"},
		{[]string{"--broker", "x:1", "--tls-cert", "/nonexistent/c.pem", "--tls-key", "/nonexistent/k.pem"}, "--tls-cert/--tls-key"},
		{[]string{"x:1"}, "unknown command"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			_, _, err := execute(testCtx(t), "", append([]string{"selftest"}, tt.args...)...)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}
