package broker_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	rpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"

	dripv1 "github.com/dripmesh/drip/api/proto/drip/v1"
	"github.com/dripmesh/drip/client"
	"github.com/dripmesh/drip/internal/authz"
	"github.com/dripmesh/drip/internal/broker"
	"github.com/dripmesh/drip/internal/clientapi"
	"github.com/dripmesh/drip/internal/content"
)

// testPolicy: two tenants, one by certificate and one by token, and an
// operator who may do anything.
var testPolicy = `
rules:
  - {name: tenant-a, client: {common_name: tenant-a}, publish: 'tenant = "a"', subscribe: 'tenant = "a"'}
  - {name: tenant-b, client: {token_sha256: ` + authz.TokenHash("b-token") + `}, publish: 'tenant = "b"', subscribe: 'tenant = "b"'}
  - {name: ops, client: {common_name: ops}, publish: all, subscribe: all}
`

// Client certificate modes of the client port.
const (
	noClientCerts = iota
	requireClientCerts
	optionalClientCerts
)

// authzBroker runs one broker with the test policy on a TLS client port
// whose clients present certificates as certs says.
type authzBroker struct {
	srv  *broker.Server
	pki  *testPKI
	pool *x509.CertPool
}

func startAuthzBroker(t *testing.T, certs int, sc broker.ServerConfig) *authzBroker {
	t.Helper()
	pki := newTestPKI(t)
	cert, key := pki.issue(t, "b0")
	policy, err := authz.Parse("test.yaml", []byte(testPolicy))
	require.NoError(t, err)
	lis := [2]net.Listener{}
	for i := range lis {
		lis[i], err = net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
	}
	sc.ClientListener, sc.PeerListener, sc.StopTimeout = lis[0], lis[1], time.Second
	sc.ClientTLS = broker.TLSFiles{CertFile: cert, KeyFile: key, CAFile: pki.caFile,
		RequireClientCert: certs == requireClientCerts, VerifyClientCertIfGiven: certs == optionalClientCerts}
	sc.AuthzPolicy = policy
	srv, err := broker.NewServer(fastConfig(0), sc)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	t.Cleanup(func() { cancel(); require.NoError(t, <-done) })
	pool := x509.NewCertPool()
	pool.AddCert(pki.ca)
	return &authzBroker{srv: srv, pki: pki, pool: pool}
}

// tlsAs is a client TLS configuration with a certificate for cn ("" none).
func (a *authzBroker) tlsAs(t *testing.T, cn string) *tls.Config {
	cfg := &tls.Config{RootCAs: a.pool, MinVersion: tls.VersionTLS12}
	if cn != "" {
		certFile, keyFile := a.pki.issueFor(t, cn, x509.ExtKeyUsageClientAuth)
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		require.NoError(t, err)
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg
}

func (a *authzBroker) dial(t *testing.T, ctx context.Context, opts ...client.Option) *client.Client {
	t.Helper()
	c, err := client.Dial(ctx, a.srv.ClientAddr(), opts...)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

func (a *authzBroker) denied(t *testing.T, op string) float64 {
	t.Helper()
	families, err := a.srv.Registry().Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() != "drip_authz_denied_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			if m.GetLabel()[0].GetValue() == op {
				return m.GetCounter().GetValue()
			}
		}
	}
	t.Fatalf("no drip_authz_denied_total{op=%q}", op)
	return 0
}

func tenantMsg(tenant string, seq int) client.Message {
	return client.Message{Attrs: client.Attrs{"tenant": tenant, "seq": seq}}
}

// nextTenant is the tenant of s's next delivery.
func nextTenant(t *testing.T, ctx context.Context, s *client.Subscription) (string, int64) {
	t.Helper()
	d, err := s.Next(ctx)
	require.NoError(t, err)
	seq, _ := d.Attrs["seq"].(int64)
	tenant, _ := d.Attrs["tenant"].(string)
	return tenant, seq
}

