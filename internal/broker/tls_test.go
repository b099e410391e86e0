package broker_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/credentials"

	"github.com/dripmesh/drip/client"
	"github.com/dripmesh/drip/internal/broker"
)

// testPKI is a throwaway CA and the PEM files of certificates it signed.
type testPKI struct {
	dir    string
	ca     *x509.Certificate
	caKey  *ecdsa.PrivateKey
	caFile string
}

func newTestPKI(t *testing.T) *testPKI {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "drip test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	ca, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	p := &testPKI{dir: t.TempDir(), ca: ca, caKey: key}
	p.caFile = p.write(t, "ca.pem", "CERTIFICATE", der)
	return p
}

func (p *testPKI) write(t *testing.T, name, typ string, der []byte) string {
	t.Helper()
	path := filepath.Join(p.dir, name)
	require.NoError(t, os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600))
	return path
}

// issue signs a certificate valid for 127.0.0.1 as server and client.
func (p *testPKI) issue(t *testing.T, name string) (certFile, keyFile string) {
	t.Helper()
	return p.issueFor(t, name, x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth)
}

// issueFor signs a certificate valid for 127.0.0.1 with these usages.
func (p *testPKI) issueFor(t *testing.T, name string, usages ...x509.ExtKeyUsage) (certFile, keyFile string) {
	t.Helper()
	return p.issueWith(t, name, nil, usages...)
}

// issueWith is issueFor with URI SANs.
func (p *testPKI) issueWith(t *testing.T, name string, uris []*url.URL, usages ...x509.ExtKeyUsage) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: usages,
		URIs:        uris,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.ca, &key.PublicKey, p.caKey)
	require.NoError(t, err)
	keyDER, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	return p.write(t, name+".pem", "CERTIFICATE", der), p.write(t, name+"-key.pem", "EC PRIVATE KEY", keyDER)
}

// TestMutualTLS runs two brokers whose peer link requires certificates
// signed by the mesh CA on both sides, and whose client listener requires
// TLS; a client with the CA delivers across the link, and a broker with a
// certificate from another CA cannot join.
func TestMutualTLS(t *testing.T) {
	pki := newTestPKI(t)
	files := func(name string) broker.TLSFiles {
		cert, key := pki.issue(t, name)
		return broker.TLSFiles{CertFile: cert, KeyFile: key, CAFile: pki.caFile, RequireClientCert: true}
	}
	f0, f1 := files("b0"), files("b1")
	m := startMeshTLS(t, []broker.TLSFiles{f0, f1})

	pool := x509.NewCertPool()
	pool.AddCert(pki.ca)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	tlsCfg := func() *tls.Config { return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12} }
	c1, err := client.Dial(ctx, m[1].ClientAddr(), client.WithTLS(tlsCfg()))
	require.NoError(t, err)
	defer c1.Close()
	sub, err := c1.Subscribe(ctx, `k exists`)
	require.NoError(t, err)
	defer sub.Close()

	c0, err := client.Dial(ctx, m[0].ClientAddr(), client.WithTLS(tlsCfg()))
	require.NoError(t, err)
	defer c0.Close()
	require.Eventually(t, func() bool {
		_, err := c0.Publish(ctx, client.Message{Attrs: client.Attrs{"k": 1}})
		require.NoError(t, err)
		dctx, dcancel := context.WithTimeout(ctx, 200*time.Millisecond)
		defer dcancel()
		_, err = sub.Next(dctx)
		return err == nil
	}, 15*time.Second, 50*time.Millisecond, "no delivery across the mTLS link")

	// Plaintext clients are refused by a TLS listener.
	pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
	defer pcancel()
	if c, err := client.Dial(pctx, m[0].ClientAddr()); err == nil {
		_, err = c.Publish(pctx, client.Message{Attrs: client.Attrs{"k": 1}})
		assert.Error(t, err, "plaintext client must not get through")
		c.Close()
	}
}

