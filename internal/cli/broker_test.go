package cli

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/dripmesh/drip/internal/broker"
	"github.com/dripmesh/drip/internal/linkstate"
	"github.com/dripmesh/drip/internal/topology"
)

func TestParsePeer(t *testing.T) {
	tests := []struct {
		in   string
		want broker.Peer
		err  string
	}{
		{"3=10.0.0.5:7100", broker.Peer{ID: 3, Addr: "10.0.0.5:7100", Weight: 1}, ""},
		{"7=b7.mesh:7100@20", broker.Peer{ID: 7, Addr: "b7.mesh:7100", Weight: 20}, ""},
		{"b1:7100", broker.Peer{}, "want ID=HOST:PORT"},
		{"x=b1:7100", broker.Peer{}, `router ID "x" is not a number`},
		{"1=", broker.Peer{}, "missing address"},
		{"1=h:1@0", broker.Peer{}, "not a positive number"},
		{"1=h:1@-3", broker.Peer{}, "not a positive number"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := parsePeer(tt.in)
			if tt.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func writeFile(t *testing.T, name, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(p, []byte(text), 0o600))
	return p
}

// brokerConfig parses broker flags as the command would.
func brokerConfig(t *testing.T, args ...string) (broker.Config, broker.ServerConfig, error) {
	t.Helper()
	var f brokerFlags
	cmd := newBrokerCmdWith(&f)
	require.NoError(t, cmd.ParseFlags(args))
	return f.config(cmd.Flags().Changed)
}

func TestBrokerConfigFromTopology(t *testing.T) {
	topo := writeFile(t, "mesh.yaml", `
mesh: prod
brokers:
  - {name: b0, client: b0.svc:7000, peer: b0.svc:7100, metrics: b0.svc:9100}
  - {name: b1, client: b1.svc:7000, peer: b1.svc:7100}
  - {name: b2, peer: b2.svc:7100}
links:
  - {a: b0, b: b1, weight: 5}
  - {a: b0, b: b2}
`)
	cfg, sc, err := brokerConfig(t, "--topology", topo, "--name", "b0")
	require.NoError(t, err)
	assert.Equal(t, uint32(0), cfg.ID)
	assert.Equal(t, "prod", cfg.Mesh)
	assert.Equal(t, []broker.Peer{{ID: 1, Addr: "b1.svc:7100", Weight: 5}, {ID: 2, Addr: "b2.svc:7100", Weight: 1}}, cfg.Peers)
	assert.Equal(t, "b0.svc:7000", sc.ClientAddr, "the topology's address when no flag is given")

	// In Kubernetes the pod listens on wildcard addresses given as flags.
	_, sc, err = brokerConfig(t, "--topology", topo, "--name", "b0", "--client-addr", ":7000", "--peer-addr", ":7100")
	require.NoError(t, err)
	assert.Equal(t, ":7000", sc.ClientAddr)
	assert.Equal(t, ":7100", sc.PeerAddr)
	assert.Equal(t, "b0.svc:9100", sc.MetricsAddr)

	_, _, err = brokerConfig(t, "--topology", topo, "--name", "b9")
	assert.ErrorContains(t, err, `no broker named "b9"`)
}

func TestBrokerConfigErrors(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{nil, "--name is required"},
		{[]string{"--name", "b0", "--peer", "0=h:1"}, "own ID"},
		{[]string{"--name", "b0", "--bloom-bits", "7"}, "encoding"},
		{[]string{"--name", "b0", "--tls-cert", "c.pem"}, "--tls-cert and --tls-key go together"},
		{[]string{"--name", "b0", "--tls-client-auth"}, "--tls-client-auth needs --tls-ca"},
		{[]string{"--name", "b0", "--tls-cert", "c.pem", "--tls-key", "k.pem"}, "--tls-cert needs --tls-ca"},
		{[]string{"--name", "b0", "--tls-peer-identity"}, "--tls-peer-identity needs --tls-cert, --tls-key and --tls-ca"},
		{[]string{"--name", "b0", "--tls-cert", "c.pem", "--tls-key", "k.pem", "--tls-ca", "ca.pem", "--tls-client-ca", "cc.pem"}, "--tls-client-ca needs --tls-client-auth"},
		{[]string{"--name", "b0", "--link-queue-bytes", "0"}, "link queue bytes must be positive"},
		{[]string{"--name", "b0", "--link-mark-bytes", "-5"}, "link mark bytes must lie between 0 (no marks) and the link queue's 4194304, got -5"},
		{[]string{"--name", "b0", "--peer-notsent-lowat", "-1"}, "peer connections: TCP_NOTSENT_LOWAT -1: want 0 (the kernel's default) or a byte count"},
		{[]string{"--name", "b0", "--topology", "/nonexistent.yaml"}, "no such file"},
		{[]string{"--name", "b0", "--match-all", "deny"}, `match-all policy "deny": want allow, limit or refuse`},
		{[]string{"--name", "b0", "--match-all", "limit:0"}, `want a positive rate`},
		{[]string{"--name", "b0", "--tls-client-auth-optional"}, "--tls-client-auth-optional needs --tls-ca"},
		{[]string{"--name", "b0", "--tls-cert", "c.pem", "--tls-key", "k.pem", "--tls-ca", "ca.pem", "--tls-client-auth", "--tls-client-auth-optional"}, "excludes --tls-client-auth"},
		{[]string{"--name", "b0", "--metrics-tls-cert", "m.pem"}, "--metrics-tls-cert and --metrics-tls-key go together"},
		{[]string{"--name", "b0", "--metrics-tls-client-ca", "ca.pem"}, "--metrics-tls-client-ca needs --metrics-tls-cert"},
		{[]string{"--name", "b0", "--authz-policy", "/nonexistent.yaml"}, "authorization policy: open /nonexistent.yaml"},
		{[]string{"--name", "b0", "--hello-interval", "2s"}, "dead interval 4s is shorter than three hello intervals (2s)"},
		{[]string{"--name", "b0", "--dead-interval", "2s"}, "set --dead-interval to at least 3s"},
		{[]string{"--name", "b0", "--hello-interval", "-1s"}, "--hello-interval -1s is negative"},
		{[]string{"--name", "b0", "--dead-interval", "-1s"}, "--dead-interval -1s is negative"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			_, _, err := brokerConfig(t, tt.args...)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

// TestBrokerTimerFlags: --hello-interval and --dead-interval set the
// link-state timers over the default's or --wan's, and leave the cost mode
// as it was (--wan alone turns on RTT costs).
func TestBrokerTimerFlags(t *testing.T) {
	tests := []struct {
		args        []string
		hello, dead time.Duration
		cost        linkstate.CostMode
	}{
		{nil, time.Second, 4 * time.Second, linkstate.CostWeight},
		{[]string{"--dead-interval", "10s"}, time.Second, 10 * time.Second, linkstate.CostWeight},
		{[]string{"--hello-interval", "2s", "--dead-interval", "10s"}, 2 * time.Second, 10 * time.Second, linkstate.CostWeight},
		{[]string{"--hello-interval", "500ms"}, 500 * time.Millisecond, 4 * time.Second, linkstate.CostWeight},
		{[]string{"--wan"}, 2 * time.Second, 10 * time.Second, linkstate.CostRTT},
		{[]string{"--wan", "--dead-interval", "20s"}, 2 * time.Second, 20 * time.Second, linkstate.CostRTT},
		{[]string{"--hello-interval", "1s", "--dead-interval", "3s"}, time.Second, 3 * time.Second, linkstate.CostWeight},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			cfg, _, err := brokerConfig(t, append([]string{"--name", "b0"}, tt.args...)...)
			require.NoError(t, err)
			assert.Equal(t, tt.hello, cfg.LinkState.HelloInterval)
			assert.Equal(t, tt.dead, cfg.LinkState.DeadInterval)
			assert.Equal(t, tt.cost, cfg.LinkState.CostMode)
		})
	}
}

// freeTopology writes a 3-broker line on free loopback ports.
func freeTopology(t *testing.T) string {
	t.Helper()
	addr := func() string {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		defer l.Close()
		return l.Addr().String()
	}
	var b strings.Builder
	b.WriteString("mesh: clitest\nbrokers:\n")
	for i := range 3 {
		fmt.Fprintf(&b, "  - {name: b%d, client: %s, peer: %s}\n", i, addr(), addr())
	}
	b.WriteString("links:\n  - {a: b0, b: b1}\n  - {a: b1, b: b2}\n")
	return writeFile(t, "line.yaml", b.String())
}

// TestLocalDemo runs `drip local --demo` on a free-port topology: the
// README's first command, end to end in-process. At its default log level
// the demo's output stands alone: the brokers' routine events stay out of
// stderr.
func TestLocalDemo(t *testing.T) {
	noLeaks(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, errOut, err := execute(ctx, "", "local", "--demo", "--duration", "3s", "--topology", freeTopology(t))
	require.NoError(t, err, "stderr: %s", errOut)
	assert.Regexp(t, `^mesh clitest: 3 brokers in this process, clients at b0 127\.0\.0\.1:\d+, b1 `, out)
	assert.Contains(t, out, "subscribed at b0")
	assert.Contains(t, out, "published at b1")
	assert.Contains(t, out, " ← ")
	assert.Contains(t, out, "(router 1, 1 hop, ", "b1's neighbours are one hop away, in the singular")
	assert.NotContains(t, out, "1 hops")
	assert.Regexp(t, `demo: published \d+ messages?, [1-9]\d* deliver(y|ies)\n`, out)
	assert.NotContains(t, errOut, `"level":"info"`, "info logs at the default level")
}

// Ctrl-C stops drip local cleanly (exit 0), also before the demo has its
// routes: the interruption is not the demo failing.
func TestLocalInterrupted(t *testing.T) {
	noLeaks(t)
	for _, tc := range []struct {
		after     time.Duration
		published bool // the demo had published when interrupted
	}{{50 * time.Millisecond, false}, {1500 * time.Millisecond, true}} {
		t.Run(tc.after.String(), func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			stop := time.AfterFunc(tc.after, cancel)
			defer stop.Stop()
			out, errOut, err := execute(ctx, "", "local", "--demo", "--topology", freeTopology(t))
			require.NoError(t, err, "stderr: %s", errOut)
			if tc.published {
				assert.Contains(t, out, "demo: published")
			}
		})
	}
}

// drip local runs its brokers as drip broker does without flags: one
// default bounds string values in predicates and in messages, the one
// drip broker --help shows for --max-string.
func TestLocalConfigIsBrokerDefault(t *testing.T) {
	topo := freeTopology(t)
	t0, err := topology.Load(topo)
	require.NoError(t, err)
	local, _, err := localConfig(t0, t0.Brokers[0])
	require.NoError(t, err)
	brk, _, err := brokerConfig(t, "--topology", topo, "--name", "b0")
	require.NoError(t, err)
	assert.Equal(t, brk.Predicates, local.Predicates)
	assert.Equal(t, brk.Messages, local.Messages)

	shown := newBrokerCmd().Flags().Lookup("max-string").DefValue
	assert.Equal(t, shown, strconv.Itoa(local.Predicates.MaxString), "drip local's predicate strings")
	assert.Equal(t, shown, strconv.Itoa(local.Messages.MaxString), "drip local's message strings")
}

func TestLocalPrintTopology(t *testing.T) {
	out, _, err := execute(context.Background(), "", "local", "--print-topology")
	require.NoError(t, err)
	assert.Contains(t, out, "mesh: local")
}

// TestPeerEndpointSlicesOutsideAPod: the flag needs the pod's service
// account, and says so instead of quietly falling back to DNS; the netem
// sidecar takes the same flag.
func TestPeerEndpointSlicesOutsideAPod(t *testing.T) {
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	_, _, err := execute(t.Context(), "", "broker", "--name", "b0", "--client-addr", "127.0.0.1:0", "--peer-addr", "127.0.0.1:0",
		"--metrics-addr", "", "--peer-endpointslices", "drip-headless")
	require.ErrorContains(t, err, "--peer-endpointslices=drip-headless: not in a Kubernetes pod")
	netemCmd, _, err := NewRoot().Find([]string{"netem"})
	require.NoError(t, err)
	require.NotNil(t, netemCmd.Flags().Lookup("peer-endpointslices"))
}

// Clients may have their own issuer: the client listener verifies them
// against it, the peer listener and dialling keep the brokers' CA.
func TestBrokerClientCA(t *testing.T) {
	_, sc, err := brokerConfig(t, "--name", "b0", "--tls-cert", "c.pem", "--tls-key", "k.pem", "--tls-ca", "ca.pem",
		"--tls-client-auth", "--tls-client-ca", "clients.pem")
	require.NoError(t, err)
	assert.Equal(t, "ca.pem", sc.PeerTLS.CAFile)
	assert.True(t, sc.PeerTLS.RequireClientCert)
	assert.Equal(t, "clients.pem", sc.ClientTLS.CAFile)
	assert.True(t, sc.ClientTLS.RequireClientCert)
	assert.False(t, sc.PeerIdentity)
	_, sc, err = brokerConfig(t, "--name", "b0", "--tls-cert", "c.pem", "--tls-key", "k.pem", "--tls-ca", "ca.pem",
		"--tls-client-auth-optional", "--tls-client-ca", "clients.pem")
	require.NoError(t, err)
	assert.Equal(t, "clients.pem", sc.ClientTLS.CAFile)
	assert.False(t, sc.ClientTLS.RequireClientCert)
	assert.True(t, sc.ClientTLS.VerifyClientCertIfGiven)
	assert.True(t, sc.PeerTLS.RequireClientCert, "peers always need a certificate")
	assert.False(t, sc.PeerTLS.VerifyClientCertIfGiven)
	_, sc, err = brokerConfig(t, "--name", "b0", "--tls-cert", "c.pem", "--tls-key", "k.pem", "--tls-ca", "ca.pem", "--tls-peer-identity")
	require.NoError(t, err)
	assert.True(t, sc.PeerIdentity)
}

func TestBrokerAuthzAndMetricsTLSFlags(t *testing.T) {
	_, sc, err := brokerConfig(t, "--name", "b0", "--authz-policy", "../../deploy/authz-policy.example.yaml",
		"--metrics-tls-cert", "m.pem", "--metrics-tls-key", "m-key.pem", "--metrics-tls-client-ca", "scrapers.pem")
	require.NoError(t, err)
	require.NotNil(t, sc.AuthzPolicy)
	assert.Equal(t, "tenant-a", sc.AuthzPolicy.Rules[0].Name)
	assert.Equal(t, broker.TLSFiles{CertFile: "m.pem", KeyFile: "m-key.pem", CAFile: "scrapers.pem", RequireClientCert: true}, sc.MetricsTLS)
	_, sc, err = brokerConfig(t, "--name", "b0")
	require.NoError(t, err)
	assert.Nil(t, sc.AuthzPolicy, "no policy: no authorization")
	assert.False(t, sc.MetricsTLS.Enabled(), "metrics stay plain HTTP by default")

	bad := writeFile(t, "bad.yaml", "rules:\n  - {name: a, client: {any: true}, publish: all}\n")
	_, _, err = brokerConfig(t, "--name", "b0", "--authz-policy", bad)
	assert.ErrorContains(t, err, `rule "a" (line 2): field subscribe: missing`)
}

// TestReloadPolicyOnHangup: each hangup loads the file again; a file that
// no longer parses leaves the previous policy in force.
func TestReloadPolicyOnHangup(t *testing.T) {
	file := writeFile(t, "policy.yaml", "rules:\n  - {name: first, client: {any: true}, publish: all, subscribe: all}\n")
	b, err := broker.New(broker.DefaultConfig(0, "b0"))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	hup := make(chan os.Signal)
	done := make(chan struct{})
	go func() { reloadPolicyOnHangup(ctx, hup, file, b, zap.NewNop()); close(done) }()
	defer func() { cancel(); <-done }()
	rules := func() string {
		// The send returns once the loop took the signal; the next send,
		// once it has installed what the previous one loaded.
		hup <- syscall.SIGHUP
		hup <- syscall.SIGHUP
		if p := b.AuthzPolicy(); p != nil {
			return p.Rules[0].Name
		}
		return ""
	}
	assert.Equal(t, "first", rules())
	require.NoError(t, os.WriteFile(file, []byte("rules:\n  - {name: second, client: {any: true}, publish: all, subscribe: none}\n"), 0o600))
	assert.Equal(t, "second", rules())
	require.NoError(t, os.WriteFile(file, []byte("rules: [oops"), 0o600))
	assert.Equal(t, "second", rules(), "a broken file changes nothing")
}

// TestBrokerPeerNotSentLowat: --peer-notsent-lowat reaches the broker's
// configuration, 16 KiB unless given, 0 to leave the kernel's default.
func TestBrokerPeerNotSentLowat(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want int
	}{
		{nil, 16 << 10},
		{[]string{"--peer-notsent-lowat", "0"}, 0},
		{[]string{"--peer-notsent-lowat", "65536"}, 65536},
	} {
		cfg, _, err := brokerConfig(t, append([]string{"--name", "b0"}, tt.args...)...)
		require.NoError(t, err, "%v", tt.args)
		assert.Equal(t, tt.want, cfg.PeerNotSentLowat, "%v", tt.args)
	}
}

// TestBrokerWarnsWhenOpen: drip broker without TLS says once, at warn
// level, that the mesh is open — and that it listens on every interface —
// and names the flags that close it; with TLS it says nothing of it.
func TestBrokerWarnsWhenOpen(t *testing.T) {
	for _, tc := range []struct {
		name string
		f    brokerFlags
		warn bool
	}{
		{"plaintext, every interface", brokerFlags{peer: ":7100", client: ":7000"}, true},
		{"plaintext, loopback", brokerFlags{peer: "127.0.0.1:7100", client: "127.0.0.1:7000"}, true},
		{"TLS", brokerFlags{peer: ":7100", client: ":7000", tlsCert: "c.pem", tlsKey: "k.pem", tlsCA: "ca.pem"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			core, logs := observer.New(zap.InfoLevel)
			warnOpen(zap.New(core), &tc.f)
			if !tc.warn {
				assert.Zero(t, logs.Len())
				return
			}
			require.Equal(t, 1, logs.Len())
			e := logs.All()[0]
			assert.Equal(t, zap.WarnLevel, e.Level)
			for _, flag := range []string{"--tls-cert", "--tls-ca", "--tls-peer-identity", "--tls-client-auth", "--authz-policy"} {
				assert.Contains(t, e.Message, flag)
			}
			assert.Equal(t, tc.f.peer == ":7100", e.ContextMap()["all_interfaces"])
		})
	}
}