// TestAuthzPublishOutsideRule: a tenant's batch holding one message outside
// its rule is PermissionDenied naming the rule, and nothing of the batch
// reaches a subscriber who may see everything.
func TestAuthzPublishOutsideRule(t *testing.T) {
	a := startAuthzBroker(t, requireClientCerts, broker.ServerConfig{})
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	ops := a.dial(t, ctx, client.WithTLS(a.tlsAs(t, "ops")))
	sub, err := ops.Subscribe(ctx, `tenant exists`)
	require.NoError(t, err)
	defer sub.Close()

	// A batch in one request: tenant a's own message first, tenant b's after.
	cc, err := grpc.NewClient(a.srv.ClientAddr(), grpc.WithTransportCredentials(credentials.NewTLS(a.tlsAs(t, "tenant-a"))))
	require.NoError(t, err)
	defer cc.Close()
	stream, err := dripv1.NewBrokerClient(cc).PublishStream(ctx)
	require.NoError(t, err)
	msg := func(tenant string) *dripv1.Message {
		return clientapi.MessageToProto(content.MessageFrom(map[string]content.Value{"tenant": content.String(tenant)}))
	}
	require.NoError(t, stream.Send(&dripv1.PublishRequest{Message: msg("a"), Batch: []*dripv1.Message{msg("a"), msg("b")}}))
	_, err = stream.Recv()
	require.Equal(t, codes.PermissionDenied, status.Code(err), "%v", err)
	assert.Contains(t, status.Convert(err).Message(), `message 2 is outside what authorization rule "tenant-a" allows to publish (tenant = "a"); nothing of its request was published`)
	assert.Equal(t, 1.0, a.denied(t, "publish"))

	// The client library reports the same and publishes what is inside.
	ta := a.dial(t, ctx, client.WithTLS(a.tlsAs(t, "tenant-a")))
	_, err = ta.Publish(ctx, tenantMsg("b", 1))
	require.Equal(t, codes.PermissionDenied, status.Code(err), "%v", err)
	assert.Contains(t, err.Error(), `authorization rule "tenant-a"`)
	_, err = ta.Publish(ctx, tenantMsg("a", 2))
	require.NoError(t, err)
	tenant, seq := nextTenant(t, ctx, sub)
	assert.Equal(t, "a", tenant)
	assert.Equal(t, int64(2), seq, "the first delivery is the allowed message: nothing of the refused ones arrived")
}

// TestAuthzSubscriptionNarrowedToRule: a tenant subscribing to everything
// receives only its rule's messages, also after replacing its predicate.
func TestAuthzSubscriptionNarrowedToRule(t *testing.T) {
	a := startAuthzBroker(t, requireClientCerts, broker.ServerConfig{})
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	ta := a.dial(t, ctx, client.WithTLS(a.tlsAs(t, "tenant-a")))
	sub, err := ta.Subscribe(ctx, `seq exists`)
	require.NoError(t, err)
	defer sub.Close()
	ops := a.dial(t, ctx, client.WithTLS(a.tlsAs(t, "ops")))
	var msgs []client.Message
	for i := range 20 {
		msgs = append(msgs, tenantMsg([]string{"a", "b", "c"}[i%3], i))
	}
	_, err = ops.Publish(ctx, msgs...)
	require.NoError(t, err)
	for want := 0; want < 20; want += 3 {
		tenant, seq := nextTenant(t, ctx, sub)
		require.Equal(t, "a", tenant)
		require.Equal(t, int64(want), seq)
	}

	// A replaced predicate is narrowed as well.
	require.NoError(t, sub.Update(`tenant != "x"`))
	require.Eventually(t, func() bool {
		_, err := ops.Publish(ctx, tenantMsg("b", 100), tenantMsg("a", 101))
		require.NoError(t, err)
		tenant, seq := nextTenant(t, ctx, sub)
		require.Equal(t, "a", tenant, "seq %d", seq)
		return seq == 101
	}, 10*time.Second, 10*time.Millisecond)
}