func TestTLSPeerFromOtherCAIsRefused(t *testing.T) {
	good, bad := newTestPKI(t), newTestPKI(t)
	cert0, key0 := good.issue(t, "b0")
	cert1, key1 := bad.issue(t, "b1")
	m := startMeshTLS(t, []broker.TLSFiles{
		{CertFile: cert0, KeyFile: key0, CAFile: good.caFile, RequireClientCert: true},
		{CertFile: cert1, KeyFile: key1, CAFile: bad.caFile, RequireClientCert: true},
	})
	time.Sleep(500 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	in, err := m[0].Broker().Inspect(ctx)
	require.NoError(t, err)
	assert.Empty(t, in.Links, "a peer with a certificate from another CA must not link")
}

// TestClientCertificateCannotOpenAPeerLink: on a mesh whose brokers and
// clients share one CA, a certificate issued for clients only (clientAuth)
// is refused on the peer port, where a broker's (serverAuth too) links.
func TestClientCertificateCannotOpenAPeerLink(t *testing.T) {
	pki := newTestPKI(t)
	cert, key := pki.issue(t, "b0")
	m := startMeshTLS(t, []broker.TLSFiles{{CertFile: cert, KeyFile: key, CAFile: pki.caFile, RequireClientCert: true}})
	b0 := m[0].Broker()
	for _, tc := range []struct {
		name   string
		usages []x509.ExtKeyUsage
		links  bool
	}{
		{"client certificate", []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, false},
		{"broker certificate", []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			certFile, keyFile := pki.issueFor(t, tc.name, tc.usages...)
			tlsCfg, err := broker.TLSFiles{CertFile: certFile, KeyFile: keyFile, CAFile: pki.caFile}.ClientTLS()
			require.NoError(t, err)
			c, err := dialAs(t, b0, m[0].PeerAddr(), 77, credentials.NewTLS(tlsCfg))
			if !tc.links {
				require.Error(t, err)
				require.Eventually(t, func() bool { return testutil.ToFloat64(b0.HandshakeFailures("tls")) >= 1 },
					5*time.Second, 10*time.Millisecond, "the refused handshake is counted")
				return
			}
			require.NoError(t, err)
			defer c.Close(nil)
			assert.Equal(t, uint32(0), c.Remote().GetRouterId())
		})
	}
}

// TestPeerIdentity: with peer identity on, a certificate links only as the
// router its URI SAN names; claiming another router is refused and counted.
func TestPeerIdentity(t *testing.T) {
	pki := newTestPKI(t)
	server := []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	id, err := url.Parse(broker.PeerIdentityURI("test", 0))
	require.NoError(t, err)
	cert, key := pki.issueWith(t, "b0", []*url.URL{id}, server...)
	f := broker.TLSFiles{CertFile: cert, KeyFile: key, CAFile: pki.caFile, RequireClientCert: true}
	lis := [2]net.Listener{}
	for i := range lis {
		lis[i], err = net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
	}
	srv, err := broker.NewServer(fastConfig(0), broker.ServerConfig{
		ClientListener: lis[0], PeerListener: lis[1], StopTimeout: time.Second, PeerTLS: f, ClientTLS: f, PeerIdentity: true,
	})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	t.Cleanup(func() { cancel(); require.NoError(t, <-done) })

	r5, err := url.Parse(broker.PeerIdentityURI("test", 5))
	require.NoError(t, err)
	certFile, keyFile := pki.issueWith(t, "r5", []*url.URL{r5}, server...)
	tlsCfg, err := broker.TLSFiles{CertFile: certFile, KeyFile: keyFile, CAFile: pki.caFile}.ClientTLS()
	require.NoError(t, err)
	dial := func(claim uint32) error {
		c, err := dialAs(t, srv.Broker(), srv.PeerAddr(), claim, credentials.NewTLS(tlsCfg))
		if err == nil {
			c.Close(nil)
		}
		return err
	}
	require.NoError(t, dial(5), "the router the certificate names")
	err = dial(1)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `does not name router 1 (URI SAN drip://test/router/1 or DNS SAN 1.router.test.drip.internal)`)
	assert.Equal(t, 1.0, testutil.ToFloat64(srv.Broker().HandshakeFailures("identity")))

	// It needs mutual TLS.
	_, err = broker.NewServer(fastConfig(1), broker.ServerConfig{ClientAddr: "127.0.0.1:0", PeerAddr: "127.0.0.1:0", PeerIdentity: true})
	assert.ErrorContains(t, err, "peer identity needs mutual TLS")
}

// startMeshTLS runs one broker, or two linked ones, with the given TLS
// files on both their listeners (and for dialling).
func startMeshTLS(t *testing.T, files []broker.TLSFiles) []*broker.Server {
	t.Helper()
	lis := loopbackListeners(t, len(files))
	servers := make([]*broker.Server, len(files))
	for i, f := range files {
		cfg := fastConfig(i)
		if i == 0 && len(files) > 1 {
			cfg.Peers = []broker.Peer{{ID: 1, Addr: lis[1][1].Addr().String(), Weight: 1}}
		}
		clientTLS := f
		clientTLS.RequireClientCert = false
		srv, err := broker.NewServer(cfg, broker.ServerConfig{
			ClientListener: lis[i][0], PeerListener: lis[i][1], StopTimeout: time.Second,
			PeerTLS: f, ClientTLS: clientTLS,
		})
		require.NoError(t, err)
		servers[i] = srv
		serveUntilCleanup(t, srv)
	}
	return servers
}
