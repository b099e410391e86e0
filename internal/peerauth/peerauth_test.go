package peerauth

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"math/big"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dripmesh/drip/internal/encoding"
	"github.com/dripmesh/drip/internal/linkstate"
)

// t0 is the tests' clock: certificates are valid an hour either side.
var t0 = time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)

type ca struct {
	cert *x509.Certificate
	key  crypto.Signer
	pool *x509.CertPool
}

func newCA(t testing.TB) *ca {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "peer CA"},
		NotBefore: t0.Add(-24 * time.Hour), NotAfter: t0.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &ca{cert: cert, key: key, pool: pool}
}

// cert describes a certificate to issue; the zero value is router 1 of
// mesh "m", ECDSA, serverAuth and clientAuth, valid at t0.
type cert struct {
	uris     []string
	dns      []string
	usages   []x509.ExtKeyUsage
	key      crypto.Signer
	from, to time.Time
}

func (c *ca) issue(t testing.TB, spec cert) tls.Certificate {
	t.Helper()
	if spec.uris == nil {
		spec.uris = []string{IdentityURI("m", 1)}
	}
	if spec.usages == nil {
		spec.usages = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	}
	if spec.key == nil {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		require.NoError(t, err)
		spec.key = k
	}
	if spec.from.IsZero() {
		spec.from, spec.to = t0.Add(-time.Hour), t0.Add(time.Hour)
	}
	var uris []*url.URL
	for _, u := range spec.uris {
		p, err := url.Parse(u)
		require.NoError(t, err)
		uris = append(uris, p)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: "broker"},
		NotBefore: spec.from, NotAfter: spec.to, URIs: uris, DNSNames: spec.dns, ExtKeyUsage: spec.usages,
		KeyUsage: x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.cert, spec.key.Public(), c.key)
	require.NoError(t, err)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: spec.key}
}

// clock is a settable time source.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func newAuth(t testing.TB, c *ca, mesh string, router uint32, crt tls.Certificate, clk *clock) *Authenticator {
	t.Helper()
	a, err := New(Config{Mesh: mesh, Router: router, Certificate: crt, Roots: c.pool, Now: clk.now})
	require.NoError(t, err)
	return a
}

var (
	lsaKey = linkstate.Key{Kind: linkstate.KindRouter, Origin: 1}
	lsa    = &linkstate.LSA{Origin: 1, Seq: 9, Links: []linkstate.Link{{Neighbor: 2, Cost: 3}}}
)

func reason(err error) string {
	var ae *linkstate.AuthError
	if errors.As(err, &ae) {
		return ae.Reason
	}
	if err != nil {
		return "untyped: " + err.Error()
	}
	return ""
}

