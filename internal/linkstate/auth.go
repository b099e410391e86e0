package linkstate

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/dripmesh/drip/internal/encoding"
)

// Seal is an origin's proof that it wrote an advertisement: a signature
// over the advertisement's signed bytes (AppendSigned) and the
// certificate that vouches for the signing key. The core carries it
// opaquely with the advertisement, so flooding and database exchange pass
// on the originator's seal unchanged; only an Authenticator reads it.
type Seal struct {
	Sig  []byte
	Cert []byte
}

// IsZero reports whether the seal is empty: the advertisement is unsigned.
func (s Seal) IsZero() bool { return len(s.Sig) == 0 && len(s.Cert) == 0 }

func (s Seal) wireSize() int {
	n := 0
	// Fields 40 and 41: two-byte tags.
	if len(s.Sig) > 0 {
		n += 1 + bytesField(len(s.Sig))
	}
	if len(s.Cert) > 0 {
		n += 1 + bytesField(len(s.Cert))
	}
	return n
}

// Authenticator signs the advertisements a router originates and checks
// those it receives (Config.Auth). The core calls it synchronously from
// its inputs, so an implementation must not block for long; it must also
// be deterministic for a simulation to be (a real one's signatures may
// vary: the core never compares them).
type Authenticator interface {
	// Seal signs an advertisement this router originates: key names it,
	// signed is what AppendSigned wrote for it.
	Seal(key Key, signed []byte) (Seal, error)
	// Check verifies the seal of a received advertisement of another
	// router (or an earlier incarnation of this one) before it is
	// installed, flooded or acted on. A refusal is an *AuthError.
	Check(key Key, signed []byte, s Seal) error
}

// Reasons an Authenticator refuses an advertisement, stable metric labels.
const (
	// RefusedUnsigned: the advertisement carries no seal.
	RefusedUnsigned = "unsigned"
	// RefusedSignature: the signature does not verify with the key of
	// the certificate it came with (forged or tampered contents).
	RefusedSignature = "signature"
	// RefusedCertificate: the certificate does not parse, does not chain
	// to a trusted CA, is outside its validity or not a broker's.
	RefusedCertificate = "certificate"
	// RefusedIdentity: the certificate is valid but names another router
	// or mesh than the advertisement's origin.
	RefusedIdentity = "identity"
)

// RefusedReasons lists every refusal reason, for pre-created metric labels.
var RefusedReasons = []string{RefusedUnsigned, RefusedSignature, RefusedCertificate, RefusedIdentity}

// AuthError is an advertisement the Authenticator refused: it is neither
// installed nor flooded. Step returns it wrapped; errors.As finds it.
type AuthError struct {
	Reason string // one of RefusedReasons
	Err    error
}

func (e *AuthError) Error() string { return fmt.Sprintf("%s: %v", e.Reason, e.Err) }

func (e *AuthError) Unwrap() error { return e.Err }

// signedVersion starts the signed bytes. It is exchanged between brokers
// in effect (every router must produce the same bytes for one
// advertisement): bump it with any change to AppendSigned.
const signedVersion = 1

// AppendSigned appends the bytes an LSA's seal signs: every field but Age,
// which grows in flight (OSPF leaves the age out of its checksum too), and
// the seal itself. Integers are big-endian and lists are counted, so no
// two LSAs produce the same bytes, nor an LSA and a PredAd (the kind comes
// first).
func (a *LSA) AppendSigned(b []byte) []byte {
	b = appendHeader(b, KindRouter, a.Origin, a.Seq, a.Withdrawn)
	b = binary.BigEndian.AppendUint32(b, uint32(len(a.Links)))
	for _, l := range a.Links {
		b = binary.BigEndian.AppendUint32(b, l.Neighbor)
		b = binary.BigEndian.AppendUint32(b, l.Cost)
	}
	return b
}

// AppendSigned appends the bytes a predicate advertisement's seal signs:
// every field but Age and the seal, the filters as their set positions
// (independent of the scheme's wire form and bounded by what is set).
func (p *PredAd) AppendSigned(b []byte) []byte {
	b = appendHeader(b, KindPredicate, p.Origin, p.Seq, p.Withdrawn)
	b = append(b, byte(p.Params.Scheme))
	b = binary.BigEndian.AppendUint32(b, uint32(p.Params.M))
	b = binary.BigEndian.AppendUint32(b, uint32(p.Params.K))
	var pos []int
	b, pos = appendFilters(b, p.Filters, pos)
	b = binary.BigEndian.AppendUint32(b, uint32(len(p.Classes)))
	for _, c := range p.Classes {
		b = binary.BigEndian.AppendUint64(b, uint64(c.Deadline))
		b = append(b, byte(boolWord(c.TwoPaths)))
		b, pos = appendFilters(b, c.Filters, pos)
	}
	return b
}

func appendHeader(b []byte, k Kind, origin uint32, seq uint64, withdrawn bool) []byte {
	b = append(b, signedVersion, byte(k))
	b = binary.BigEndian.AppendUint32(b, origin)
	b = binary.BigEndian.AppendUint64(b, seq)
	return append(b, byte(boolWord(withdrawn)))
}

func appendFilters(b []byte, fs []encoding.Bloom, pos []int) ([]byte, []int) {
	b = binary.BigEndian.AppendUint32(b, uint32(len(fs)))
	for _, f := range fs {
		pos = f.AppendPositions(pos[:0])
		b = binary.BigEndian.AppendUint32(b, uint32(len(pos)))
		for _, p := range pos {
			b = binary.BigEndian.AppendUint32(b, uint32(p))
		}
	}
	return b, pos
}

// signed returns the entry's signed bytes and seal.
func (e *entry) signed() ([]byte, Seal) {
	if e.lsa != nil {
		return e.lsa.AppendSigned(nil), e.lsa.Seal
	}
	return e.pred.AppendSigned(nil), e.pred.Seal
}

// seal signs an own entry before it is installed and flooded. A failure
// (a signer that went away) is reported as EventSealFailed; the entry goes
// out unsigned, neighbours refuse it, and the next origination tries again.
func (n *Node) seal(e *entry) {
	if n.cfg.Auth == nil {
		return
	}
	b, _ := e.signed()
	s, err := n.cfg.Auth.Seal(e.key, b)
	if err != nil {
		n.events = append(n.events, Event{Type: EventSealFailed, Peer: n.cfg.ID, Kind: e.key.Kind, Seq: e.seq})
		return
	}
	if e.lsa != nil {
		e.lsa.Seal = s
	} else {
		e.pred.Seal = s
	}
}

// check asks the Authenticator whether a received entry may be installed,
// flooded or acted on.
func (n *Node) check(e *entry) error {
	if n.cfg.Auth == nil {
		return nil
	}
	b, s := e.signed()
	if err := n.cfg.Auth.Check(e.key, b, s); err != nil {
		if ae := (*AuthError)(nil); !errors.As(err, &ae) {
			err = &AuthError{Reason: RefusedSignature, Err: err}
		}
		what := "LSA"
		if e.key.Kind == KindPredicate {
			what = "predicate advertisement"
		}
		return fmt.Errorf("%s of router %d seq %d refused: %w", what, e.key.Origin, e.seq, err)
	}
	return nil
}
