package brokertest

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/bits-and-blooms/bitset"

	"google.golang.org/protobuf/proto"

	dripv1 "github.com/dripmesh/drip/api/proto/drip/v1"
	"github.com/dripmesh/drip/internal/clientapi"
	"github.com/dripmesh/drip/internal/content"
	"github.com/dripmesh/drip/internal/dedup"
	"github.com/dripmesh/drip/internal/drp"
	"github.com/dripmesh/drip/internal/linkstate"
	"github.com/dripmesh/drip/internal/transport"
	"github.com/dripmesh/drip/internal/wire"
)

// A compromised broker is one of the simulated brokers — it runs the
// brokers' code, holds its identity (its signing key when Options.Auth is
// set) and keeps its adjacencies — which also sends frames of its own
// making on its links: Inject hands one to the neighbour as if it came
// over the wire. The neighbour's link parses it as every frame.

// Inject delivers frame, a drip.v1.Frame in its wire form, to router to
// over its link from router from, now, as if from had sent it. The link
// must be up; a frame the receiving end refuses ends the link, as it
// would in production, and Inject returns why.
func (s *Sim) Inject(from, to uint32, frame []byte) error {
	l := s.link(from, to)
	if l == nil || l.ends[0] == nil {
		return fmt.Errorf("brokertest: no link up between %d and %d", from, to)
	}
	side := l.side(s.index[from])
	if err := l.ends[1-side].Deliver(frame); err != nil {
		s.disconnect(l, err)
		return err
	}
	s.dirty = true
	s.settle()
	return nil
}

// The payloads of messages no publisher of the ledger published, which
// say what they are (Check): a Forgery a compromised broker sent in
// another's name, which no subscriber may receive, or a message it
// published AsItself, which is its right.
const (
	Forgery  = math.MaxUint64
	AsItself = math.MaxUint64 - 1
)

// BundleFrame is a frame of one bundle for the routers dest, with the
// stamp s, carrying message m; the bundle's source is s.Origin.
func BundleFrame(s dedup.Stamp, dest []uint32, m content.Message) []byte {
	raw, err := proto.Marshal(clientapi.MessageToProto(m))
	if err != nil {
		panic(err) // a message of valid attributes always encodes
	}
	return RawBundleFrame(s, dest, raw)
}

// RawBundleFrame is BundleFrame for a message in its wire form.
func RawBundleFrame(s dedup.Stamp, dest []uint32, raw []byte) []byte {
	var d bitset.BitSet
	for _, id := range dest {
		d.Set(uint(id))
	}
	b := wire.AppendBundle(nil, drp.Bundle{Source: s.Origin, Dest: &d, HopsLeft: 8}, s, 1, 0, raw)
	frame, err := transport.AppendFrame(nil, nil, [][]byte{b})
	if err != nil {
		panic(err) // no control message to fail
	}
	return frame
}

// ControlFrame is a frame of link-state messages, each whole (never a
// delta).
func ControlFrame(msgs ...linkstate.Message) ([]byte, error) {
	cs := make([]*dripv1.Control, len(msgs))
	for i, m := range msgs {
		c, err := transport.ControlToProto(m)
		if err != nil {
			return nil, err
		}
		cs[i] = c
	}
	return transport.AppendFrame(nil, cs, nil)
}

// Epoch is router id's boot epoch (the stamps it gives), 0 while it
// is down.
func (s *Sim) Epoch(id uint32) uint64 {
	if n := s.nodes[s.index[id]].node; n != nil {
		return n.Epoch()
	}
	return 0
}

// hideSelf returns frame, for a compromised broker id, without what it
// says of id: its LSAs and predicate advertisements, and their entries in
// database summaries and requests. Otherwise the broker would take the
// advertisements Inject sent in its name, flooded back to it, for an
// earlier incarnation's and originate past them.
func hideSelf(frame []byte, id uint32) []byte {
	var f transport.ParsedFrame
	if err := transport.ParseFrame(frame, &f); err != nil || f.Compressed() || f.Open {
		return frame
	}
	var kept []*dripv1.Control
	for _, c := range f.Control {
		switch m := c.GetMsg().(type) {
		case *dripv1.Control_Lsa:
			if m.Lsa.GetOrigin() == id {
				continue
			}
		case *dripv1.Control_PredicateAd:
			if m.PredicateAd.GetOrigin() == id {
				continue
			}
		case *dripv1.Control_DbSummary:
			m.DbSummary.Entries = slices.DeleteFunc(m.DbSummary.Entries, func(e *dripv1.EntrySummary) bool { return e.GetOrigin() == id })
		case *dripv1.Control_DbRequest:
			m.DbRequest.Keys = slices.DeleteFunc(m.DbRequest.Keys, func(k *dripv1.EntryKey) bool { return k.GetOrigin() == id })
		}
		kept = append(kept, c)
	}
	out, err := transport.AppendFrame(nil, kept, f.Bundles)
	if err != nil {
		return frame
	}
	if f.Finished {
		out = transport.AppendFinishedFrame(out)
	}
	return out
}

