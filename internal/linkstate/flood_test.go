package linkstate

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dripmesh/drip/internal/encoding"
)

func bloom(pos ...int) encoding.Bloom {
	var b encoding.Bloom
	for _, p := range pos {
		b.Set(p)
	}
	return b
}

// line links nodes 1-2-…-k in a zero-delay mesh at time 0.
func line(t *testing.T, k int) *mesh {
	nodes := make([]*Node, k)
	for i := range nodes {
		nodes[i] = newNode(t, uint32(i+1))
	}
	m := newMesh(t, nodes...)
	for i := 1; i < k; i++ {
		m.link(uint32(i), uint32(i+1), 1, 0)
	}
	m.reset()
	return m
}

func requireSynced(t *testing.T, m *mesh) {
	t.Helper()
	var d uint64
	for i, id := range m.ids() {
		if i == 0 {
			d = m.nodes[id].Digest()
			continue
		}
		require.Equal(t, m.nodes[m.ids()[0]].Summaries(), m.nodes[id].Summaries(), "LSDB of %d", id)
		require.Equal(t, d, m.nodes[id].Digest())
	}
}

func TestLineConverges(t *testing.T) {
	// Carzaniga09 §2.2: every router learns UNICAST and PREDICATES.
	m := line(t, 4)
	requireSynced(t, m)
	for _, id := range m.ids() {
		r := m.nodes[id].Routes()
		assert.Equal(t, 4, r.Known())
		for dst := uint32(1); dst <= 4; dst++ {
			next, ok := r.NextHop(dst)
			if dst == id {
				assert.False(t, ok)
				continue
			}
			require.True(t, ok)
			if dst > id {
				assert.Equal(t, id+1, next)
			} else {
				assert.Equal(t, id-1, next)
			}
		}
		assert.Len(t, m.nodes[id].Predicates(), 4, "every router's (empty) predicate is published")
	}
}

func TestFloodToAllButSender(t *testing.T) {
	// docs/design.md §3: flooding to all neighbours but the sender.
	m := line(t, 3)
	f := []encoding.Bloom{bloom(1, 5, 9)}
	require.NoError(t, m.nodes[1].SetLocalPredicate(f))
	m.pump(time.Second)

	fromB := m.log[2].Messages
	var toA, toC int
	for _, e := range fromB {
		if p, ok := e.Msg.(*PredAd); ok && p.Origin == 1 {
			if e.To == 1 {
				toA++
			} else {
				toC++
			}
		}
	}
	assert.Equal(t, 0, toA, "never back to the sender")
	assert.Equal(t, 1, toC)
	assert.Equal(t, f, m.nodes[3].Predicates()[1])
	var ups []PredicateUpdate
	for _, u := range m.log[3].PredicateUpdates {
		if u.Router == 1 {
			ups = append(ups, u)
		}
	}
	assert.Equal(t, []PredicateUpdate{{Router: 1, Filters: f}}, ups)
	requireSynced(t, m)

	// The same predicate again is not re-advertised.
	m.reset()
	require.NoError(t, m.nodes[1].SetLocalPredicate([]encoding.Bloom{bloom(1, 5, 9)}))
	assert.False(t, m.nodes[1].HasReady())
}

func TestSetLocalPredicateRejectsWideFilters(t *testing.T) {
	a := newNode(t, 1, func(c *Config) { c.Encoding = encoding.Params{M: 256, K: 10} })
	err := a.SetLocalPredicate([]encoding.Bloom{bloom(1), bloom(3, 256)})
	require.ErrorContains(t, err, "filter 1 has bit")
	require.ErrorContains(t, err, "beyond M=")
}

func TestOlderCopyIsAnsweredWithOurs(t *testing.T) {
	// docs/design.md §3: a neighbour sending an older copy gets the newer one back.
	m := line(t, 3)
	for range 3 {
		require.NoError(t, m.nodes[1].SetLocalPredicate([]encoding.Bloom{bloom(len(m.log[1].Messages))}))
		m.pump(time.Second)
	}
	b := m.nodes[2]
	cur := b.lsdb[Key{KindPredicate, 1}]
	require.Greater(t, cur.seq, uint64(2))
	require.NoError(t, b.Step(3, &PredAd{Origin: 1, Seq: 1, Params: b.cfg.Encoding}, time.Second))
	rd := drain(b)
	back := only[*PredAd](to(rd, 3))
	require.Len(t, back, 1)
	assert.Equal(t, cur.seq, back[0].Seq)
	assert.Empty(t, to(rd, 1), "nothing to flood")
	assert.Equal(t, cur, b.lsdb[Key{KindPredicate, 1}])

	// An equal copy is a duplicate: no answer.
	require.NoError(t, b.Step(3, cur.message(time.Second), time.Second))
	assert.False(t, b.HasReady())
}

