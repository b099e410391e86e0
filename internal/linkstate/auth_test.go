package linkstate

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dripmesh/drip/internal/encoding"
)

// hmacAuth is a stand-in for internal/peerauth: each router has a secret
// key, a "certificate" is the 4-byte ID of the router whose key signed,
// and every router knows every key (the CA). It is deterministic, so the
// mesh tests stay reproducible.
type hmacAuth struct {
	id   uint32
	keys map[uint32][]byte
	fail bool // Seal fails
}

func (a *hmacAuth) mac(signer uint32, b []byte) []byte {
	h := hmac.New(sha256.New, a.keys[signer])
	h.Write(b)
	return h.Sum(nil)
}

func certOf(id uint32) []byte { return binary.BigEndian.AppendUint32(nil, id) }

func (a *hmacAuth) Seal(k Key, b []byte) (Seal, error) {
	if a.fail {
		return Seal{}, errors.New("signer unavailable")
	}
	if k.Origin != a.id {
		return Seal{}, fmt.Errorf("router %d cannot sign for %d", a.id, k.Origin)
	}
	return Seal{Sig: a.mac(a.id, b), Cert: certOf(a.id)}, nil
}

func (a *hmacAuth) Check(k Key, b []byte, s Seal) error {
	switch {
	case s.IsZero():
		return &AuthError{Reason: RefusedUnsigned, Err: errors.New("no seal")}
	case len(s.Cert) != 4 || a.keys[binary.BigEndian.Uint32(s.Cert)] == nil:
		return &AuthError{Reason: RefusedCertificate, Err: errors.New("unknown certificate")}
	case binary.BigEndian.Uint32(s.Cert) != k.Origin:
		return &AuthError{Reason: RefusedIdentity, Err: errors.New("certificate of another router")}
	case !hmac.Equal(s.Sig, a.mac(k.Origin, b)):
		return &AuthError{Reason: RefusedSignature, Err: errors.New("bad signature")}
	}
	return nil
}

// pki gives routers 1..n keys and returns a Config edit installing router
// id's authenticator.
type pki map[uint32][]byte

func newPKI(n int) pki {
	p := pki{}
	for id := uint32(1); id <= uint32(n); id++ {
		p[id] = []byte(fmt.Sprintf("key of router %d", id))
	}
	return p
}

func (p pki) auth(id uint32) *hmacAuth { return &hmacAuth{id: id, keys: p} }

func (p pki) node(t testing.TB, id uint32) *Node {
	return newNode(t, id, func(c *Config) { c.Auth = p.auth(id) })
}

// sealAs signs m with router signer's key whatever its origin.
func (p pki) sealAs(signer uint32, m Message) Message {
	a := p.auth(signer)
	switch m := m.(type) {
	case *LSA:
		c := *m
		c.Seal = Seal{Sig: a.mac(signer, c.AppendSigned(nil)), Cert: certOf(signer)}
		return &c
	case *PredAd:
		c := *m
		c.Seal = Seal{Sig: a.mac(signer, c.AppendSigned(nil)), Cert: certOf(signer)}
		return &c
	}
	panic(fmt.Sprintf("cannot seal %T", m))
}

func authLine(t *testing.T, p pki, k int) *mesh {
	nodes := make([]*Node, k)
	for i := range nodes {
		nodes[i] = p.node(t, uint32(i+1))
	}
	m := newMesh(t, nodes...)
	for i := 1; i < k; i++ {
		m.link(uint32(i), uint32(i+1), 1, 0)
	}
	m.reset()
	return m
}

func refusal(err error) string {
	var ae *AuthError
	if errors.As(err, &ae) {
		return ae.Reason
	}
	return ""
}

