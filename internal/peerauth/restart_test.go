package peerauth

import (
	"crypto/tls"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dripmesh/drip/internal/encoding"
	"github.com/dripmesh/drip/internal/linkstate"
)

// pair is two link-state routers, 1 and 2, that authenticate with real
// certificates, linked by a zero-delay network.
type pair struct {
	t     *testing.T
	nodes map[uint32]*linkstate.Node
	refs  []error
}

func (p *pair) node(id uint32, crt tls.Certificate, root *ca, clk *clock) {
	a := newAuth(p.t, root, "m", id, crt, clk)
	cfg := linkstate.DefaultConfig(id, "")
	cfg.Auth = a
	n, err := linkstate.New(cfg)
	require.NoError(p.t, err)
	p.nodes[id] = n
}

// pump delivers messages until none are left.
func (p *pair) pump(now time.Duration) {
	for range 1000 {
		moved := false
		for id, n := range p.nodes {
			for n.HasReady() {
				rd := n.Ready()
				n.Advance()
				for _, e := range rd.Messages {
					moved = true
					if dst := p.nodes[e.To]; dst != nil {
						if err := dst.Step(id, e.Msg, now); err != nil {
							p.refs = append(p.refs, err)
						}
					}
				}
			}
		}
		if !moved {
			return
		}
	}
	p.t.Fatal("messages keep flowing")
}

func (p *pair) link(now time.Duration) {
	require.NoError(p.t, p.nodes[1].LinkUp(2, 1, now))
	require.NoError(p.t, p.nodes[2].LinkUp(1, 1, now))
	for i := range 10 {
		p.pump(now)
		for _, n := range p.nodes {
			n.Tick(now + time.Duration(i)*time.Second)
		}
	}
}

// TestRestartAfterCertificateExpired: router 1 restarts with a new
// certificate after its previous one expired. Router 2 still holds router
// 1's advertisements of before, sealed with the expired certificate, and
// sends them back; router 1 accepts them as its own (an expired
// certificate is fine for that, and only for that) and re-originates past
// them, so router 2 ends up with the new incarnation's predicate.
// Refusing them would leave router 2 preferring the old copies until they
// aged out (MaxAge).
func TestRestartAfterCertificateExpired(t *testing.T) {
	root := newCA(t)
	clk := &clock{t0}
	p := &pair{t: t, nodes: map[uint32]*linkstate.Node{}}
	crt2 := root.issue(t, cert{uris: []string{IdentityURI("m", 2)}, from: t0.Add(-time.Hour), to: t0.Add(5 * time.Hour)})
	p.node(1, root.issue(t, cert{}), root, clk) // valid until t0+1h
	p.node(2, crt2, root, clk)
	p.link(0)
	var old encoding.Bloom
	old.Set(1)
	for range 3 { // some sequence numbers
		old.Set(old.PopCount() + 1)
		require.NoError(t, p.nodes[1].SetLocalPredicate([]encoding.Bloom{old}))
		p.pump(10 * time.Second)
	}
	require.Equal(t, []encoding.Bloom{old}, p.nodes[2].Predicates()[1])

	// Two hours later router 1 comes back with a new certificate.
	clk.t = t0.Add(2 * time.Hour)
	p.nodes[2].LinkDown(1, time.Minute)
	p.pump(time.Minute)
	p.node(1, root.issue(t, cert{from: t0.Add(time.Hour), to: t0.Add(3 * time.Hour)}), root, clk)
	var fresh encoding.Bloom
	fresh.Set(99)
	require.NoError(t, p.nodes[1].SetLocalPredicate([]encoding.Bloom{fresh}))
	p.link(2 * time.Minute)
	assert.Equal(t, []encoding.Bloom{fresh}, p.nodes[2].Predicates()[1], "router 2 holds the new incarnation's predicate")
	assert.Empty(t, p.refs)

	// Another router's expired certificate is still refused.
	b3 := newAuth(t, root, "m", 3, root.issue(t, cert{uris: []string{IdentityURI("m", 3)}}), &clock{t0})
	k := linkstate.Key{Kind: linkstate.KindRouter, Origin: 3}
	s, err := b3.Seal(k, []byte("x"))
	require.NoError(t, err)
	a2 := newAuth(t, root, "m", 2, crt2, clk)
	assert.Equal(t, linkstate.RefusedCertificate, reason(a2.Check(k, []byte("x"), s)))
}
