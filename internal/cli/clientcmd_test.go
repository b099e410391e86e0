package cli

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/dripmesh/drip/client"
	"github.com/dripmesh/drip/internal/bench"
	"github.com/dripmesh/drip/internal/bench/benchtest"
)

// execute runs the drip command tree in-process.
func execute(ctx context.Context, stdin string, args ...string) (stdout, stderr string, err error) {
	root := NewRoot()
	var out, errOut bytes.Buffer
	root.SetIn(strings.NewReader(stdin))
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs(args)
	err = root.ExecuteContext(ctx)
	return out.String(), errOut.String(), err
}

func testMesh(t *testing.T, brokers int, fault benchtest.Fault) *benchtest.Mesh {
	t.Helper()
	m := benchtest.Start(t, brokers, fault)
	return m
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// noLeaks checks at the end of a test that its commands left no goroutine.
func noLeaks(t *testing.T) {
	t.Cleanup(func() { goleak.VerifyNone(t) })
}

// subscribeVia runs drip sub in the background and returns its result once
// it has exited; it returns after the subscription is in place.
func subscribeVia(t *testing.T, ctx context.Context, m *benchtest.Mesh, args ...string) func() (string, string, error) {
	t.Helper()
	type result struct {
		out, errOut string
		err         error
	}
	done := make(chan result, 1)
	root := NewRoot()
	var out bytes.Buffer
	var errOut syncBuffer
	root.SetIn(strings.NewReader(""))
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs(append([]string{"sub"}, args...))
	go func() {
		err := root.ExecuteContext(ctx)
		done <- result{out.String(), errOut.String(), err}
	}()
	// drip sub reports the subscription once its broker acknowledged it.
	for !strings.Contains(errOut.String(), "drip sub: subscription ") {
		select {
		case r := <-done:
			t.Fatalf("drip sub exited early: %v\n%s", r.err, r.errOut)
		case <-time.After(time.Millisecond):
		}
	}
	// The whole mesh learns the subscription before anyone publishes.
	require.NoError(t, m.WaitConverged(ctx))
	return func() (string, string, error) {
		r := <-done
		return r.out, r.errOut, r.err
	}
}

// syncBuffer is a bytes.Buffer a test reads while a command writes it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

func decodeLines(t *testing.T, out string) []map[string]any {
	t.Helper()
	var lines []map[string]any
	for _, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		if l == "" {
			continue
		}
		dec := json.NewDecoder(strings.NewReader(l))
		dec.UseNumber()
		var m map[string]any
		require.NoError(t, dec.Decode(&m), "line %q", l)
		lines = append(lines, m)
	}
	return lines
}

func TestPubAttrsToSub(t *testing.T) {
	noLeaks(t)
	m := testMesh(t, 2, benchtest.Fault{})
	ctx := testCtx(t)
	wait := subscribeVia(t, ctx, m, "--broker", m.Addrs()[1], "--count", "3", `agency = "AP" && priority >= 2`)

	_, errOut, err := execute(ctx, "", "pub", "--broker", m.Addrs()[0],
		"--attr", "agency=AP", "-a", "priority=2", "-a", "score=0.5", "-a", `title="storm warning"`,
		"--payload", "body", "--count", "3", "--rate", "1000/s")
	require.NoError(t, err)
	assert.Contains(t, errOut, "drip pub: published 3 messages to "+m.Addrs()[0])
	assert.Contains(t, errOut, "the broker accepted 3, 0 matched no subscriber")

	out, subErr, err := wait()
	require.NoError(t, err)
	assert.Contains(t, subErr, `agency = "AP" && priority >= 2`)
	assert.Contains(t, subErr, "received 3 messages, 0 lost")
	lines := decodeLines(t, out)
	require.Len(t, lines, 3)
	for _, l := range lines {
		assert.Equal(t, map[string]any{"agency": "AP", "priority": json.Number("2"), "score": json.Number("0.5"), "title": "storm warning"}, l["attrs"])
		assert.Equal(t, "body", l["payload"])
		assert.Equal(t, json.Number("0"), l["ingress"])
		assert.Equal(t, json.Number("1"), l["hops"])
		assert.Contains(t, l, "latency_ms")
	}
}