func TestSequenceJumpAfterRestart(t *testing.T) {
	// docs/design.md §3, as OSPF: a router that restarts from sequence number 1
	// learns its previous incarnation's entries from the mesh and
	// re-originates past them.
	m := line(t, 3)
	for i := range 5 {
		require.NoError(t, m.nodes[3].SetLocalPredicate([]encoding.Bloom{bloom(i)}))
		require.NoError(t, m.nodes[3].LinkUp(2, uint32(i+2), time.Second))
		m.pump(time.Second)
	}
	oldLSA, _ := m.nodes[1].LSA(3)
	oldPred := m.nodes[1].lsdb[Key{KindPredicate, 3}].seq

	// Router 3 dies with its link, and comes back fresh.
	m.nodes[2].LinkDown(3, 2*time.Second)
	delete(m.nodes, 3)
	m.pump(2 * time.Second)
	c := newNode(t, 3)
	m.nodes[3], m.log[3] = c, &Ready{}
	m.link(2, 3, 1, 3*time.Second)

	jumps := events(*m.log[3], EventSeqJump)
	assert.NotEmpty(t, jumps)
	lsa, _ := c.LSA(3)
	assert.Greater(t, lsa.Seq, oldLSA.Seq)
	assert.Greater(t, c.lsdb[Key{KindPredicate, 3}].seq, oldPred)
	requireSynced(t, m)
	assert.Empty(t, m.nodes[1].Predicates()[3], "the new incarnation's empty predicate won")
	next, ok := m.nodes[1].Routes().NextHop(3)
	require.True(t, ok)
	assert.Equal(t, uint32(2), next)
}

func TestSequenceJumpOnEqualSeqOtherContents(t *testing.T) {
	a := newNode(t, 1)
	b := newNode(t, 2)
	m := newMesh(t, a, b)
	m.link(1, 2, 1, 0)
	own, _ := a.LSA(1)
	require.NoError(t, a.Step(2, &LSA{Origin: 1, Seq: own.Seq, Links: []Link{{Neighbor: 9, Cost: 3}}}, ms))
	rd := drain(a)
	require.Len(t, events(rd, EventSeqJump), 1)
	lsas := only[*LSA](to(rd, 2))
	require.Len(t, lsas, 1)
	assert.Equal(t, own.Seq+1, lsas[0].Seq)
	assert.Equal(t, own.Links, lsas[0].Links)

	// A higher one for the predicate.
	require.NoError(t, a.Step(2, &PredAd{Origin: 1, Seq: 40, Params: a.cfg.Encoding}, ms))
	rd = drain(a)
	ads := only[*PredAd](to(rd, 2))
	require.Len(t, ads, 1)
	assert.Equal(t, uint64(41), ads[0].Seq)
}

func TestWithdrawal(t *testing.T) {
	// docs/design.md §3: withdrawal of routers that leave.
	m := line(t, 3)
	require.NoError(t, m.nodes[3].SetLocalPredicate([]encoding.Bloom{bloom(3)}))
	m.pump(time.Second)
	require.Contains(t, m.nodes[1].Predicates(), uint32(3))
	m.reset()

	m.nodes[3].Shutdown()
	m.pump(2 * time.Second)
	for _, id := range []uint32{1, 2} {
		n := m.nodes[id]
		assert.False(t, n.Routes().Reachable(3))
		assert.NotContains(t, n.Predicates(), uint32(3))
		assert.Contains(t, m.log[id].PredicateUpdates, PredicateUpdate{Router: 3, Removed: true})
		lsa, ok := n.LSA(3)
		require.True(t, ok, "withdrawn entries stay until MaxAge so older copies cannot revive the router")
		assert.True(t, lsa.Withdrawn)
	}
	down := events(*m.log[3], EventAdjacencyDown)
	require.Len(t, down, 1)
	assert.Equal(t, DownShutdown, down[0].Reason)
	require.ErrorIs(t, m.nodes[3].Step(2, &Hello{Router: 2, Version: Version}, 3*time.Second), ErrShutdown)
	require.ErrorIs(t, m.nodes[3].SetLocalPredicate(nil), ErrShutdown)
}

