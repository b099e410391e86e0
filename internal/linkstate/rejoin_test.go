package linkstate

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// transitGap returns a description of the first route in m that runs
// through router via while via does not know the destination (holds no
// LSA of it), or "" if there is none. Such a route loses every message
// sent along it: what a router rejoining with an empty database would do
// if its links were advertised before its database exchange (docs/design.md
// §10). Knowing every router is the most a rejoin can promise: while LSAs
// flood, routers may briefly disagree on paths (a micro-loop, bounded by
// the hop limit and suppressed duplicates), as in any link-state protocol.
func transitGap(m *mesh, via uint32) string {
	for _, src := range m.ids() {
		for _, dst := range m.ids() {
			if src == dst || src == via || dst == via {
				continue
			}
			at := src
			for hops := 0; at != dst && hops < len(m.nodes); hops++ {
				next, ok := m.nodes[at].Routes().NextHop(dst)
				if !ok {
					break
				}
				if next == via && m.nodes[via].lsdb[Key{KindRouter, dst}] == nil {
					return fmt.Sprintf("%d routes to %d through %d, which does not know %d", src, dst, via, dst)
				}
				at = next
			}
		}
	}
	return ""
}

// pumpShuffled delivers queued messages like pump, but in a random
// interleaving of the links that keeps each link direction in order, as
// the peer streams do: the orders a zero-delay FIFO would never show.
func (m *mesh) pumpShuffled(rng *rand.Rand, now time.Duration) {
	m.collect()
	for steps := 0; len(m.queue) > 0; steps++ {
		require.Less(m.t, steps, 100000, "messages keep flowing")
		// The first queued message of a random link direction.
		firsts := map[[2]uint32]int{}
		var order [][2]uint32
		for i, q := range m.queue {
			l := [2]uint32{q.from, q.env.To}
			if _, ok := firsts[l]; !ok {
				firsts[l] = i
				order = append(order, l)
			}
		}
		i := firsts[order[rng.IntN(len(order))]]
		q := m.queue[i]
		m.queue = append(m.queue[:i], m.queue[i+1:]...)
		dst := m.nodes[q.env.To]
		if dst == nil || m.drop != nil && m.drop(q.from, q.env.To, q.env.Msg) {
			continue
		}
		_ = dst.Step(q.from, q.env.Msg, now)
		m.collect()
	}
}

// TestRejoinAdvertisesAfterExchange restarts router 2 of a ring whose
// cheap side runs through it (1-2-3 cost 1 each, 3-4-1 cost 5 each), so
// that 1 and 3 route to each other through 2 once it is back. At no
// message of the rejoin may a route run through 2 before 2 can forward
// along it: both 2 and its neighbours keep the links out of their LSAs
// until the database exchange is done, and the neighbours ignore 2's LSA
// of its previous incarnation, which still lists them. Without either,
// the mesh routes into 2 while its database is empty.
func TestRejoinAdvertisesAfterExchange(t *testing.T) {
	for seed := range uint64(300) {
		if gap := rejoin(t, seed); gap != "" {
			t.Fatalf("seed %d: %s (replay: go test ./internal/linkstate -run TestRejoinAdvertisesAfterExchange)", seed, gap)
		}
	}
}

// rejoin runs the restart of TestRejoinAdvertisesAfterExchange with the
// messages of the rejoin interleaved by seed, and returns the first
// transit gap it saw.
func rejoin(t *testing.T, seed uint64) string {
	m := newMesh(t, newNode(t, 1), newNode(t, 2), newNode(t, 3), newNode(t, 4))
	m.link(1, 2, 1, 0)
	m.link(2, 3, 1, 0)
	m.link(3, 4, 5, 0)
	m.link(4, 1, 5, 0)
	m.tick(time.Second)
	next, ok := m.nodes[1].Routes().NextHop(3)
	require.True(t, ok)
	require.Equal(t, uint32(2), next, "the cheap side")

	// 2 crashes: its streams close, so its neighbours see the links go
	// down at once. Its LSA, listing 1 and 3, stays in every database.
	now := 2 * time.Second
	m.nodes[1].LinkDown(2, now)
	m.nodes[3].LinkDown(2, now)
	delete(m.nodes, 2)
	m.pump(now)
	next, ok = m.nodes[1].Routes().NextHop(3)
	require.True(t, ok)
	require.Equal(t, uint32(4), next, "around the ring while 2 is away")

	rng := rand.New(rand.NewPCG(seed, 0))
	m.nodes[2], m.log[2] = newNode(t, 2), &Ready{}
	var gap string
	m.drop = func(_, _ uint32, _ Message) bool {
		if gap == "" {
			gap = transitGap(m, 2)
		}
		return false
	}
	now += time.Millisecond
	for _, nb := range []uint32{1, 3} {
		require.NoError(t, m.nodes[nb].LinkUp(2, 1, now))
		require.NoError(t, m.nodes[2].LinkUp(nb, 1, now))
	}
	m.pumpShuffled(rng, now)
	m.tick(now + 100*time.Millisecond)
	requireSynced(t, m)
	next, ok = m.nodes[1].Routes().NextHop(3)
	require.True(t, ok)
	assert.Equal(t, uint32(2), next, "back on the cheap side")
	for _, id := range m.ids() {
		for _, nb := range m.nodes[id].Neighbors() {
			assert.True(t, nb.Advertised, "%d→%d", id, nb.ID)
		}
		assert.Empty(t, events(*m.log[id], EventLoadTimeout), "router %d", id)
	}
	return gap
}

// TestLoadTimeout: a neighbour that never sends its summary (an older
// version, or a lost message) delays the link's advertisement by at most
// DeadInterval, then it is advertised anyway and the timeout counted.
func TestLoadTimeout(t *testing.T) {
	a := newNode(t, 1)
	require.NoError(t, a.LinkUp(2, 1, 0))
	require.NoError(t, a.Step(2, &Hello{Router: 2, Version: Version, Heard: true}, 10*ms))
	rd := drain(a)
	require.Equal(t, StateFull, a.Neighbors()[0].State)
	assert.Empty(t, only[*LSA](to(rd, 2)))
	dead := a.Config().DeadInterval
	// Hellos keep the adjacency alive; the summary never comes.
	for now := 10 * ms; now < dead; now += dead / 4 {
		require.NoError(t, a.Step(2, &Hello{Router: 2, Version: Version, Heard: true, SentAt: now}, now))
		a.Tick(now)
		rd = drain(a)
		assert.Empty(t, events(rd, EventAdjacencyAdvertised), "at %v", now)
	}
	require.NoError(t, a.Step(2, &Hello{Router: 2, Version: Version, Heard: true, SentAt: dead}, dead+10*ms))
	rd = drain(a)
	require.Len(t, events(rd, EventLoadTimeout), 1)
	assert.Len(t, events(rd, EventAdjacencyAdvertised), 1)
	lsas := only[*LSA](to(rd, 2))
	require.Len(t, lsas, 1)
	assert.Equal(t, []Link{{Neighbor: 2, Cost: 1}}, lsas[0].Links)
}