// TestAuthCheckOutcomes: what Step does with a received advertisement for
// each verdict of the Authenticator. Router 2 is the neighbour that sends;
// router 3 is the origin the advertisements claim (or router 1 itself).
func TestAuthCheckOutcomes(t *testing.T) {
	p := newPKI(4)
	genuine := &LSA{Origin: 3, Seq: 5, Links: []Link{{Neighbor: 2, Cost: 1}}}
	pred := &PredAd{Origin: 3, Seq: 5, Params: encoding.DefaultParams(), Filters: []encoding.Bloom{bloom(7)},
		Classes: []QoSClass{{Deadline: time.Second, Filters: []encoding.Bloom{bloom(7)}}}}
	tampered := func(m Message, edit func(Message)) Message { edit(m); return m }
	for _, tc := range []struct {
		name    string
		msg     Message
		refused string // "" installs it
		jump    bool   // router 1 re-originates past it
	}{
		{"genuine LSA", p.sealAs(3, genuine), "", false},
		{"genuine predicate", p.sealAs(3, pred), "", false},
		{"age is not signed", tampered(p.sealAs(3, genuine), func(m Message) { m.(*LSA).Age = time.Minute }), "", false},
		{"unsigned", genuine, RefusedUnsigned, false},
		{"unsigned max seq", forge(3, KindRouter, MaxSeq, 0), RefusedUnsigned, false},
		{"signed by the sender in 3's name", p.sealAs(2, genuine), RefusedIdentity, false},
		{"predicate signed by the sender", p.sealAs(2, pred), RefusedIdentity, false},
		{"unknown certificate", tampered(p.sealAs(3, genuine), func(m Message) { m.(*LSA).Seal.Cert = certOf(9) }), RefusedCertificate, false},
		{"seq raised", tampered(p.sealAs(3, genuine), func(m Message) { m.(*LSA).Seq = 6 }), RefusedSignature, false},
		{"link cost changed", tampered(p.sealAs(3, genuine), func(m Message) {
			m.(*LSA).Links = []Link{{Neighbor: 2, Cost: 9}}
		}), RefusedSignature, false},
		{"withdrawn", tampered(p.sealAs(3, &LSA{Origin: 3, Seq: 5}), func(m Message) { m.(*LSA).Withdrawn = true }), RefusedSignature, false},
		{"filter changed", tampered(p.sealAs(3, pred), func(m Message) { m.(*PredAd).Filters = []encoding.Bloom{bloom(8)} }), RefusedSignature, false},
		{"class dropped", tampered(p.sealAs(3, pred), func(m Message) { m.(*PredAd).Classes = nil }), RefusedSignature, false},
		{"own entry, forged", p.sealAs(2, &LSA{Origin: 1, Seq: 1 << 40}), RefusedIdentity, false},
		{"own entry, unsigned max seq", forge(1, KindPredicate, MaxSeq, 0), RefusedUnsigned, false},
		{"own entry of an earlier incarnation", p.sealAs(1, &LSA{Origin: 1, Seq: 40}), "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := p.node(t, 1)
			m := newMesh(t, n, p.node(t, 2), p.node(t, 4)) // 4 would receive a flood
			m.link(1, 2, 1, 0)
			m.link(1, 4, 1, 0)
			require.Equal(t, StateFull, n.nbrs[4].state)
			digest := n.Digest()
			err := n.Step(2, tc.msg, time.Second)
			rd := drain(n)
			assert.Equal(t, tc.refused, refusal(err), "%v", err)
			assert.Equal(t, tc.jump, len(events(rd, EventSeqJump)) > 0)
			if tc.refused != "" {
				assert.Equal(t, digest, n.Digest(), "a refused advertisement changed the database")
				assert.Empty(t, only[*LSA](to(rd, 4)), "a refused advertisement was flooded")
				assert.Empty(t, only[*PredAd](to(rd, 4)), "a refused advertisement was flooded")
				return
			}
			if !tc.jump {
				assert.NotEqual(t, digest, n.Digest(), "a genuine advertisement was not installed")
			}
			// Whatever is sent on is sealed by its origin.
			for _, e := range rd.Messages {
				if e.To != 4 {
					continue
				}
				switch m := e.Msg.(type) {
				case *LSA:
					assert.NoError(t, p.auth(4).Check(Key{KindRouter, m.Origin}, m.AppendSigned(nil), m.Seal))
				case *PredAd:
					assert.NoError(t, p.auth(4).Check(Key{KindPredicate, m.Origin}, m.AppendSigned(nil), m.Seal))
				}
			}
		})
	}
}