func TestDatabaseExchange(t *testing.T) {
	// docs/design.md §3: database exchange when an adjacency comes up.
	m := line(t, 3)
	require.NoError(t, m.nodes[3].SetLocalPredicate([]encoding.Bloom{bloom(7)}))
	m.pump(time.Second)
	d := newNode(t, 4)
	require.NoError(t, d.SetLocalPredicate([]encoding.Bloom{bloom(8)}))
	m.nodes[4], m.log[4] = d, &Ready{}
	m.reset()
	m.link(1, 4, 1, 2*time.Second)

	sums := only[*DBSummary](to(*m.log[1], 4))
	require.Len(t, sums, 1)
	assert.Len(t, sums[0].Entries, 6)
	sums = only[*DBSummary](to(*m.log[4], 1))
	require.Len(t, sums, 1, "both sides send their summary")
	assert.Len(t, sums[0].Entries, 2)
	reqs := only[*DBRequest](to(*m.log[1], 4))
	require.Len(t, reqs, 1)
	assert.Equal(t, []Key{{KindRouter, 4}, {KindPredicate, 4}}, reqs[0].Keys)
	reqs = only[*DBRequest](to(*m.log[4], 1))
	require.Len(t, reqs, 1)
	assert.Equal(t, []Key{{KindRouter, 1}, {KindRouter, 2}, {KindRouter, 3}, {KindPredicate, 1}, {KindPredicate, 2}, {KindPredicate, 3}},
		reqs[0].Keys)
	// Each side pulls what it lacks, so no entry crosses the link twice.
	for _, dir := range [][2]uint32{{1, 4}, {4, 1}} {
		sent := map[Summary]int{}
		for _, msg := range to(*m.log[dir[0]], dir[1]) {
			switch e := msg.(type) {
			case *LSA:
				sent[newLSAEntry(e, 0).summary()]++
			case *PredAd:
				sent[newPredEntry(e, 0).summary()]++
			}
		}
		for s, n := range sent {
			assert.Equal(t, 1, n, "%d→%d sent %+v", dir[0], dir[1], s)
		}
	}
	requireSynced(t, m)
	assert.Equal(t, []encoding.Bloom{bloom(7)}, d.Predicates()[3])
	assert.Equal(t, []encoding.Bloom{bloom(8)}, m.nodes[3].Predicates()[4])
	next, ok := d.Routes().NextHop(3)
	require.True(t, ok)
	assert.Equal(t, uint32(1), next)
}

func TestAntiEntropyHealsLostFloods(t *testing.T) {
	// docs/design.md §3 / brief: hellos carry an LSDB digest; neighbours whose
	// digests keep differing exchange summaries, healing dropped messages
	// without acknowledgements. Either side may be the one behind.
	for _, tc := range []struct {
		name   string
		origin uint32 // whose flood is lost
	}{
		{"higher ID behind", 1},
		{"lower ID behind", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := line(t, 2)
			other := 3 - tc.origin
			dropping := true
			m.drop = func(from, _ uint32, msg Message) bool {
				_, isAd := msg.(*PredAd)
				return dropping && isAd && from == tc.origin
			}
			f := []encoding.Bloom{bloom(4, 2)}
			require.NoError(t, m.nodes[tc.origin].SetLocalPredicate(f))
			m.pump(500 * ms)
			dropping = false
			require.Empty(t, m.nodes[other].Predicates()[tc.origin], "the flood was lost")

			m.tick(time.Second)
			require.Empty(t, m.nodes[other].Predicates()[tc.origin], "one mismatch may be a flood in flight")
			m.tick(2 * time.Second)
			assert.Equal(t, f, m.nodes[other].Predicates()[tc.origin])
			assert.Len(t, events(*m.log[1], EventAntiEntropy), 1, "the lower ID starts the exchange")
			assert.Empty(t, events(*m.log[2], EventAntiEntropy))
			requireSynced(t, m)
		})
	}
}

func TestMaxAge(t *testing.T) {
	// docs/design.md §3: aging of routers that stopped refreshing. An entry carries
	// its age, so it expires MaxAge after its origin created it.
	a := newNode(t, 1)
	require.NoError(t, a.LinkUp(2, 1, 0))
	maxAge := a.Config().MaxAge
	require.NoError(t, a.Step(2, &LSA{Origin: 9, Seq: 4, Age: maxAge - time.Second}, 10*time.Second))
	require.NoError(t, a.Step(2, &LSA{Origin: 8, Seq: 4, Age: maxAge}, 10*time.Second))
	_, ok := a.LSA(9)
	assert.True(t, ok)
	_, ok = a.LSA(8)
	assert.False(t, ok, "a copy at MaxAge is not installed")
	drain(a)

	a.Tick(11*time.Second - 1)
	_, ok = a.LSA(9)
	assert.True(t, ok)
	a.Tick(11 * time.Second)
	_, ok = a.LSA(9)
	assert.False(t, ok)
	exp := events(drain(a), EventExpired)
	require.Len(t, exp, 1)
	assert.Equal(t, Event{Type: EventExpired, Peer: 9, Kind: KindRouter, Seq: 4}, exp[0])

	// The own entries never expire: they are refreshed instead.
	a.Tick(maxAge + 11*time.Second)
	_, ok = a.LSA(1)
	assert.True(t, ok)
}