// TestAuthzToken: a token client is matched by its token's hash; a client
// with none, or another, matches no rule; the client refuses to send a
// token over plaintext.
func TestAuthzToken(t *testing.T) {
	a := startAuthzBroker(t, noClientCerts, broker.ServerConfig{})
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	tb := a.dial(t, ctx, client.WithTLS(a.tlsAs(t, "")), client.WithToken("b-token"))
	sub, err := tb.Subscribe(ctx, `seq exists`)
	require.NoError(t, err)
	defer sub.Close()
	_, err = tb.Publish(ctx, tenantMsg("a", 1))
	require.Equal(t, codes.PermissionDenied, status.Code(err), "%v", err)
	assert.Contains(t, err.Error(), `authorization rule "tenant-b"`)
	_, err = tb.Publish(ctx, tenantMsg("b", 2))
	require.NoError(t, err)
	tenant, seq := nextTenant(t, ctx, sub)
	assert.Equal(t, "b", tenant)
	assert.Equal(t, int64(2), seq)

	for name, opts := range map[string][]client.Option{
		"no token":    {client.WithTLS(a.tlsAs(t, ""))},
		"wrong token": {client.WithTLS(a.tlsAs(t, "")), client.WithToken("a-token")},
	} {
		t.Run(name, func(t *testing.T) {
			c := a.dial(t, ctx, opts...)
			before := a.denied(t, "subscribe")
			_, err := c.Subscribe(ctx, `seq exists`)
			require.Equal(t, codes.PermissionDenied, status.Code(err), "%v", err)
			assert.Contains(t, err.Error(), "no authorization rule matches")
			assert.Equal(t, before+1, a.denied(t, "subscribe"))
			_, err = c.Publish(ctx, tenantMsg("b", 3))
			require.Equal(t, codes.PermissionDenied, status.Code(err), "%v", err)
		})
	}

	_, err = client.Dial(ctx, a.srv.ClientAddr(), client.WithToken("b-token"))
	assert.ErrorContains(t, err, "WithToken needs WithTLS")
}

// TestMetricsOverTLS: with a client CA the metrics listener answers only
// clients that present a certificate it signed.
func TestMetricsOverTLS(t *testing.T) {
	pki := newTestPKI(t)
	cert, key := pki.issue(t, "metrics")
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	a := startAuthzBroker(t, noClientCerts, broker.ServerConfig{MetricsListener: lis, Pprof: true,
		MetricsTLS: broker.TLSFiles{CertFile: cert, KeyFile: key, CAFile: pki.caFile, RequireClientCert: true}})
	pool := x509.NewCertPool()
	pool.AddCert(pki.ca)
	get := func(cfg *tls.Config, scheme, path string) (string, error) {
		hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg}}
		defer hc.CloseIdleConnections()
		resp, err := hc.Get(scheme + "://" + a.srv.MetricsAddr() + path)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return string(b), err
	}
	_, err = get(&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, "https", "/metrics")
	assert.Error(t, err, "no client certificate")
	body, err := get(nil, "http", "/metrics")
	if err == nil {
		assert.Contains(t, body, "Client sent an HTTP request to an HTTPS server", "plain HTTP")
	}
	_, err = get(&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, "https", "/debug/pprof/")
	assert.Error(t, err, "pprof sits behind the same certificate")

	certFile, keyFile := pki.issueFor(t, "prometheus", x509.ExtKeyUsageClientAuth)
	scraper, err := tls.LoadX509KeyPair(certFile, keyFile)
	require.NoError(t, err)
	body, err = get(&tls.Config{RootCAs: pool, Certificates: []tls.Certificate{scraper}, MinVersion: tls.VersionTLS12}, "https", "/metrics")
	require.NoError(t, err)
	assert.Contains(t, body, `drip_authz_denied_total{op="publish"} 0`)

	// A certificate from the client port's CA is not the metrics CA's.
	other := a.tlsAs(t, "ops")
	other.RootCAs = pool
	_, err = get(other, "https", "/metrics")
	assert.Error(t, err)

	_, err = broker.NewServer(fastConfig(1), broker.ServerConfig{ClientAddr: "127.0.0.1:0", PeerAddr: "127.0.0.1:0",
		MetricsTLS: broker.TLSFiles{CAFile: pki.caFile, RequireClientCert: true}})
	assert.ErrorContains(t, err, "metrics TLS: requiring client certificates needs a certificate")
}