// TestAuthSummaryCannotForceAJump: with signing on, a database summary
// that claims a newer copy of the router's own entry makes it ask for the
// copy, not jump: an unsigned summary could otherwise make it flush and
// restart its sequence at will. Without signing it jumps, as before.
func TestAuthSummaryCannotForceAJump(t *testing.T) {
	p := newPKI(2)
	for _, signed := range []bool{true, false} {
		n := newNode(t, 1)
		if signed {
			n = p.node(t, 1)
		}
		m := newMesh(t, n, p.node(t, 2))
		m.link(1, 2, 1, 0)
		drain(n)
		require.NoError(t, n.Step(2, &DBSummary{Entries: []Summary{{Kind: KindRouter, Origin: 1, Seq: MaxSeq, Sum: 1}}}, time.Second))
		rd := drain(n)
		if signed {
			assert.Empty(t, events(rd, EventSeqJump))
			assert.Empty(t, events(rd, EventSeqFlush))
			reqs := only[*DBRequest](to(rd, 2))
			require.Len(t, reqs, 1)
			assert.Equal(t, []Key{{KindRouter, 1}}, reqs[0].Keys)
		} else {
			assert.NotEmpty(t, events(rd, EventSeqFlush))
		}
	}
}

// TestAuthOwnFlushIsSealed: a genuine copy of a router's own entry with
// the largest sequence number (an earlier incarnation signed it) is flushed
// as without signing (RFC 2328 §14.1), and the flush, sealed by the origin,
// removes the copies the other routers hold.
func TestAuthOwnFlushIsSealed(t *testing.T) {
	p := newPKI(3)
	m := authLine(t, p, 3)
	var refused []error
	m.stepErr = func(_, _ uint32, err error) { refused = append(refused, err) }
	for _, kind := range []Kind{KindRouter, KindPredicate} {
		m.reset()
		old := p.sealAs(1, forge(1, kind, MaxSeq, 0))
		require.NoError(t, m.nodes[2].Step(3, old, time.Second))
		m.pump(time.Second)
		require.NotEmpty(t, events(*m.log[1], EventSeqFlush), "%s", kind)
		requireGenuine(t, m)
		for _, id := range m.ids() {
			assert.Less(t, m.nodes[id].lsdb[Key{kind, 1}].seq, uint64(10), "router %d holds %s of 1", id, kind)
		}
	}
	require.Empty(t, refused)
	// The sealing is what lets it through: a flush that is not is refused.
	n := m.nodes[2]
	n.lsdb[Key{KindRouter, 1}].seq = MaxSeq // as if it held a MaxSeq copy
	err := n.Step(1, &LSA{Origin: 1, Seq: MaxSeq, Age: n.cfg.MaxAge}, 2*time.Second)
	assert.Equal(t, RefusedUnsigned, refusal(err))
	assert.Equal(t, MaxSeq, n.lsdb[Key{KindRouter, 1}].seq)
}

// TestAuthSealFailure: a signer that fails is reported, and the entry goes
// out unsigned (its neighbours will refuse it) rather than not at all.
func TestAuthSealFailure(t *testing.T) {
	p := newPKI(2)
	a := p.auth(1)
	n := newNode(t, 1, func(c *Config) { c.Auth = a })
	require.NoError(t, n.LinkUp(2, 1, 0))
	drain(n)
	a.fail = true
	require.NoError(t, n.SetLocalPredicate([]encoding.Bloom{bloom(3)}))
	rd := drain(n)
	require.Len(t, events(rd, EventSealFailed), 1)
	assert.Equal(t, "seal_failed kind=predicate seq=2", events(rd, EventSealFailed)[0].String())
}