func TestRefresh(t *testing.T) {
	m := line(t, 2)
	a := m.nodes[1]
	before, _ := a.LSA(1)
	refresh := a.Config().RefreshInterval
	for now := time.Duration(0); now <= refresh; now += time.Second {
		m.tick(now)
	}
	after, _ := a.LSA(1)
	assert.Greater(t, after.Seq, before.Seq)
	assert.Equal(t, before.Links, after.Links)
	got, _ := m.nodes[2].LSA(1)
	assert.Equal(t, after.Seq, got.Seq)
	assert.Empty(t, m.log[2].PredicateUpdates, "a refresh with the same contents publishes nothing")
	assert.Empty(t, events(*m.log[2], EventSPF), "and runs no SPF")
	// Entries stay alive well past MaxAge while refreshed.
	for now := refresh; now <= 2*a.Config().MaxAge; now += 10 * time.Second {
		m.tick(now)
	}
	assert.Equal(t, 4, m.nodes[2].LSDBSize())
	requireSynced(t, m)
}

func TestUnreachableLeavesPredicateTable(t *testing.T) {
	// Brief / Carzaniga09 §2.2: routers that become unreachable leave the
	// published PREDICATES table at once and return when reachable again;
	// their LSDB entries wait for MaxAge.
	m := line(t, 3)
	f := []encoding.Bloom{bloom(11)}
	require.NoError(t, m.nodes[3].SetLocalPredicate(f))
	m.pump(time.Second)
	m.reset()

	m.nodes[2].LinkDown(3, 2*time.Second)
	m.nodes[3].LinkDown(2, 2*time.Second)
	m.pump(2 * time.Second)
	a := m.nodes[1]
	assert.Equal(t, []PredicateUpdate{{Router: 3, Removed: true}}, m.log[1].PredicateUpdates)
	assert.NotContains(t, a.Predicates(), uint32(3))
	assert.Equal(t, 6, a.LSDBSize())

	m.reset()
	m.link(2, 3, 1, 3*time.Second)
	assert.Equal(t, []PredicateUpdate{{Router: 3, Filters: f}}, m.log[1].PredicateUpdates)
}

func TestParamsMismatchIsNotPublished(t *testing.T) {
	a := newNode(t, 1)
	b := newNode(t, 2, func(c *Config) { c.Encoding = encoding.Params{M: 128, K: 10} })
	m := newMesh(t, a, b)
	m.link(1, 2, 1, 0)
	assert.True(t, a.Routes().Reachable(2))
	assert.NotContains(t, a.Predicates(), uint32(2))
	mm := events(*m.log[1], EventParamsMismatch)
	require.Len(t, mm, 1)
	assert.Equal(t, uint32(2), mm[0].Peer)
}

// A router of another Bloom scheme, same M and K, is reported and left out
// too: its Blooms mean other categories (docs/design.md §2).
func TestSchemeMismatchIsNotPublished(t *testing.T) {
	a := newNode(t, 1, func(c *Config) { c.Encoding = encoding.Params{Scheme: encoding.SchemeCatV2, M: 512, K: 6} })
	b := newNode(t, 2, func(c *Config) { c.Encoding = encoding.Params{Scheme: encoding.SchemeCatV1, M: 512, K: 6} })
	m := newMesh(t, a, b)
	m.link(1, 2, 1, 0)
	require.NoError(t, b.SetLocalPredicate([]encoding.Bloom{bloom(3)}))
	m.pump(time.Second)
	assert.True(t, a.Routes().Reachable(2))
	assert.NotContains(t, a.Predicates(), uint32(2))
	assert.NotContains(t, b.Predicates(), uint32(1))
	mm := events(*m.log[1], EventParamsMismatch)
	require.NotEmpty(t, mm)
	assert.Equal(t, uint32(2), mm[0].Peer)
}