// TestNoReflectionOnThePeerPort: clients may browse the client port's
// services; the peer port offers no reflection (peers need none, and it
// would map the peer API for an attacker).
func TestNoReflectionOnThePeerPort(t *testing.T) {
	m := startMesh(t, 1, nil, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	list := func(addr string) ([]string, error) {
		cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		require.NoError(t, err)
		defer cc.Close()
		stream, err := rpb.NewServerReflectionClient(cc).ServerReflectionInfo(ctx)
		if err != nil {
			return nil, err
		}
		if err := stream.Send(&rpb.ServerReflectionRequest{MessageRequest: &rpb.ServerReflectionRequest_ListServices{}}); err != nil {
			return nil, err
		}
		resp, err := stream.Recv()
		if err != nil {
			return nil, err
		}
		var names []string
		for _, s := range resp.GetListServicesResponse().GetService() {
			names = append(names, s.GetName())
		}
		return names, nil
	}
	names, err := list(m.nodes[0].srv.ClientAddr())
	require.NoError(t, err)
	assert.Contains(t, strings.Join(names, " "), "drip.v1.Broker")
	_, err = list(m.nodes[0].srv.PeerAddr())
	require.Equal(t, codes.Unimplemented, status.Code(err), "%v", err)
}

// TestAuthzPolicyOverLimits: a rule whose subscribe predicate alone breaks
// the broker's predicate limits could never admit a subscription, so the
// broker refuses it at start-up and on reload; a conjunction over them is
// InvalidArgument naming the rule.
func TestAuthzPolicyOverLimits(t *testing.T) {
	policy, err := authz.Parse("p.yaml", []byte("rules:\n  - {name: wide, client: {any: true}, publish: all, subscribe: 'a = 1 || b = 2'}\n"))
	require.NoError(t, err)
	cfg := fastConfig(0)
	cfg.Predicates.MaxFilters = 1
	_, err = broker.NewServer(cfg, broker.ServerConfig{ClientAddr: "127.0.0.1:0", PeerAddr: "127.0.0.1:0", AuthzPolicy: policy})
	assert.ErrorContains(t, err, `rule "wide" (line 2): field subscribe: 2 filters, over the broker's limit of 1`)

	m := startMesh(t, 1, nil, func(c *broker.Config) { c.Predicates.MaxFilters = 3 })
	require.NoError(t, m.nodes[0].srv.Broker().SetAuthzPolicy(policy))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, m.nodes[0].srv.ClientAddr(), client.WithCongestionControl(false))
	require.NoError(t, err)
	defer c.Close()
	_, err = c.Subscribe(ctx, `x = 1 || y = 2`)
	require.Equal(t, codes.InvalidArgument, status.Code(err), "%v", err)
	assert.Contains(t, err.Error(), `the predicate's 2 filters joined with the 2 of authorization rule "wide" make 4, over the limit of 3 filters`)
	sub, err := c.Subscribe(ctx, `x = 1`)
	require.NoError(t, err, "one filter joined with two fits")
	sub.Close()
}

