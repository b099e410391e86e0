package peerauth

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/dripmesh/drip/internal/linkstate"
)

// IdentityURI is the URI SAN that names router id of mesh in a broker's
// peer certificate. It is exchanged between brokers in effect (every
// broker checks its peers' certificates against it): do not change.
func IdentityURI(mesh string, id uint32) string {
	return (&url.URL{Scheme: "drip", Host: mesh, Path: fmt.Sprintf("/router/%d", id)}).String()
}

// IdentityDNS is the same name as a DNS SAN, <id>.router.<mesh>.drip.internal,
// for issuers that cannot write URI SANs (Helm's genSignedCert, which the
// chart's generated certificates come from). It needs a mesh name that is
// a DNS label; ".internal" is reserved for private use, so the name never
// resolves to anyone. Exchanged between brokers in effect: do not change.
func IdentityDNS(mesh string, id uint32) string {
	return fmt.Sprintf("%d.router.%s.drip.internal", id, mesh)
}

// NamesRouter reports whether a broker's certificate names router id of
// mesh, by either form.
func NamesRouter(leaf *x509.Certificate, mesh string, id uint32) bool {
	uri, dns := IdentityURI(mesh, id), IdentityDNS(mesh, id)
	return slices.ContainsFunc(leaf.URIs, func(u *url.URL) bool { return u.String() == uri }) ||
		slices.ContainsFunc(leaf.DNSNames, func(d string) bool { return strings.EqualFold(d, dns) })
}

// Identity is how errors name what a certificate should hold to name
// router id of mesh.
func Identity(mesh string, id uint32) string {
	return fmt.Sprintf("URI SAN %s or DNS SAN %s", IdentityURI(mesh, id), IdentityDNS(mesh, id))
}

// domain separates advertisement signatures from anything else the key
// signs (TLS handshakes above all). It is exchanged between brokers in
// effect: do not change.
const domain = "drip advertisement v1\x00"

// DefaultCacheSize is how many verified certificates an Authenticator
// keeps by default: one per router of a large mesh, with room for
// rotations.
const DefaultCacheSize = 2048

// Config configures an Authenticator.
type Config struct {
	// Mesh is the mesh name, part of every identity and signature.
	Mesh string
	// Router is this broker's router ID; Certificate must name it.
	Router uint32
	// Certificate is this broker's peer certificate with its private key
	// (a crypto.Signer), as tls.LoadX509KeyPair returns it.
	Certificate tls.Certificate
	// Roots verify other brokers' certificates: the peer CA.
	Roots *x509.CertPool
	// Now is the clock certificates' validity is checked against; nil
	// means time.Now.
	Now func() time.Time
	// CacheSize bounds the verified certificates kept; 0 means
	// DefaultCacheSize.
	CacheSize int
}

// Authenticator signs this broker's advertisements and verifies others'
// (linkstate.Authenticator). It is safe for concurrent use.
type Authenticator struct {
	mesh   string
	router uint32
	signer crypto.Signer
	opts   crypto.SignerOpts
	der    []byte
	roots  *x509.CertPool
	now    func() time.Time
	size   int

	mu       sync.Mutex
	cache    map[[32]byte]*verified
	byOrigin map[uint32][32]byte // the latest certificate seen of each router
}

// verified is a certificate whose chain verified.
type verified struct {
	leaf *x509.Certificate
	// notBefore and notAfter bound the validity of the whole chain.
	notBefore, notAfter time.Time
}

var _ linkstate.Authenticator = (*Authenticator)(nil)

// New checks that the certificate holds a usable key and names the router,
// so that a broker with the wrong certificate fails at start rather than
// have every neighbour refuse what it says.
func New(cfg Config) (*Authenticator, error) {
	if cfg.Roots == nil {
		return nil, errors.New("peerauth: no peer CA to verify certificates with")
	}
	if len(cfg.Certificate.Certificate) == 0 {
		return nil, errors.New("peerauth: no certificate to sign with")
	}
	signer, ok := cfg.Certificate.PrivateKey.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("peerauth: private key %T cannot sign", cfg.Certificate.PrivateKey)
	}
	leaf, err := x509.ParseCertificate(cfg.Certificate.Certificate[0])
	if err != nil {
		return nil, fmt.Errorf("peerauth: own certificate: %w", err)
	}
	if !NamesRouter(leaf, cfg.Mesh, cfg.Router) {
		return nil, fmt.Errorf("peerauth: own certificate %q does not name router %d of mesh %q (%s)",
			leaf.Subject.CommonName, cfg.Router, cfg.Mesh, Identity(cfg.Mesh, cfg.Router))
	}
	var opts crypto.SignerOpts = crypto.SHA256
	switch signer.Public().(type) {
	case *ecdsa.PublicKey, *rsa.PublicKey:
	case ed25519.PublicKey:
		opts = crypto.Hash(0) // signs the digest as its message
	default:
		return nil, fmt.Errorf("peerauth: own certificate's key %T is not ECDSA, Ed25519 or RSA", signer.Public())
	}
	a := &Authenticator{
		mesh: cfg.Mesh, router: cfg.Router, signer: signer, opts: opts, der: cfg.Certificate.Certificate[0],
		roots: cfg.Roots, now: cfg.Now, size: cfg.CacheSize,
		cache: map[[32]byte]*verified{}, byOrigin: map[uint32][32]byte{},
	}
	if a.now == nil {
		a.now = time.Now
	}
	if a.size <= 0 {
		a.size = DefaultCacheSize
	}
	return a, nil
}