func TestStepRejectsMalformed(t *testing.T) {
	for _, tc := range []struct {
		name string
		msg  Message
		want string
	}{
		{"zero seq", &LSA{Origin: 5}, "sequence number 0"},
		{"self link", &LSA{Origin: 5, Seq: 1, Links: []Link{{5, 1}}}, "link to itself"},
		{"zero cost", &LSA{Origin: 5, Seq: 1, Links: []Link{{6, 0}}}, "cost 0"},
		{"unsorted", &LSA{Origin: 5, Seq: 1, Links: []Link{{7, 1}, {6, 1}}}, "out of order at 1"},
		{"duplicate", &LSA{Origin: 5, Seq: 1, Links: []Link{{6, 1}, {6, 1}}}, "out of order"},
		{"withdrawn with links", &LSA{Origin: 5, Seq: 1, Withdrawn: true, Links: []Link{{6, 1}}}, "withdrawn LSA"},
		{"pred zero seq", &PredAd{Origin: 5, Params: encoding.DefaultParams()}, "sequence number 0"},
		{"pred params", &PredAd{Origin: 5, Seq: 1}, "encoding: K=0"},
		{"pred withdrawn", &PredAd{Origin: 5, Seq: 1, Withdrawn: true, Params: encoding.DefaultParams(), Filters: []encoding.Bloom{{}}}, "withdrawn predicate"},
		{"nil", nil, "unknown message type <nil>"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := newNode(t, 1)
			require.NoError(t, a.LinkUp(2, 1, 0))
			before := a.Digest()
			err := a.Step(2, tc.msg, ms)
			require.ErrorContains(t, err, "from router 2")
			require.ErrorContains(t, err, tc.want)
			assert.Equal(t, before, a.Digest())
		})
	}
}

func TestReadyAdvanceKeepsLaterOutputs(t *testing.T) {
	a := newNode(t, 1)
	drain(a)
	require.NoError(t, a.LinkUp(2, 1, 0))
	rd := a.Ready()
	require.Len(t, rd.Messages, 1)
	require.NoError(t, a.LinkUp(3, 1, 0))
	a.Advance()
	require.True(t, a.HasReady())
	rd2 := a.Ready()
	require.Len(t, rd2.Messages, 1)
	assert.Equal(t, uint32(3), rd2.Messages[0].To)
	assert.Equal(t, uint32(2), rd.Messages[0].To, "the first Ready is not overwritten")
	a.Advance()
	assert.False(t, a.HasReady())
}

func TestNewNodeKnowsItself(t *testing.T) {
	a := newNode(t, 7)
	r := a.Routes()
	assert.Equal(t, uint32(7), r.Self())
	assert.Equal(t, 1, r.Known())
	_, ok := r.NextHop(7)
	assert.False(t, ok)
	assert.Empty(t, r.TreeChildren(7))
	rd := drain(a)
	assert.Equal(t, []PredicateUpdate{{Router: 7}}, rd.PredicateUpdates)
	assert.Equal(t, 2, a.LSDBSize())
}

// TestSummedAdvertisementIsTheAdvertisement: an advertisement whose
// checksum the driver computed is installed, flooded and summarised as the
// advertisement itself, with that checksum.
func TestSummedAdvertisementIsTheAdvertisement(t *testing.T) {
	for _, summed := range []bool{false, true} {
		m := line(t, 3)
		b := m.nodes[2]
		ad := &PredAd{Origin: 9, Seq: 4, Params: b.cfg.Encoding, Filters: []encoding.Bloom{bloom(5), bloom(7, 9)}}
		var msg Message = ad
		if summed {
			msg = &SummedPredAd{Ad: ad, Sum: ad.Checksum()}
		}
		require.NoError(t, b.Step(1, msg, time.Second))
		e := b.lsdb[Key{KindPredicate, 9}]
		require.NotNil(t, e, "summed %v", summed)
		assert.Equal(t, ad.Checksum(), e.sum)
		assert.Same(t, ad, e.pred)
		flooded := only[*PredAd](to(drain(b), 3))
		require.Len(t, flooded, 1)
		assert.Equal(t, ad.Filters, flooded[0].Filters)
	}
}

// TestFloodedCopiesCarryTheirSum: the copies a node sends carry the
// checksum it stored, which a delta needs, and a copy received from a peer
// carries none to be trusted.
func TestFloodedCopiesCarryTheirSum(t *testing.T) {
	m := line(t, 3)
	b := m.nodes[2]
	ad := &PredAd{Origin: 9, Seq: 4, Params: b.cfg.Encoding, Filters: []encoding.Bloom{bloom(5), bloom(7, 9)}, Sum: 12345}
	require.NoError(t, b.Step(1, ad, time.Second))
	flooded := only[*PredAd](to(drain(b), 3))
	require.Len(t, flooded, 1)
	want := ad.Checksum()
	assert.Equal(t, want, flooded[0].Sum, "the stored checksum, not the sender's claim")
	assert.Equal(t, want, flooded[0].Checksum())
}