// TestBatchWithInvalidMessagePublishesThoseBefore: without a policy a
// batch is still published up to its first invalid message, which is
// InvalidArgument naming its index on the stream (the request is decoded
// whole before anything is published, for authorization's sake; that must
// not change what an invalid message does).
func TestBatchWithInvalidMessagePublishesThoseBefore(t *testing.T) {
	m := startMesh(t, 1, nil, func(c *broker.Config) { c.Messages.MaxAttributes = 2 })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, m.nodes[0].srv.ClientAddr())
	require.NoError(t, err)
	defer c.Close()
	sub, err := c.Subscribe(ctx, `seq exists`)
	require.NoError(t, err)
	defer sub.Close()
	msg := func(seq int64, extra ...string) *dripv1.Message {
		attrs := map[string]content.Value{"seq": content.Int(seq)}
		for _, e := range extra {
			attrs[e] = content.Int(0)
		}
		return clientapi.MessageToProto(content.MessageFrom(attrs))
	}
	stream, err := dripv1.NewBrokerClient(m.clients[0]).PublishStream(ctx)
	require.NoError(t, err)
	require.NoError(t, stream.Send(&dripv1.PublishRequest{Message: msg(0), Batch: []*dripv1.Message{msg(1), msg(2, "x", "y"), msg(3)}}))
	_, err = stream.Recv()
	require.Equal(t, codes.InvalidArgument, status.Code(err), "%v", err)
	assert.Contains(t, status.Convert(err).Message(), "message 2: message has 3 attributes, over the limit of 2")
	for want := range int64(2) {
		d, err := sub.Next(ctx)
		require.NoError(t, err)
		assert.Equal(t, want, d.Attrs["seq"])
	}
	_, err = c.Publish(ctx, client.Message{Attrs: client.Attrs{"seq": 9}})
	require.NoError(t, err)
	d, err := sub.Next(ctx)
	require.NoError(t, err)
	assert.Equal(t, int64(9), d.Attrs["seq"], "nothing after the invalid message was published")
}

// TestAuthzCertificateAndTokenClientsOnOnePort: with client certificates
// optional, a certificate client and a token client share the client port,
// each under its own rule; a certificate the CA did not sign is refused at
// the handshake rather than treated as anonymous.
func TestAuthzCertificateAndTokenClientsOnOnePort(t *testing.T) {
	a := startAuthzBroker(t, optionalClientCerts, broker.ServerConfig{})
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	ta := a.dial(t, ctx, client.WithTLS(a.tlsAs(t, "tenant-a")))
	tb := a.dial(t, ctx, client.WithTLS(a.tlsAs(t, "")), client.WithToken("b-token"))
	for _, tc := range []struct {
		c           *client.Client
		own, others string
		rule        string
	}{{ta, "a", "b", "tenant-a"}, {tb, "b", "a", "tenant-b"}} {
		_, err := tc.c.Publish(ctx, tenantMsg(tc.own, 1))
		require.NoError(t, err, tc.rule)
		_, err = tc.c.Publish(ctx, tenantMsg(tc.others, 2))
		require.Equal(t, codes.PermissionDenied, status.Code(err), "%v", err)
		assert.Contains(t, err.Error(), `authorization rule "`+tc.rule+`"`)
	}

	stranger := newTestPKI(t)
	certFile, keyFile := stranger.issueFor(t, "tenant-a", x509.ExtKeyUsageClientAuth)
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	require.NoError(t, err)
	cfg := a.tlsAs(t, "")
	cfg.Certificates = []tls.Certificate{cert}
	dctx, dcancel := context.WithTimeout(ctx, 2*time.Second)
	defer dcancel()
	if c, err := client.Dial(dctx, a.srv.ClientAddr(), client.WithTLS(cfg), client.WithFailoverWait(time.Second)); err == nil {
		_, err = c.Publish(dctx, tenantMsg("a", 3))
		assert.Error(t, err, "a certificate from another CA must not pass as tenant-a")
		assert.NotEqual(t, codes.OK, status.Code(err))
		c.Close()
	}
}

// TestAuthzTokenOverPlaintext: WithTokenOverPlaintext sends the token
// without TLS (loopback tests), and the broker matches it as over TLS.
func TestAuthzTokenOverPlaintext(t *testing.T) {
	m := startMesh(t, 1, nil, nil)
	policy, err := authz.Parse("test.yaml", []byte(testPolicy))
	require.NoError(t, err)
	require.NoError(t, m.nodes[0].srv.Broker().SetAuthzPolicy(policy))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, m.nodes[0].srv.ClientAddr(), client.WithToken("b-token"), client.WithTokenOverPlaintext())
	require.NoError(t, err)
	defer c.Close()
	_, err = c.Publish(ctx, tenantMsg("b", 1))
	require.NoError(t, err)
	_, err = c.Publish(ctx, tenantMsg("a", 2))
	require.Equal(t, codes.PermissionDenied, status.Code(err), "%v", err)
	assert.Contains(t, err.Error(), `authorization rule "tenant-b"`)
}

