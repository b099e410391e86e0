package broker_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"math"
	"math/big"
	"net/url"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/credentials"

	"github.com/dripmesh/drip/internal/broker"
	"github.com/dripmesh/drip/internal/content"
	"github.com/dripmesh/drip/internal/encoding"
	"github.com/dripmesh/drip/internal/linkstate"
	"github.com/dripmesh/drip/internal/peerauth"
)

// identityMesh is a line of brokers 0-1-2 with mutual TLS and per-router
// certificates (peer identity on, so advertisements are signed), and the
// PKI that issued them.
type identityMesh struct {
	*testMesh
	pki   *testPKI
	files map[int]broker.TLSFiles
}

func (p *testPKI) routerFiles(t *testing.T, id uint32) broker.TLSFiles {
	t.Helper()
	u, err := url.Parse(broker.PeerIdentityURI("test", id))
	require.NoError(t, err)
	// A fresh name each time: a rotation must not overwrite the files
	// of the certificate in use.
	cert, key := p.issueWith(t, fmt.Sprintf("router%d-%d", id, time.Now().UnixNano()), []*url.URL{u}, x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth)
	return broker.TLSFiles{CertFile: cert, KeyFile: key, CAFile: p.caFile, RequireClientCert: true}
}

func startIdentityMesh(t *testing.T) *identityMesh {
	t.Helper()
	im := &identityMesh{pki: newTestPKI(t), files: map[int]broker.TLSFiles{}}
	for i := range 3 {
		im.files[i] = im.pki.routerFiles(t, uint32(i))
	}
	im.testMesh = startMeshWith(t, 3, [][2]int{{0, 1}, {1, 2}}, nil, func(i int, sc *broker.ServerConfig) {
		sc.PeerTLS, sc.PeerIdentity = im.files[i], true
	})
	return im
}

// digests returns every broker's LSDB digest.
func (im *identityMesh) digests(t *testing.T) []uint64 {
	t.Helper()
	var out []uint64
	for _, nd := range im.nodes {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		in, err := nd.srv.Broker().Inspect(ctx)
		cancel()
		require.NoError(t, err)
		out = append(out, in.Digest)
	}
	return out
}

func selfSigned(t *testing.T, uri string) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	u, err := url.Parse(uri)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: "self"}, URIs: []*url.URL{u},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	return der
}