func TestPubJSONLines(t *testing.T) {
	noLeaks(t)
	m := testMesh(t, 1, benchtest.Fault{})
	ctx := testCtx(t)
	c, err := client.Dial(ctx, m.Addrs()[0])
	require.NoError(t, err)
	defer c.Close()
	sub, err := c.Subscribe(ctx, `n exists`)
	require.NoError(t, err)
	defer sub.Close()

	stdin := `{"attrs":{"n":1,"f":2.0,"s":"x","b":true},"payload":"one"}

{"attrs":{"n":2},"payload_b64":"AP8="}
{"attrs":{"other":3}}
`
	_, errOut, err := execute(ctx, stdin, "pub", "--broker", m.Addrs()[0])
	require.NoError(t, err)
	assert.Contains(t, errOut, "published 3 messages")
	assert.Contains(t, errOut, "the broker accepted 3, 1 matched no subscriber")

	d, err := sub.Next(ctx)
	require.NoError(t, err)
	assert.Equal(t, client.Attrs{"n": int64(1), "f": 2.0, "s": "x", "b": true}, d.Attrs)
	assert.Equal(t, "one", string(d.Payload))
	d, err = sub.Next(ctx)
	require.NoError(t, err)
	assert.Equal(t, []byte{0, 0xff}, d.Payload)
}