// digest is what is signed: the domain, the mesh and the signed bytes.
func (a *Authenticator) digest(signed []byte) []byte {
	h := sha256.New()
	h.Write([]byte(domain))
	h.Write(binary.AppendUvarint(nil, uint64(len(a.mesh))))
	h.Write([]byte(a.mesh))
	h.Write(signed)
	return h.Sum(nil)
}

// Seal implements linkstate.Authenticator.
func (a *Authenticator) Seal(key linkstate.Key, signed []byte) (linkstate.Seal, error) {
	if key.Origin != a.router {
		return linkstate.Seal{}, fmt.Errorf("peerauth: router %d cannot sign an advertisement of router %d", a.router, key.Origin)
	}
	sig, err := a.signer.Sign(rand.Reader, a.digest(signed), a.opts)
	if err != nil {
		return linkstate.Seal{}, fmt.Errorf("peerauth: sign %s advertisement: %w", key.Kind, err)
	}
	return linkstate.Seal{Sig: sig, Cert: a.der}, nil
}

func refuse(reason, format string, args ...any) error {
	return &linkstate.AuthError{Reason: reason, Err: fmt.Errorf(format, args...)}
}

// Check implements linkstate.Authenticator. A refusal is a
// *linkstate.AuthError whose Reason is a linkstate.Refused* constant.
func (a *Authenticator) Check(key linkstate.Key, signed []byte, s linkstate.Seal) error {
	if len(s.Sig) == 0 {
		return refuse(linkstate.RefusedUnsigned, "no signature")
	}
	if len(s.Cert) == 0 {
		return refuse(linkstate.RefusedCertificate, "no certificate")
	}
	v, err := a.certificate(s.Cert, key.Origin, key.Origin == a.router)
	if err != nil {
		return err
	}
	if !NamesRouter(v.leaf, a.mesh, key.Origin) {
		return refuse(linkstate.RefusedIdentity, "certificate %q does not name router %d (%s)", v.leaf.Subject.CommonName, key.Origin, Identity(a.mesh, key.Origin))
	}
	d := a.digest(signed)
	var ok bool
	switch pub := v.leaf.PublicKey.(type) {
	case *ecdsa.PublicKey:
		ok = ecdsa.VerifyASN1(pub, d, s.Sig)
	case ed25519.PublicKey:
		ok = ed25519.Verify(pub, d, s.Sig)
	case *rsa.PublicKey:
		ok = rsa.VerifyPKCS1v15(pub, crypto.SHA256, d, s.Sig) == nil
	default:
		return refuse(linkstate.RefusedCertificate, "certificate %q has a %T key", v.leaf.Subject.CommonName, pub)
	}
	if !ok {
		return refuse(linkstate.RefusedSignature, "signature does not verify with the key of certificate %q", v.leaf.Subject.CommonName)
	}
	return nil
}

// certificate returns der verified: from the cache if its chain verified
// before (its validity is checked again, against now), else after x509
// verification against the peer CA. The latest certificate of a router
// replaces its previous one in the cache.
//
// own says the advertisement is this router's, from an earlier
// incarnation: then a certificate that has expired since is accepted. The
// copy only tells the router to re-originate past it (it is never
// installed), and refusing it would leave the mesh preferring the old copy
// to the restarted router's new ones until it aged out.
func (a *Authenticator) certificate(der []byte, origin uint32, own bool) (*verified, error) {
	sum := sha256.Sum256(der)
	now := a.now()
	a.mu.Lock()
	v := a.cache[sum]
	a.mu.Unlock()
	if v == nil {
		leaf, err := x509.ParseCertificate(der)
		if err != nil {
			return nil, refuse(linkstate.RefusedCertificate, "certificate does not parse: %v", err)
		}
		opts := x509.VerifyOptions{Roots: a.roots, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
		chains, err := leaf.Verify(opts)
		if ie := (x509.CertificateInvalidError{}); own && errors.As(err, &ie) && ie.Reason == x509.Expired && now.After(leaf.NotAfter) {
			opts.CurrentTime = leaf.NotAfter
			chains, err = leaf.Verify(opts)
		}
		if err != nil {
			return nil, refuse(linkstate.RefusedCertificate, "certificate %q: %v", leaf.Subject.CommonName, err)
		}
		v = &verified{leaf: leaf, notBefore: leaf.NotBefore, notAfter: leaf.NotAfter}
		for _, c := range chains[0] {
			if c.NotBefore.After(v.notBefore) {
				v.notBefore = c.NotBefore
			}
			if c.NotAfter.Before(v.notAfter) {
				v.notAfter = c.NotAfter
			}
		}
		a.remember(sum, v, origin)
		return v, nil
	}
	if !own && (now.Before(v.notBefore) || now.After(v.notAfter)) {
		return nil, refuse(linkstate.RefusedCertificate, "certificate %q: valid from %s to %s, not at %s",
			v.leaf.Subject.CommonName, v.notBefore.Format(time.RFC3339), v.notAfter.Format(time.RFC3339), now.Format(time.RFC3339))
	}
	return v, nil
}

func (a *Authenticator) remember(sum [32]byte, v *verified, origin uint32) {
	a.mu.Lock()
	defer a.mu.Unlock()
	// Only a certificate that names the origin replaces the origin's
	// previous one: another router's certificate sent in its name must
	// not evict it.
	if NamesRouter(v.leaf, a.mesh, origin) {
		if old, ok := a.byOrigin[origin]; ok && old != sum {
			delete(a.cache, old)
		}
		a.byOrigin[origin] = sum
	}
	for k := range a.cache {
		if len(a.cache) < a.size {
			break
		}
		delete(a.cache, k) // any one: the bound matters, not the victim
	}
	a.cache[sum] = v
}

// CacheLen returns how many verified certificates are cached.
func (a *Authenticator) CacheLen() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.cache)
}