// TestAuthForgeriesNeverInstalled is a property test: a compromised
// router (5, with a valid key for itself) forges advertisements in the
// other routers' names with plausible sequence numbers (just past the
// genuine ones) and the edges of the range, ages up to MaxAge, and every
// way of sealing them a forger has — none, its own key, another router's
// certificate, a genuine seal copied onto other contents — plus database
// summaries claiming newer copies. No router ever installs or acts on a
// forgery: every entry anywhere verifies and is no newer than its
// origin's, no genuine router jumps or flushes, and the mesh keeps its
// genuine routes throughout and after. A failure names the seed; rerun
// it alone with -run 'TestAuthForgeriesNeverInstalled/seed_N'.
func TestAuthForgeriesNeverInstalled(t *testing.T) {
	for seed := uint64(1); seed <= 100; seed++ {
		t.Run(fmt.Sprintf("seed %d", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 40))
			p := newPKI(5)
			m := authLine(t, p, 4)
			evil := p.node(t, 5)
			m.nodes[5], m.log[5] = evil, &Ready{}
			m.link(3, 5, 1, 0)
			if rng.IntN(2) == 0 {
				m.link(1, 5, 1, 0) // a neighbour of the victims too
			}
			for _, id := range []uint32{1, 2, 3, 4} {
				require.NoError(t, m.nodes[id].SetLocalPredicate([]encoding.Bloom{bloom(int(id))}))
			}
			m.pump(0)
			m.reset()
			refused := map[string]int{}
			m.stepErr = func(_, _ uint32, err error) {
				if r := refusal(err); r != "" {
					refused[r]++
				}
			}
			maxAge := m.nodes[1].Config().MaxAge
			now := time.Second
			for range 1 + rng.IntN(12) {
				origin := uint32(1 + rng.IntN(4))
				kind := Kind(KindRouter + Kind(rng.IntN(2)))
				cur := m.nodes[origin].lsdb[Key{kind, origin}]
				seq := []uint64{cur.seq + 1, cur.seq + 2, cur.seq + 1000, cur.seq, 1 << 63, MaxSeq}[rng.IntN(6)]
				age := []time.Duration{0, time.Second, maxAge - time.Second, maxAge}[rng.IntN(4)]
				var body Message
				if kind == KindRouter {
					body = &LSA{Origin: origin, Seq: seq, Age: age, Links: []Link{{Neighbor: 5, Cost: 1}}}
				} else {
					body = &PredAd{Origin: origin, Seq: seq, Age: age, Params: encoding.DefaultParams(), Filters: []encoding.Bloom{bloom(100)}}
				}
				var msg Message
				switch rng.IntN(4) {
				case 0: // unsigned
					msg = body
				case 1: // its own valid certificate
					msg = p.sealAs(5, body)
				case 2: // the origin's certificate, its own signature
					msg = p.sealAs(5, body)
					if a, ok := msg.(*LSA); ok {
						a.Seal.Cert = certOf(origin)
					} else {
						msg.(*PredAd).Seal.Cert = certOf(origin)
					}
				case 3: // the origin's genuine seal on other contents
					msg = body
					if a, ok := msg.(*LSA); ok {
						a.Seal = cur.lsa.Seal
					} else {
						msg.(*PredAd).Seal = cur.pred.Seal
					}
				}
				to := []uint32{3, 1}[rng.IntN(2)]
				if evil.nbrs[to] == nil {
					to = 3
				}
				if rng.IntN(4) == 0 {
					msg = &DBSummary{Entries: []Summary{{Kind: kind, Origin: origin, Seq: seq, Sum: rng.Uint64()}}}
				}
				_ = m.nodes[to].Step(5, msg, now)
				m.pump(now)
				requireNoForgery(t, p, m)
				now += time.Duration(rng.IntN(3000)) * time.Millisecond
			}
			for range 10 {
				now += time.Second
				m.tick(now)
				requireNoForgery(t, p, m)
			}
			requireGenuine(t, m)
			for _, id := range []uint32{1, 2, 3, 4} {
				require.Empty(t, events(*m.log[id], EventSeqJump), "router %d acted on a forgery", id)
				require.Empty(t, events(*m.log[id], EventSeqFlush), "router %d acted on a forgery", id)
				for _, at := range m.ids() {
					require.Equal(t, []encoding.Bloom{bloom(int(id))}, m.nodes[at].Predicates()[id], "router %d's row at %d", id, at)
				}
			}
			require.Empty(t, refused[""], "refusals without a reason")
		})
	}
}