func TestPubErrors(t *testing.T) {
	noLeaks(t)
	m := testMesh(t, 1, benchtest.Fault{})
	addr := m.Addrs()[0]
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	closed := lis.Addr().String()
	require.NoError(t, lis.Close())
	tests := []struct {
		name  string
		stdin string
		args  []string
		want  string
	}{
		{"no broker", "", []string{"-a", "a=1"}, `required flag(s) "broker" not set`},
		{"payload without attr", "", []string{"--broker", addr, "--payload", "x"}, "--payload needs --attr"},
		{"count without attr", "", []string{"--broker", addr, "--count", "2"}, "--count needs --attr"},
		{"negative count", "", []string{"--broker", addr, "-a", "a=1", "--count", "-1"}, "--count -1"},
		{"bad attr", "", []string{"--broker", addr, "-a", "n=3x"}, `--attr n=3x: attribute "n": at byte 1`},
		{"duplicate attr", "", []string{"--broker", addr, "-a", "n=1", "-a", "n=2"}, `attribute "n" given twice`},
		{"bad rate", "", []string{"--broker", addr, "-a", "n=1", "--rate", "fast"}, "want messages per second"},
		{"argument", "", []string{"--broker", addr, "a=1"}, `unknown command "a=1"`},
		{"bad JSON line", "{\"attrs\":{\"n\":1}}\n\n{\"attrs\":{\"n\":null}}\n", []string{"--broker", addr}, `standard input line 3: attrs: attribute "n": null is not a value`},
		{"unreachable", "", []string{"--broker", closed, "-a", "a=1"}, "connecting to broker " + closed},
		{"broker rejects", "", []string{"--broker", addr, "-a", "a=1", "--payload", strings.Repeat("x", 2<<20)}, "InvalidArgument desc = message 0: message payload is 2097152 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := execute(testCtx(t), tt.stdin, append([]string{"pub"}, tt.args...)...)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
	// A bad line stops publishing, after reporting what went before it.
	before := m.Published()
	_, errOut, err := execute(testCtx(t), "{\"attrs\":{\"n\":1}}\n{bad\n", "pub", "--broker", addr)
	require.Error(t, err)
	assert.Contains(t, errOut, "published 1 message to")
	assert.Equal(t, before+1, m.Published())
}

func TestPubInterrupted(t *testing.T) {
	noLeaks(t)
	m := testMesh(t, 1, benchtest.Fault{})
	ctx, cancel := context.WithCancel(testCtx(t))
	go func() {
		for m.Published() < 5 {
			time.Sleep(time.Millisecond)
		}
		cancel() // what SIGINT does
	}()
	_, errOut, err := execute(ctx, "", "pub", "--broker", m.Addrs()[0], "-a", "a=1", "--count", "0", "--rate", "200")
	require.NoError(t, err)
	assert.Contains(t, errOut, "drip pub: interrupted after publishing")
}

func TestSub(t *testing.T) {
	noLeaks(t)
	m := testMesh(t, 1, benchtest.Fault{})
	addr := m.Addrs()[0]

	t.Run("interrupted", func(t *testing.T) {
		ctx, cancel := context.WithCancel(testCtx(t))
		wait := subscribeVia(t, ctx, m, "--broker", addr, `a = 1`)
		cancel() // what SIGINT does
		out, errOut, err := wait()
		require.NoError(t, err, "SIGINT ends drip sub cleanly")
		// The interruption may come before the acknowledgement reaches drip sub.
		assert.Regexp(t, `received 0 messages, 0 lost|interrupted before the subscription was in place`, errOut)
		assert.Empty(t, out)
	})
	t.Run("binary payload", func(t *testing.T) {
		wait := subscribeVia(t, testCtx(t), m, "--broker", addr, "--count", "1", `a = 1`)
		c, err := client.Dial(testCtx(t), addr)
		require.NoError(t, err)
		defer c.Close()
		_, err = c.Publish(testCtx(t), client.Message{Attrs: client.Attrs{"a": 1}, Payload: []byte{0xff}})
		require.NoError(t, err)
		out, _, err := wait()
		require.NoError(t, err)
		lines := decodeLines(t, out)
		require.Len(t, lines, 1)
		assert.Equal(t, "/w==", lines[0]["payload_b64"], "a payload that is not UTF-8 is printed in base64")
		assert.NotContains(t, lines[0], "payload")
	})
	t.Run("errors", func(t *testing.T) {
		tests := []struct {
			args []string
			want string
		}{
			{[]string{"--broker", addr}, "want one argument, the predicate"},
			{[]string{"--broker", addr, "a = 1", "b = 2"}, "got 2"},
			{[]string{"a = 1"}, `required flag(s) "broker" not set`},
			{[]string{"--broker", addr, "a = "}, "predicate: at byte 4: expected a value"},
			{[]string{"--broker", addr, "--count", "-2", "a = 1"}, "--count -2"},
		}
		for _, tt := range tests {
			_, _, err := execute(testCtx(t), "", append([]string{"sub"}, tt.args...)...)
			require.Error(t, err, "%v", tt.args)
			assert.Contains(t, err.Error(), tt.want)
		}
	})
	t.Run("broker goes away", func(t *testing.T) {
		m2 := testMesh(t, 1, benchtest.Fault{})
		wait := subscribeVia(t, testCtx(t), m2, "--broker", m2.Addrs()[0], "--failover-wait", "300ms", `a = 1`)
		m2.KillAll()
		_, _, err := wait()
		require.Error(t, err)
		assert.Contains(t, err.Error(), "no broker reachable since")
	})
}

func TestBenchCommand(t *testing.T) {
	noLeaks(t)
	m := testMesh(t, 2, benchtest.Fault{})
	report := filepath.Join(t.TempDir(), "report.json")
	out, errOut, err := execute(testCtx(t), "", "bench", "--broker", strings.Join(m.Addrs(), ","),
		"--workload", "single", "--names", "40", "--subscribers", "10", "--publishers", "2",
		"--mode", "ramp", "--rate-start", "100", "--rate", "400", "--duration", "1200ms",
		// A real mesh: the warm-up is the time subscriptions take to be
		// known at the other broker.
		"--warmup", "1s", "--settle", "10ms", "--report", report)
	require.NoError(t, err, errOut)
	// Which second the first line reports depends on the machine's load.
	assert.Regexp(t, `(?m)^bench: +\d+s  sent +\d+/s`, errOut, "a progress line per second")
	assert.Contains(t, out, "false positives 0, duplicates 0", "the summary on standard output")
	assert.Regexp(t, `^drip bench: sent \d+ messages, \d+ deliveries expected`, out)

	b, err := os.ReadFile(report)
	require.NoError(t, err)
	var rep bench.Report
	require.NoError(t, json.Unmarshal(b, &rep))
	assert.Equal(t, m.Addrs(), rep.Config.Brokers)
	assert.Equal(t, bench.Ramp, rep.Config.Mode)
	assert.Equal(t, 40, rep.Config.Workload.Names)
	assert.Equal(t, 100.0, rep.Config.RateStart)
	assert.Positive(t, rep.Totals.Sent)
	assert.Equal(t, rep.Totals.Ideal, rep.Totals.Delivered)
	assert.True(t, rep.Exact())
	assert.GreaterOrEqual(t, len(rep.Series), 2)
}

func TestBenchCommandReportsInexactMesh(t *testing.T) {
	noLeaks(t)
	m := testMesh(t, 1, benchtest.Fault{DuplicateEvery: 2})
	out, _, err := execute(testCtx(t), "", "bench", "--broker", m.Addrs()[0], "-q", "--json",
		"--names", "40", "--subscribers", "10", "--publishers", "2", "--rate", "300", "--duration", "300ms",
		"--warmup", "10ms", "--settle", "300ms")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "exactness violated: 0 false positives")
	var rep bench.Report
	require.NoError(t, json.Unmarshal([]byte(out), &rep), "the report is still written")
	assert.Positive(t, rep.Totals.Duplicates)
}

func TestBenchCommandErrors(t *testing.T) {
	noLeaks(t)
	tests := []struct {
		args []string
		want string
	}{
		{[]string{}, `required flag(s) "broker" not set`},
		{[]string{"--broker", "127.0.0.1:1", "--workload", "heavy"}, `--workload: unknown workload "heavy"`},
		{[]string{"--broker", "127.0.0.1:1", "--mode", "burst"}, `unknown mode "burst"`},
		{[]string{"--broker", "127.0.0.1:1", "--rate-start", "5"}, "--rate-start applies to --mode ramp only"},
		{[]string{"--broker", "127.0.0.1:1", "--names", "5"}, "AttrsPerMessage = 10 exceeds Names = 5"},
		{[]string{"--broker", "127.0.0.1:1", "--subscribers", "0"}, "0 subscribers"},
		{[]string{"--broker", "127.0.0.1:1", "--report", "/nonexistent/dir/r.json"}, "--report: open /nonexistent/dir/r.json"},
		{[]string{"--broker", "127.0.0.1:1", "--tls-ca", "/nonexistent.pem"}, "--tls-ca: open /nonexistent.pem"},
		{[]string{"--broker", "127.0.0.1:1", "--duration", "1s", "--warmup", "0s"}, "connecting to broker 127.0.0.1:1"},
	}
	for _, tt := range tests {
		_, _, err := execute(testCtx(t), "", append([]string{"bench", "-q"}, tt.args...)...)
		require.Error(t, err, "%v", tt.args)
		assert.Contains(t, err.Error(), tt.want, "%v", tt.args)
	}
}

func TestTLSFlags(t *testing.T) {
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "ca.pem")
	require.NoError(t, os.WriteFile(notPEM, []byte("not a certificate"), 0o600))
	f := connFlags{tlsCA: notPEM}
	_, err := f.options()
	assert.ErrorContains(t, err, "no PEM certificate found")
	f = connFlags{}
	opts, err := f.options()
	require.NoError(t, err)
	assert.Len(t, opts, 3, "plaintext: the name and congestion control")
	f = connFlags{tls: true}
	opts, err = f.options()
	require.NoError(t, err)
	assert.Len(t, opts, 4, "TLS added")

	// A client certificate, for brokers that require one.
	f = connFlags{tlsCert: notPEM}
	_, err = f.options()
	assert.ErrorContains(t, err, "--tls-cert and --tls-key go together")
	f = connFlags{tlsCert: notPEM, tlsKey: notPEM}
	_, err = f.options()
	assert.ErrorContains(t, err, "--tls-cert/--tls-key: tls: failed to find any PEM data in certificate input")
	certFile, keyFile := selfSigned(t, dir)
	f = connFlags{tlsCert: certFile, tlsKey: keyFile}
	opts, err = f.options()
	require.NoError(t, err)
	assert.Len(t, opts, 4, "TLS with the client's certificate, verifying brokers against the system roots")
}