// TestForgedAdvertisementsRefusedWithPeerIdentity: a compromised broker
// holding a valid certificate for router 3 links to b0 and sends, in
// router 1's name, LSAs (claiming a link to itself) and predicate
// advertisements (claiming router 1 subscribes to nothing) with plausible
// and maximal sequence numbers, sealed every way it can: not at all, with
// its own certificate, with router 1's certificate (which it sees in the
// mesh's advertisements) over its own signature, with a self-signed
// certificate. b0 refuses each and counts why; no broker installs one
// (the databases do not change) and deliveries across the mesh go on.
func TestForgedAdvertisementsRefusedWithPeerIdentity(t *testing.T) {
	im := startIdentityMesh(t)
	sub := im.subscribe(1, content.MustParse(`k exists`))
	im.waitConverged(im.allReachable())
	before := im.digests(t)

	// The attacker: router 3's genuine certificate and key.
	f3 := im.pki.routerFiles(t, 3)
	tlsCfg, err := broker.TLSFiles{CertFile: f3.CertFile, KeyFile: f3.KeyFile, CAFile: f3.CAFile}.ClientTLS()
	require.NoError(t, err)
	b0 := im.nodes[0].srv.Broker()
	conn, err := dialAs(t, b0, im.nodes[0].peer, 3, credentials.NewTLS(tlsCfg))
	require.NoError(t, err, "router 3's certificate opens a link as router 3")
	t.Cleanup(func() { conn.Close(nil) })
	h := &hostilePeer{m: im.testMesh, b0: b0, conn: conn}
	require.Eventually(t, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		in, err := b0.Inspect(ctx)
		return err == nil && in.Links[3] != ""
	}, 5*time.Second, 10*time.Millisecond, "b0 takes the link")

	pair, err := tls.LoadX509KeyPair(f3.CertFile, f3.KeyFile)
	require.NoError(t, err)
	pool := x509.NewCertPool()
	pool.AddCert(im.pki.ca)
	own, err := peerauth.New(peerauth.Config{Mesh: "test", Router: 3, Certificate: pair, Roots: pool})
	require.NoError(t, err)
	r1 := im.pki.routerFiles(t, 1) // a certificate of router 1 (not its key)
	r1pair, err := tls.LoadX509KeyPair(r1.CertFile, r1.KeyFile)
	require.NoError(t, err)

	// sealAs3 signs m in its origin's name with router 3's key: the
	// signature verifies only if the certificate names router 3.
	sealAs3 := func(m linkstate.Message, cert []byte) linkstate.Message {
		sign := func(signed []byte) linkstate.Seal {
			// Seal refuses another origin: sign as router 3's would.
			s, err := own.Seal(linkstate.Key{Kind: linkstate.KindRouter, Origin: 3}, signed)
			require.NoError(t, err)
			if cert != nil {
				s.Cert = cert
			}
			return s
		}
		switch m := m.(type) {
		case *linkstate.LSA:
			m.Seal = sign(m.AppendSigned(nil))
		case *linkstate.PredAd:
			m.Seal = sign(m.AppendSigned(nil))
		}
		return m
	}
	params := b0.Config().Encoding
	forged := func(seq uint64) []linkstate.Message {
		return []linkstate.Message{
			&linkstate.LSA{Origin: 1, Seq: seq, Links: []linkstate.Link{{Neighbor: 3, Cost: 1}}},
			&linkstate.PredAd{Origin: 1, Seq: seq, Params: params, Filters: []encoding.Bloom{}},
		}
	}
	want := map[string]float64{}
	// Plausible: past router 1's current number, which counts from its
	// incarnation (linkstate.Config.Incarnation), as a later run's would.
	plausible := uint64(time.Now().Add(time.Hour).UnixNano()/int64(linkstate.IncarnationUnit)) << linkstate.IncarnationShift
	for _, seq := range []uint64{plausible, math.MaxUint64} {
		h.send(t, forged(seq)...) // unsigned
		want[linkstate.RefusedUnsigned] += 2
		var mine, stolen, self []linkstate.Message
		for _, m := range forged(seq) {
			mine = append(mine, sealAs3(m, nil))
		}
		h.send(t, mine...)
		want[linkstate.RefusedIdentity] += 2
		for _, m := range forged(seq) {
			stolen = append(stolen, sealAs3(m, r1pair.Certificate[0]))
		}
		h.send(t, stolen...)
		want[linkstate.RefusedSignature] += 2
		for _, m := range forged(seq) {
			self = append(self, sealAs3(m, selfSigned(t, broker.PeerIdentityURI("test", 1))))
		}
		h.send(t, self...)
		want[linkstate.RefusedCertificate] += 2
	}
	require.Eventually(t, func() bool {
		for r, n := range want {
			if testutil.ToFloat64(b0.AdvertisementsRefused(r)) != n {
				return false
			}
		}
		return true
	}, 10*time.Second, 10*time.Millisecond, "refusals counted by reason: want %v", want)
	for _, nd := range im.nodes[1:] {
		for _, r := range linkstate.RefusedReasons {
			assert.Zero(t, testutil.ToFloat64(nd.srv.Broker().AdvertisementsRefused(r)), "nothing was flooded on")
		}
	}
	time.Sleep(200 * time.Millisecond) // what would have flooded, has
	assert.Equal(t, before, im.digests(t), "a forgery entered a database")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	in, err := b0.Inspect(ctx)
	require.NoError(t, err)
	assert.Equal(t, []uint32{0, 1, 2}, in.Routers, "router 3 is not reachable through forged links")
	assert.Equal(t, 1, in.Predicates[1], "router 1's subscription is still advertised")

	// Deliveries are unharmed: from both ends to b1's subscriber.
	im.waitConverged(im.allReachable())
	im.publish(0, 0, []content.Message{content.MessageFrom(map[string]content.Value{"k": content.Int(1)})})
	im.publish(2, 1, []content.Message{content.MessageFrom(map[string]content.Value{"k": content.Int(2)})})
	require.Eventually(t, func() bool { return sub.received() == 2 }, 5*time.Second, 10*time.Millisecond)
}

// TestSignedMeshSurvivesRestartWithNewCertificate: with peer identity on, a
// broker restarted with a new certificate (a rotation) is accepted: its
// previous incarnation's advertisements, signed with the old certificate,
// come back to it and it re-originates past them, signed with the new.
func TestSignedMeshSurvivesRestartWithNewCertificate(t *testing.T) {
	im := startIdentityMesh(t)
	im.waitConverged(im.allReachable())
	im.kill(1)
	im.files[1] = im.pki.routerFiles(t, 1)
	im.restart(1)
	sub := im.subscribe(1, content.MustParse(`k exists`))
	im.waitConverged(im.allReachable())
	im.publish(0, 0, []content.Message{content.MessageFrom(map[string]content.Value{"k": content.Int(1)})})
	require.Eventually(t, func() bool { return sub.received() == 1 }, 5*time.Second, 10*time.Millisecond)
	for i, nd := range im.nodes {
		for _, r := range linkstate.RefusedReasons {
			assert.Zero(t, testutil.ToFloat64(nd.srv.Broker().AdvertisementsRefused(r)), "broker %d refused %s", i, r)
		}
	}
}