// TestCheck: the verdicts of Check on advertisements of router 1 of mesh
// "m", signed as each case says, verified by router 2.
func TestCheck(t *testing.T) {
	root, other := newCA(t), newCA(t)
	_, edKey, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	signed := lsa.AppendSigned(nil)
	aged := *lsa
	aged.Age = time.Hour

	for _, tc := range []struct {
		name   string
		issuer *ca
		cert   cert
		mesh   string // of the signer; "m" if empty
		edit   func(*linkstate.Seal, *[]byte)
		at     time.Time // verifier's clock; t0 if zero
		want   string
	}{
		{name: "ECDSA", want: ""},
		{name: "Ed25519", cert: cert{key: edKey}, want: ""},
		{name: "RSA", cert: cert{key: rsaKey}, want: ""},
		{name: "age is not signed", edit: func(_ *linkstate.Seal, b *[]byte) { *b = aged.AppendSigned(nil) }, want: ""},
		{name: "serverAuth only", cert: cert{usages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}, want: ""},
		{name: "unsigned", edit: func(s *linkstate.Seal, _ *[]byte) { *s = linkstate.Seal{} }, want: linkstate.RefusedUnsigned},
		{name: "no certificate", edit: func(s *linkstate.Seal, _ *[]byte) { s.Cert = nil }, want: linkstate.RefusedCertificate},
		{name: "certificate garbage", edit: func(s *linkstate.Seal, _ *[]byte) { s.Cert = []byte{0x30, 3, 1, 2, 3} }, want: linkstate.RefusedCertificate},
		{name: "wrong CA", issuer: other, want: linkstate.RefusedCertificate},
		{name: "client-only key usage", cert: cert{usages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}, want: linkstate.RefusedCertificate},
		{name: "expired", at: t0.Add(2 * time.Hour), want: linkstate.RefusedCertificate},
		{name: "not yet valid", at: t0.Add(-2 * time.Hour), want: linkstate.RefusedCertificate},
		{name: "names router 1 among others", cert: cert{uris: []string{IdentityURI("m", 3), IdentityURI("m", 1)}}, want: ""},
		{name: "DNS SAN", cert: cert{uris: []string{}, dns: []string{"b1.example", IdentityDNS("m", 1)}}, want: ""},
		{name: "DNS SAN of another router", cert: cert{uris: []string{}, dns: []string{IdentityDNS("m", 11)}}, want: linkstate.RefusedIdentity},
		{name: "DNS SAN of another mesh", cert: cert{uris: []string{}, dns: []string{IdentityDNS("n", 1)}}, want: linkstate.RefusedIdentity},
		{name: "wrong SAN router", cert: cert{uris: []string{IdentityURI("m", 3)}}, want: linkstate.RefusedIdentity},
		{name: "wrong SAN mesh", cert: cert{uris: []string{IdentityURI("n", 1)}}, want: linkstate.RefusedIdentity},
		{name: "no SAN", cert: cert{uris: []string{}}, want: linkstate.RefusedIdentity},
		{name: "signed for another mesh", cert: cert{uris: []string{IdentityURI("m", 1), IdentityURI("n", 1)}}, mesh: "n", want: linkstate.RefusedSignature},
		{name: "bad signature", edit: func(s *linkstate.Seal, _ *[]byte) { s.Sig = []byte("not a signature") }, want: linkstate.RefusedSignature},
		{name: "signature bit flipped", edit: func(s *linkstate.Seal, _ *[]byte) { s.Sig[len(s.Sig)-3] ^= 1 }, want: linkstate.RefusedSignature},
		{name: "tampered body", edit: func(_ *linkstate.Seal, b *[]byte) {
			c := *lsa
			c.Links = []linkstate.Link{{Neighbor: 2, Cost: 1}}
			*b = c.AppendSigned(nil)
		}, want: linkstate.RefusedSignature},
		{name: "tampered seq", edit: func(_ *linkstate.Seal, b *[]byte) {
			c := *lsa
			c.Seq++
			*b = c.AppendSigned(nil)
		}, want: linkstate.RefusedSignature},
	} {
		t.Run(tc.name, func(t *testing.T) {
			issuer := tc.issuer
			if issuer == nil {
				issuer = root
			}
			crt := issuer.issue(t, tc.cert)
			mesh := tc.mesh
			if mesh == "" {
				mesh = "m"
			}
			// The signer's own checks (New) would refuse most bad
			// certificates: sign as a forger would, with the key.
			signer := &Authenticator{mesh: mesh, router: 1, signer: crt.PrivateKey.(crypto.Signer), opts: crypto.SHA256, der: crt.Certificate[0]}
			if _, ok := crt.PrivateKey.(ed25519.PrivateKey); ok {
				signer.opts = crypto.Hash(0)
			}
			seal, err := signer.Seal(lsaKey, signed)
			require.NoError(t, err)
			b := signed
			if tc.edit != nil {
				tc.edit(&seal, &b)
			}
			clk := &clock{t0}
			if !tc.at.IsZero() {
				clk.t = tc.at
			}
			verifier := newAuth(t, root, "m", 2, root.issue(t, cert{uris: []string{IdentityURI("m", 2)}}), clk)
			assert.Equal(t, tc.want, reason(verifier.Check(lsaKey, b, seal)))
			// Cached or not, the verdict is the same.
			assert.Equal(t, tc.want, reason(verifier.Check(lsaKey, b, seal)))
		})
	}
}