// SimKeys signs and checks advertisements in the simulator (Options.
// Signed): a stand-in for internal/peerauth's certificates, with each
// router's key derived from its ID and a "certificate" that is the ID.
// Every router knows every key, as every broker trusts the mesh's CA; a
// router signs only with its own. Deterministic, so runs replay.
type SimKeys struct{}

// For is router id's authenticator.
func (SimKeys) For(id uint32) linkstate.Authenticator { return simAuth{id} }

// Seal signs m, an LSA or predicate advertisement, with router signer's
// key, whatever its origin: what a compromised broker can do, which its
// neighbours refuse unless signer is the origin.
func (SimKeys) Seal(signer uint32, m linkstate.Message) linkstate.Message {
	switch m := m.(type) {
	case *linkstate.LSA:
		c := *m
		c.Seal = linkstate.Seal{Sig: simMAC(signer, c.AppendSigned(nil)), Cert: simCert(signer)}
		return &c
	case *linkstate.PredAd:
		c := *m
		c.Seal = linkstate.Seal{Sig: simMAC(signer, c.AppendSigned(nil)), Cert: simCert(signer)}
		return &c
	}
	panic(fmt.Sprintf("brokertest: cannot seal %T", m))
}

type simAuth struct{ id uint32 }

func simCert(id uint32) []byte { return binary.BigEndian.AppendUint32(nil, id) }

func simMAC(signer uint32, b []byte) []byte {
	h := hmac.New(sha256.New, binary.BigEndian.AppendUint32([]byte("brokertest key of router "), signer))
	h.Write(b)
	return h.Sum(nil)
}

func (a simAuth) Seal(k linkstate.Key, b []byte) (linkstate.Seal, error) {
	if k.Origin != a.id {
		return linkstate.Seal{}, fmt.Errorf("router %d cannot sign for %d", a.id, k.Origin)
	}
	return linkstate.Seal{Sig: simMAC(a.id, b), Cert: simCert(a.id)}, nil
}

func (a simAuth) Check(k linkstate.Key, b []byte, s linkstate.Seal) error {
	switch {
	case s.IsZero():
		return &linkstate.AuthError{Reason: linkstate.RefusedUnsigned, Err: errors.New("no seal")}
	case len(s.Cert) != 4:
		return &linkstate.AuthError{Reason: linkstate.RefusedCertificate, Err: errors.New("not a certificate")}
	case binary.BigEndian.Uint32(s.Cert) != k.Origin:
		return &linkstate.AuthError{Reason: linkstate.RefusedIdentity, Err: errors.New("certificate of another router")}
	case !hmac.Equal(s.Sig, simMAC(k.Origin, b)):
		return &linkstate.AuthError{Reason: linkstate.RefusedSignature, Err: errors.New("bad signature")}
	}
	return nil
}

// overheard keeps the advertisements in a frame a compromised broker
// receives, whole (it takes no deltas), for Heard.
func (s *Sim) overheard(frame []byte) {
	var f transport.ParsedFrame
	if err := transport.ParseFrame(frame, &f); err != nil {
		return
	}
	for _, c := range f.Control {
		if c.GetLsa() == nil && c.GetPredicateAd() == nil {
			continue
		}
		m, err := transport.ControlFromProto(c)
		if err != nil {
			continue
		}
		var k linkstate.Key
		switch m := m.(type) {
		case *linkstate.LSA:
			k = linkstate.Key{Kind: linkstate.KindRouter, Origin: m.Origin}
		case *linkstate.PredAd:
			k = linkstate.Key{Kind: linkstate.KindPredicate, Origin: m.Origin}
		}
		if s.heard == nil {
			s.heard = map[linkstate.Key][]linkstate.Message{}
		}
		if h := s.heard[k]; len(h) >= maxHeard {
			s.heard[k] = slices.Delete(h, 0, 1)
		}
		s.heard[k] = append(s.heard[k], m)
	}
}

// maxHeard bounds the advertisements of one origin and kind kept.
const maxHeard = 16

// Heard returns the advertisements of origin's of kind k that compromised
// brokers have received so far, oldest first: what they can replay.
func (s *Sim) Heard(k linkstate.Key) []linkstate.Message { return s.heard[k] }