func TestTokenFlags(t *testing.T) {
	env := func(v string) func(string) string {
		return func(k string) string {
			if k == tokenEnv {
				return v
			}
			return ""
		}
	}
	for _, tc := range []struct {
		name string
		f    connFlags
		opts int
		err  string
	}{
		{"flag without TLS", connFlags{token: "t"}, 0, "a token (--token or $DRIP_TOKEN) needs --tls or --tls-ca"},
		{"environment without TLS", connFlags{getenv: env("t")}, 0, "needs --tls"},
		{"flag over TLS", connFlags{token: "t", tls: true}, 5, ""},
		{"environment over TLS", connFlags{getenv: env("t"), tls: true}, 5, ""},
		{"plaintext allowed", connFlags{token: "t", tokenPlaintext: true}, 5, ""},
		{"no token", connFlags{getenv: env("")}, 3, ""},
		{"certificate without key", connFlags{tlsCert: "c.pem"}, 0, "--tls-cert and --tls-key go together"},
		{"missing certificate", connFlags{tlsCert: "/nonexistent/c.pem", tlsKey: "/nonexistent/k.pem", token: "t"}, 0, "--tls-cert/--tls-key: open /nonexistent/c.pem"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts, err := tc.f.options()
			if tc.err != "" {
				assert.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			assert.Len(t, opts, tc.opts)
		})
	}
}

