package drp_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/bits-and-blooms/bitset"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dripmesh/drip/internal/drp"
)

// randomRing is a ring of n routers with random link weights.
func randomRing(rng *rand.Rand, n int) *graph {
	g := newGraph(n)
	for i := range n {
		g.link(i, (i+1)%n, 1+9*rng.Float64())
	}
	return g
}

// simulateHolding is simulate for routers that hold what Transit bounces
// instead of sending it back: while some routers use old tables (view),
// bounced destinations wait at the router that bounced them; once every
// router has the new tables (converged), each held bundle is decided again
// as if published there — back to where it came from, if that is now the
// way — and the message runs to its end.
func simulateHolding(tb testing.TB, f *drp.Forwarder, view, converged func(uint32) drp.Routing, src uint32, dest *bitset.BitSet) (tr trace) {
	tb.Helper()
	tr.delivered = map[uint32]int{}
	type held struct {
		at, from uint32
		b        drp.Bundle
	}
	var queue, holding []held
	emit := func(from uint32, d drp.Decision) {
		for i := range d.Dropped {
			tr.dropped[i] += d.Dropped[i]
		}
		for _, fw := range d.Forwards {
			tr.bundles++
			queue = append(queue, held{at: fw.Next, from: from, b: fw.Bundle})
		}
	}
	emit(src, f.Ingress(view(src), dest))
	for round, tables := range []func(uint32) drp.Routing{view, converged} {
		if round == 1 {
			for _, h := range holding {
				emit(h.at, sendBack(f, tables(h.at), h.b, h.b.Dest))
			}
			holding = nil
		}
		for len(queue) > 0 {
			h := queue[0]
			queue = queue[1:]
			d := f.Transit(tables(h.at), h.from, h.b)
			if d.Deliver {
				tr.delivered[h.at]++
			}
			emit(h.at, d)
			if d.Bounced != nil {
				tr.bounced += int(d.Bounced.Count())
				holding = append(holding, held{at: h.at, from: h.from, b: drp.Bundle{Source: h.b.Source, Dest: d.Bounced, HopsLeft: h.b.HopsLeft}})
			}
		}
	}
	require.Empty(tb, holding, "converged tables bounced a destination")
	return tr
}

// TestHoldingBouncesEndsLoopsOnRings: on a ring every forwarding loop
// turns back somewhere (going on round the ring would reach every
// destination), so while routers disagree, a router that holds what it
// would send back, until routes converge, loses nothing to the hop limit,
// where sending it back ping-pongs the bundle until the hop limit drops
// it. The e2e suite's mesh is a ring; its rolling restart once lost
// deliveries to exactly this (docs/results/churn.md).
func TestHoldingBouncesEndsLoopsOnRings(t *testing.T) {
	const limit = 64
	f, err := drp.NewForwarder(drp.Config{HopLimit: limit})
	require.NoError(t, err)
	rng := rand.New(rand.NewPCG(11, 0xb0))
	var bounced, sentBackDrops int
	for i := range 200 {
		n := 3 + rng.IntN(30)
		old, next := newFakeNet(randomRing(rng, n)), newFakeNet(randomRing(rng, n))
		stale := make([]bool, n)
		for r := range stale {
			stale[r] = rng.IntN(2) == 0
		}
		mixed := func(r uint32) drp.Routing {
			if stale[r] {
				return old.at(int(r))
			}
			return next.at(int(r))
		}
		src, dest := uint32(rng.IntN(n)), randomDest(rng, n)
		want := int(dest.Count())
		if dest.Test(uint(src)) {
			want--
		}
		t.Run(fmt.Sprintf("ring%d_n%d", i, n), func(t *testing.T) {
			tr := simulateHolding(t, f, mixed, view(next), src, dest)
			assert.Zero(t, tr.dropped, "drops")
			for r, k := range tr.delivered {
				assert.Equal(t, 1, k, "router %d delivered %d times", r, k)
			}
			assert.Len(t, tr.delivered, want, "destinations delivered")
			bounced += tr.bounced

			back := simulate(t, f, mixed, src, dest)
			sentBackDrops += back.dropped[drp.DropHopLimit]
		})
	}
	// The scenarios must disagree enough to bounce, and sending back must
	// then lose what holding keeps.
	assert.Positive(t, bounced, "no destination ever bounced")
	assert.Positive(t, sentBackDrops, "sending bounces back never reached the hop limit")
	t.Logf("%d destinations bounced; sent back instead, %d were dropped at the hop limit", bounced, sentBackDrops)
}
