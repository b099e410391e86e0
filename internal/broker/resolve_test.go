package broker_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"math/big"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dripmesh/drip/internal/broker"
)

// issueDNS signs a certificate for a DNS name only: a dialler that
// verified it against the IP it connected to would refuse it.
func (p *testPKI) issueDNS(t *testing.T, name string) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		DNSNames:    []string{name},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.ca, &key.PublicKey, p.caKey)
	require.NoError(t, err)
	keyDER, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	return p.write(t, name+".pem", "CERTIFICATE", der), p.write(t, name+"-key.pem", "EC PRIVATE KEY", keyDER)
}

// appearingResolver knows a name only from some time on, as the
// EndpointSlices know a pod once it has an IP.
type appearingResolver struct {
	mu    sync.Mutex
	name  string
	addr  netip.Addr
	from  time.Time
	asked int
}

var errNoPodYet = errors.New("no such pod yet")

func (r *appearingResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.asked++
	if host != r.name || time.Now().Before(r.from) {
		return nil, errNoPodYet
	}
	return []netip.Addr{r.addr}, nil
}

// TestPeerResolver: a neighbour configured by a name that DNS does not
// know links as soon as the PeerResolver knows it, over mutual TLS whose
// certificates name only the DNS names, so the dialler verified the name,
// not the address it connected to; without the resolver it never links.
func TestPeerResolver(t *testing.T) {
	pki := newTestPKI(t)
	const name0, name1 = "b0.peers.invalid", "b1.peers.invalid"
	files := func(name string) broker.TLSFiles {
		cert, key := pki.issueDNS(t, name)
		return broker.TLSFiles{CertFile: cert, KeyFile: key, CAFile: pki.caFile, RequireClientCert: true}
	}
	for _, withResolver := range []bool{true, false} {
		t.Run(map[bool]string{true: "resolver", false: "dns"}[withResolver], func(t *testing.T) {
			lis := loopbackListeners(t, 2)
			_, port, err := net.SplitHostPort(lis[1][1].Addr().String())
			require.NoError(t, err)
			res := &appearingResolver{name: name1, addr: netip.MustParseAddr("127.0.0.1"), from: time.Now().Add(300 * time.Millisecond)}
			servers := make([]*broker.Server, 2)
			for i, f := range []broker.TLSFiles{files(name0), files(name1)} {
				cfg := fastConfig(i)
				sc := broker.ServerConfig{ClientListener: lis[i][0], PeerListener: lis[i][1], StopTimeout: time.Second, PeerTLS: f}
				if i == 0 {
					cfg.Peers = []broker.Peer{{ID: 1, Addr: net.JoinHostPort(name1, port), Weight: 1}}
					if withResolver {
						sc.PeerResolver = res
					}
				}
				srv, err := broker.NewServer(cfg, sc)
				require.NoError(t, err)
				servers[i] = srv
				serveUntilCleanup(t, srv)
			}
			linked := func() bool {
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				defer cancel()
				in, err := servers[0].Broker().Inspect(ctx)
				return err == nil && len(in.Links) == 1
			}
			if !withResolver {
				time.Sleep(time.Second)
				assert.False(t, linked(), "%s is not in DNS: without the resolver there is no link", name1)
				return
			}
			require.Eventually(t, linked, 10*time.Second, 20*time.Millisecond, "no link to %s once the resolver knew it", name1)
			res.mu.Lock()
			defer res.mu.Unlock()
			assert.Greater(t, res.asked, 1, "the dial loop asked again after the name was unknown")
		})
	}
}