// TestCheckCache: a certificate's chain is verified once; its validity is
// still checked at every use, and a router's new certificate (a rotation)
// is accepted and replaces the old one.
func TestCheckCache(t *testing.T) {
	root := newCA(t)
	clk := &clock{t0}
	b1 := newAuth(t, root, "m", 1, root.issue(t, cert{}), clk)
	b2 := newAuth(t, root, "m", 2, root.issue(t, cert{uris: []string{IdentityURI("m", 2)}}), clk)
	seal, err := b1.Seal(lsaKey, lsa.AppendSigned(nil))
	require.NoError(t, err)
	require.NoError(t, b2.Check(lsaKey, lsa.AppendSigned(nil), seal))
	require.Equal(t, 1, b2.CacheLen())
	// Expired since it was cached.
	clk.t = t0.Add(61 * time.Minute)
	assert.Equal(t, linkstate.RefusedCertificate, reason(b2.Check(lsaKey, lsa.AppendSigned(nil), seal)))
	clk.t = t0

	// Rotation: router 1 restarts with a new certificate.
	b1 = newAuth(t, root, "m", 1, root.issue(t, cert{}), clk)
	seal2, err := b1.Seal(lsaKey, lsa.AppendSigned(nil))
	require.NoError(t, err)
	require.NotEqual(t, seal.Cert, seal2.Cert)
	require.NoError(t, b2.Check(lsaKey, lsa.AppendSigned(nil), seal2))
	assert.Equal(t, 1, b2.CacheLen(), "the new certificate replaced the old")
	// The old one still verifies (its ads come back after a restart).
	require.NoError(t, b2.Check(lsaKey, lsa.AppendSigned(nil), seal))

	// Another router's certificate in router 1's name is refused and
	// evicts nothing.
	b3 := newAuth(t, root, "m", 3, root.issue(t, cert{uris: []string{IdentityURI("m", 3)}}), clk)
	forged := &Authenticator{mesh: "m", router: 1, signer: b3.signer, opts: b3.opts, der: b3.der}
	fs, err := forged.Seal(lsaKey, lsa.AppendSigned(nil))
	require.NoError(t, err)
	assert.Equal(t, linkstate.RefusedIdentity, reason(b2.Check(lsaKey, lsa.AppendSigned(nil), fs)))
	require.NoError(t, b2.Check(lsaKey, lsa.AppendSigned(nil), seal2))

	// Bounded.
	small, err := New(Config{Mesh: "m", Router: 2, Certificate: root.issue(t, cert{uris: []string{IdentityURI("m", 2)}}), Roots: root.pool, Now: clk.now, CacheSize: 2})
	require.NoError(t, err)
	for id := uint32(10); id < 15; id++ {
		a := newAuth(t, root, "m", id, root.issue(t, cert{uris: []string{IdentityURI("m", id)}}), clk)
		k := linkstate.Key{Kind: linkstate.KindRouter, Origin: id}
		s, err := a.Seal(k, []byte("x"))
		require.NoError(t, err)
		require.NoError(t, small.Check(k, []byte("x"), s))
		require.LessOrEqual(t, small.CacheLen(), 2)
	}
}

// TestNewAndSeal: a broker whose certificate does not name it fails at
// start; it signs only its own advertisements.
func TestNewAndSeal(t *testing.T) {
	root := newCA(t)
	crt := root.issue(t, cert{})
	_, err := New(Config{Mesh: "m", Router: 2, Certificate: crt, Roots: root.pool})
	require.ErrorContains(t, err, `does not name router 2 of mesh "m" (URI SAN drip://m/router/2 or DNS SAN 2.router.m.drip.internal)`)
	_, err = New(Config{Mesh: "m", Router: 1, Certificate: crt})
	require.ErrorContains(t, err, "no peer CA")
	_, err = New(Config{Mesh: "m", Router: 1, Roots: root.pool})
	require.ErrorContains(t, err, "no certificate")
	a, err := New(Config{Mesh: "m", Router: 1, Certificate: crt, Roots: root.pool})
	require.NoError(t, err)
	_, err = a.Seal(linkstate.Key{Kind: linkstate.KindPredicate, Origin: 3}, nil)
	require.ErrorContains(t, err, "router 1 cannot sign an advertisement of router 3")
	assert.Equal(t, "drip://m/router/1", IdentityURI("m", 1))
}