// requireNoForgery checks that every entry every router holds verifies
// and is no newer than what its origin holds of itself.
func requireNoForgery(t *testing.T, p pki, m *mesh) {
	t.Helper()
	check := p.auth(0)
	for _, id := range m.ids() {
		for k, e := range m.nodes[id].lsdb {
			b, s := e.signed()
			require.NoError(t, check.Check(k, b, s), "router %d holds a forged %s of %d", id, k.Kind, k.Origin)
			own := m.nodes[k.Origin].lsdb[k]
			require.LessOrEqual(t, e.seq, own.seq, "router %d holds %s of %d newer than its origin's", id, k.Kind, k.Origin)
		}
	}
}

// TestAuthOffIsUnchanged: without an Authenticator nothing is sealed, and
// the messages are those of before (the wire tests pin their encoding).
func TestAuthOffIsUnchanged(t *testing.T) {
	m := line(t, 2)
	require.NoError(t, m.nodes[1].SetLocalPredicate([]encoding.Bloom{bloom(1)}))
	m.pump(time.Second)
	for _, e := range m.log[1].Messages {
		switch x := e.Msg.(type) {
		case *LSA:
			assert.True(t, x.Seal.IsZero())
		case *PredAd:
			assert.True(t, x.Seal.IsZero())
		}
	}
}

// TestAppendSignedGolden pins the signed bytes: every router must produce
// the same bytes for one advertisement (they are exchanged between brokers
// in effect), so a change needs a new signedVersion.
func TestAppendSignedGolden(t *testing.T) {
	lsa := &LSA{Origin: 7, Seq: 0x0102030405060708, Age: time.Hour, Links: []Link{{Neighbor: 2, Cost: 10}, {Neighbor: 9, Cost: 1}}}
	assert.Equal(t,
		"0101"+"00000007"+"0102030405060708"+"00"+"00000002"+"00000002"+"0000000a"+"00000009"+"00000001",
		fmt.Sprintf("%x", lsa.AppendSigned(nil)))
	withdrawn := &LSA{Origin: 7, Seq: 3, Withdrawn: true}
	assert.Equal(t, "0101"+"00000007"+"0000000000000003"+"01"+"00000000", fmt.Sprintf("%x", withdrawn.AppendSigned(nil)))
	pred := &PredAd{Origin: 7, Seq: 2, Params: encoding.DefaultParams(), Filters: []encoding.Bloom{bloom(3, 300), {}},
		Classes: []QoSClass{{Deadline: time.Millisecond, TwoPaths: true, Filters: []encoding.Bloom{bloom(5)}}}}
	assert.Equal(t,
		"0102"+"00000007"+"0000000000000002"+"00"+
			"01"+"00000800"+"00000006"+ // cat-v2, M, K
			"00000002"+"00000002"+"00000003"+"0000012c"+"00000000"+
			"00000001"+"00000000000f4240"+"01"+"00000001"+"00000001"+"00000005",
		fmt.Sprintf("%x", pred.AppendSigned(nil)))
}