// Shell completion is cobra's default command, and flags with a fixed set of
// values complete them.
func TestCompletion(t *testing.T) {
	for _, shell := range []string{"bash", "zsh", "fish", "powershell"} {
		out, _, err := execute(testCtx(t), "", "completion", shell)
		require.NoError(t, err, shell)
		assert.Contains(t, out, "drip", shell)
	}
	out, _, err := execute(testCtx(t), "", "__complete", "bench", "--mode", "")
	require.NoError(t, err)
	assert.Equal(t, []string{"constant", "poisson", "ramp", ":4"}, strings.Fields(out)[:4])
	out, _, err = execute(testCtx(t), "", "__complete", "")
	require.NoError(t, err)
	for _, c := range []string{"broker", "local", "pub", "sub", "bench", "version"} {
		assert.Contains(t, out, c+"\t")
	}
}

// TestBenchSummaryShowsCongestionControl: the summary says what congestion
// control did when it did anything, and nothing otherwise.
func TestBenchSummaryShowsCongestionControl(t *testing.T) {
	var quiet, busy bytes.Buffer
	printBenchSummary(&quiet, &bench.Report{})
	assert.NotContains(t, quiet.String(), "congestion")
	rep := &bench.Report{}
	rep.Totals.CongestionLossEvents, rep.Totals.CongestionFeedback = 3, 12
	rep.Totals.CongestionControlled, rep.Totals.CongestionHeld, rep.Totals.CongestionWaitedMs = 400, 150, 2500
	printBenchSummary(&busy, rep)
	assert.Contains(t, busy.String(), "congestion control: 3 loss events seen, 12 feedback messages taken, 400 messages in limited flows, 150 held (2500 ms in all)")
}

func TestSubWithDeadline(t *testing.T) {
	// --deadline and --two-paths reach the broker; each delivery says how
	// long the mesh took (mesh_ms), and the summary counts the deliveries
	// later than the deadline: all of them at 1ns, none with pub's own.
	noLeaks(t)
	m := testMesh(t, 2, benchtest.Fault{})
	ctx := testCtx(t)
	wait := subscribeVia(t, ctx, m, "--broker", m.Addrs()[1], "--count", "2", "--deadline", "1ns", "--two-paths", `n >= 0`)
	_, _, err := execute(ctx, "", "pub", "--broker", m.Addrs()[0], "-a", "n=1", "--count", "2", "--deadline", "5s")
	require.NoError(t, err)
	out, subErr, err := wait()
	require.NoError(t, err)
	assert.Contains(t, subErr, "received 2 messages, 0 lost, 2 later than the 1ns deadline")
	for _, l := range decodeLines(t, out) {
		assert.Contains(t, l, "mesh_ms")
	}

	_, _, err = execute(ctx, "", "sub", "--broker", m.Addrs()[1], "--deadline", "2h", `n >= 0`)
	require.ErrorContains(t, err, "--deadline 2h0m0s: want 0 (none) or a duration up to 1h")
	_, _, err = execute(ctx, "", "pub", "--broker", m.Addrs()[1], "-a", "n=1", "--deadline", "-1s")
	require.ErrorContains(t, err, "--deadline -1s: want 0 (none) or a duration up to 1h")
}

// selfSigned writes a self-signed certificate and its key into dir.
func selfSigned(t *testing.T, dir string) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "client"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	keyDER, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	certFile, keyFile = filepath.Join(dir, "client.crt"), filepath.Join(dir, "client.key")
	require.NoError(t, os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600))
	require.NoError(t, os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600))
	return certFile, keyFile
}