// TestPredicateSignature: predicate advertisements are signed and verified
// the same way, their filters and QoS classes covered.
func TestPredicateSignature(t *testing.T) {
	root := newCA(t)
	clk := &clock{t0}
	a := newAuth(t, root, "m", 1, root.issue(t, cert{}), clk)
	var f encoding.Bloom
	f.Set(5)
	p := &linkstate.PredAd{Origin: 1, Seq: 4, Params: encoding.DefaultParams(), Filters: []encoding.Bloom{f},
		Classes: []linkstate.QoSClass{{Deadline: time.Second, Filters: []encoding.Bloom{f}}}}
	k := linkstate.Key{Kind: linkstate.KindPredicate, Origin: 1}
	s, err := a.Seal(k, p.AppendSigned(nil))
	require.NoError(t, err)
	require.NoError(t, a.Check(k, p.AppendSigned(nil), s))
	q := *p
	q.Classes = []linkstate.QoSClass{{Deadline: 2 * time.Second, Filters: []encoding.Bloom{f}}}
	assert.Equal(t, linkstate.RefusedSignature, reason(a.Check(k, q.AppendSigned(nil), s)))
	// An LSA's signature does not pass for a predicate's.
	ls, err := a.Seal(lsaKey, lsa.AppendSigned(nil))
	require.NoError(t, err)
	assert.Equal(t, linkstate.RefusedSignature, reason(a.Check(k, p.AppendSigned(nil), ls)))
}

// FuzzCheck: whatever a peer sends, Check refuses it with a reason or
// accepts it, and never panics; a seal that verifies verifies only its
// own bytes.
func FuzzCheck(f *testing.F) {
	root := newCA(f)
	clk := &clock{t0}
	a := newAuth(f, root, "m", 1, root.issue(f, cert{}), clk)
	b := lsa.AppendSigned(nil)
	s, err := a.Seal(lsaKey, b)
	require.NoError(f, err)
	f.Add(uint32(1), b, s.Sig, s.Cert)
	f.Add(uint32(2), b, s.Sig, s.Cert)
	f.Add(uint32(1), []byte{}, []byte{1}, []byte{0x30, 0x82, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, origin uint32, signed, sig, der []byte) {
		err := a.Check(linkstate.Key{Kind: linkstate.KindRouter, Origin: origin}, signed, linkstate.Seal{Sig: sig, Cert: der})
		if err == nil {
			require.Equal(t, uint32(1), origin)
			require.Equal(t, b, signed)
			return
		}
		var ae *linkstate.AuthError
		require.ErrorAs(t, err, &ae)
		require.Contains(t, linkstate.RefusedReasons, ae.Reason)
	})
}

func benchAuth(b *testing.B, key crypto.Signer) (*Authenticator, linkstate.Seal, []byte) {
	root := newCA(b)
	clk := &clock{t0}
	a := newAuth(b, root, "m", 1, root.issue(b, cert{key: key}), clk)
	signed := lsa.AppendSigned(nil)
	s, err := a.Seal(lsaKey, signed)
	require.NoError(b, err)
	return a, s, signed
}

func benchKeys(b *testing.B) map[string]crypto.Signer {
	ec, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(b, err)
	_, ed, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(b, err)
	return map[string]crypto.Signer{"ECDSA-P256": ec, "Ed25519": ed}
}

func BenchmarkSeal(b *testing.B) {
	for name, key := range benchKeys(b) {
		b.Run(name, func(b *testing.B) {
			a, _, signed := benchAuth(b, key)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := a.Seal(lsaKey, signed); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkCheck(b *testing.B) {
	for name, key := range benchKeys(b) {
		for _, cached := range []bool{true, false} {
			b.Run(name+map[bool]string{true: "/cached", false: "/uncached"}[cached], func(b *testing.B) {
				a, s, signed := benchAuth(b, key)
				b.ReportAllocs()
				for b.Loop() {
					if !cached {
						a.mu.Lock()
						clear(a.cache)
						a.mu.Unlock()
					}
					if err := a.Check(lsaKey, signed, s); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// TestDigestGolden pins what a broker signs for given signed bytes: every
// broker must compute the same digest (it is exchanged between brokers in
// effect), and the mesh is part of it.
func TestDigestGolden(t *testing.T) {
	a := &Authenticator{mesh: "drip"}
	// SHA-256("drip advertisement v1\x00" || uvarint(4) || "drip" || 01 02 03)
	assert.Equal(t, "17b795682b5eca726b5c4a4fcd101128bc60a97da77535c4ab3c9c14c3816874", fmt.Sprintf("%x", a.digest([]byte{1, 2, 3})))
	b := &Authenticator{mesh: "dripx"}
	assert.NotEqual(t, a.digest([]byte{1, 2, 3}), b.digest([]byte{1, 2, 3}))
	// The mesh name is length-prefixed: mesh "a" with bytes "bc" is not
	// mesh "ab" with bytes "c".
	assert.NotEqual(t, (&Authenticator{mesh: "a"}).digest([]byte("bc")), (&Authenticator{mesh: "ab"}).digest([]byte("c")))
}