// refConstraint and refHolds are a reference evaluator of the predicates
// TestAuthzNarrowingProperty draws: integer attributes a, b, c with =, !=,
// <, > and exists, evaluated without the content package.
type refConstraint struct {
	name, op string
	v        int64
}

func refHolds(p [][]refConstraint, m map[string]int64) bool {
	for _, f := range p {
		all := true
		for _, c := range f {
			v, ok := m[c.name]
			switch {
			case !ok:
				all = false
			case c.op == "=":
				all = all && v == c.v
			case c.op == "!=":
				all = all && v != c.v
			case c.op == "<":
				all = all && v < c.v
			case c.op == ">":
				all = all && v > c.v
			}
		}
		if all {
			return true
		}
	}
	return false
}

func refText(p [][]refConstraint) string {
	var fs []string
	for _, f := range p {
		var cs []string
		for _, c := range f {
			if c.op == "exists" {
				cs = append(cs, c.name+" exists")
			} else {
				cs = append(cs, fmt.Sprintf("%s %s %d", c.name, c.op, c.v))
			}
		}
		fs = append(fs, strings.Join(cs, " && "))
	}
	return strings.Join(fs, " || ")
}

func refRandom(r *rand.Rand) [][]refConstraint {
	ops := []string{"=", "!=", "<", ">", "exists"}
	p := make([][]refConstraint, 1+r.IntN(3))
	for i := range p {
		p[i] = make([]refConstraint, 1+r.IntN(2))
		for j := range p[i] {
			p[i][j] = refConstraint{name: string(rune('a' + r.IntN(3))), op: ops[r.IntN(len(ops))], v: r.Int64N(4)}
		}
	}
	return p
}

// TestAuthzNarrowingProperty: on a real broker, for random rules, random
// subscriptions and random messages, a tenant receives exactly the
// messages that the reference says match both its predicate and its
// rule's — never one outside the rule. Each round ends with a marker
// message both admit, so that "nothing more arrived" is observed, not
// waited for.
func TestAuthzNarrowingProperty(t *testing.T) {
	m := startMesh(t, 1, nil, nil)
	b := m.nodes[0].srv.Broker()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	addr := m.nodes[0].srv.ClientAddr()
	opts := func(token string) []client.Option {
		return []client.Option{client.WithToken(token), client.WithTokenOverPlaintext(), client.WithCongestionControl(false)}
	}
	ops, err := client.Dial(ctx, addr, opts("ops")...)
	require.NoError(t, err)
	defer ops.Close()
	tenant, err := client.Dial(ctx, addr, opts("tenant")...)
	require.NoError(t, err)
	defer tenant.Close()

	r := rand.New(rand.NewPCG(45, 47))
	narrowed := 0 // messages the subscription matches and the rule does not
	for round := range 25 {
		rule, sub := refRandom(r), refRandom(r)
		policy, err := authz.Parse("p.yaml", []byte(fmt.Sprintf(`rules:
  - {name: ops, client: {token_sha256: %s}, publish: all, subscribe: all}
  - {name: tenant, client: {token_sha256: %s}, publish: none, subscribe: '%s || marker exists'}
`, authz.TokenHash("ops"), authz.TokenHash("tenant"), refText(rule))))
		require.NoError(t, err)
		require.NoError(t, b.SetAuthzPolicy(policy))
		s, err := tenant.Subscribe(ctx, refText(sub)+" || marker exists")
		require.NoError(t, err)

		var msgs []client.Message
		var want []int64
		for seq := range int64(40) {
			attrs := client.Attrs{"seq": seq}
			ref := map[string]int64{}
			for _, name := range []string{"a", "b", "c"} {
				if r.IntN(4) > 0 {
					v := r.Int64N(4)
					attrs[name], ref[name] = v, v
				}
			}
			if refHolds(rule, ref) && refHolds(sub, ref) {
				want = append(want, seq)
			} else if refHolds(sub, ref) {
				narrowed++
			}
			msgs = append(msgs, client.Message{Attrs: attrs})
		}
		msgs = append(msgs, client.Message{Attrs: client.Attrs{"marker": true}})
		_, err = ops.Publish(ctx, msgs...)
		require.NoError(t, err)
		var got []int64
		for {
			d, err := s.Next(ctx)
			require.NoError(t, err)
			if _, ok := d.Attrs["marker"]; ok {
				break
			}
			got = append(got, d.Attrs["seq"].(int64))
		}
		require.Equal(t, want, got, "round %d: rule %q, subscription %q", round, refText(rule), refText(sub))
		s.Close()
	}
	assert.Greater(t, narrowed, 100, "the rules must have kept messages from the subscriptions for the test to mean anything")
}

// counterValue is the value of a counter (summed over its series) on a
// server's registry.
func counterValue(t *testing.T, srv *broker.Server, name string) float64 {
	t.Helper()
	families, err := srv.Registry().Gather()
	require.NoError(t, err)
	sum := 0.0
	for _, f := range families {
		if f.GetName() == name {
			for _, m := range f.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

// TestAuthzNarrowsRouting: the narrowed predicate is what a tenant's
// broker advertises, so messages outside the tenant's rule do not even
// travel to it: the publisher's broker routes them nowhere.
func TestAuthzNarrowsRouting(t *testing.T) {
	m := startMesh(t, 2, [][2]int{{0, 1}}, nil)
	policy, err := authz.Parse("p.yaml", []byte(`rules:
  - {name: ops, client: {token_sha256: `+authz.TokenHash("ops")+`}, publish: all, subscribe: all}
  - {name: tenant-a, client: {token_sha256: `+authz.TokenHash("a")+`}, publish: 'tenant = "a"', subscribe: 'tenant = "a"'}
`))
	require.NoError(t, err)
	for _, n := range m.nodes {
		require.NoError(t, n.srv.Broker().SetAuthzPolicy(policy))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	dial := func(i int, token string) *client.Client {
		c, err := client.Dial(ctx, m.nodes[i].srv.ClientAddr(), client.WithToken(token), client.WithTokenOverPlaintext(), client.WithCongestionControl(false))
		require.NoError(t, err)
		t.Cleanup(func() { c.Close() })
		return c
	}
	sub, err := dial(1, "a").Subscribe(ctx, `seq exists`)
	require.NoError(t, err)
	defer sub.Close()
	ops := dial(0, "ops")
	// (waitConverged counts only the mesh helper's own subscriptions.)
	require.Eventually(t, func() bool {
		_, err := ops.Publish(ctx, tenantMsg("a", 0))
		require.NoError(t, err)
		dctx, dcancel := context.WithTimeout(ctx, 200*time.Millisecond)
		defer dcancel()
		_, err = sub.Next(dctx)
		return err == nil
	}, 15*time.Second, 10*time.Millisecond, "b0 never learned b1's subscription")
	for { // drain the probes' duplicates
		dctx, dcancel := context.WithTimeout(ctx, 300*time.Millisecond)
		_, err := sub.Next(dctx)
		dcancel()
		if err != nil {
			break
		}
	}

	unmatched := counterValue(t, m.nodes[0].srv, "drip_unmatched_messages_total")
	received := counterValue(t, m.nodes[1].srv, "drip_link_received_bundles_total")
	var msgs []client.Message
	for i := range 50 {
		msgs = append(msgs, tenantMsg("b", i))
	}
	_, err = ops.Publish(ctx, append(msgs, tenantMsg("a", 99))...)
	require.NoError(t, err)
	tenant, seq := nextTenant(t, ctx, sub)
	assert.Equal(t, "a", tenant)
	assert.Equal(t, int64(99), seq)
	assert.Equal(t, 50.0, counterValue(t, m.nodes[0].srv, "drip_unmatched_messages_total")-unmatched, "tenant b's messages are routed nowhere")
	assert.Equal(t, 1.0, counterValue(t, m.nodes[1].srv, "drip_link_received_bundles_total")-received, "only tenant a's message crossed the link")
}
