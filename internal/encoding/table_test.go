package encoding

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/bits-and-blooms/bitset"
	"github.com/dripmesh/drip/internal/workload"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestTableSetRemoveRouters(t *testing.T) {
	tab := NewTable(Params{M: 64, K: 2})
	a, ab := bloomOf(1), bloomOf(1, 2)
	tab.Set(7, []Bloom{ab, a, ab})
	tab.Set(3, nil)
	tab.Set(5, []Bloom{bloomOf(9)})
	assert.Equal(t, []uint32{3, 5, 7}, tab.Routers())
	got, ok := tab.Filters(7)
	require.True(t, ok)
	assert.Equal(t, []Bloom{a}, got, "Set reduces what is not in Advertise's order")

	snap := tab.Snapshot()
	tab.Remove(5)
	tab.Set(7, []Bloom{bloomOf(40)})
	assert.Equal(t, []uint32{3, 7}, tab.Routers())
	_, ok = tab.Filters(5)
	assert.False(t, ok)

	// The snapshot does not see later changes.
	assert.Equal(t, []uint32{3, 5, 7}, snap.Routers())
	assert.Equal(t, uint32(7), snap.MaxID())
	f, ok := snap.Filters(7)
	require.True(t, ok)
	assert.Equal(t, []Bloom{a}, f)
	_, ok = snap.Filters(4)
	assert.False(t, ok)
	dst := bitset.New(0)
	snap.Match(bloomOf(1, 9), dst)
	assert.Equal(t, []uint{5, 7}, setBits(dst), "router 3 advertised nothing and matches nothing")
}

// TestTableSetTakesAdvertisementsAsTheyAre: what is in Advertise's order is
// stored as sent, covered filters included (the origin removes those);
// anything else is reduced; either way the table keeps its own copy.
func TestTableSetTakesAdvertisementsAsTheyAre(t *testing.T) {
	a, ab, c := bloomOf(1), bloomOf(1, 2), bloomOf(9)
	for _, tc := range []struct {
		name   string
		in     []Bloom
		stored []Bloom
	}{
		{"advertise's order, kept as sent", []Bloom{a, c, ab}, []Bloom{a, c, ab}},
		{"out of order, reduced", []Bloom{ab, c, a}, []Bloom{a, c}},
		{"duplicates, reduced", []Bloom{a, a, c}, []Bloom{a, c}},
		{"one filter", []Bloom{ab}, []Bloom{ab}},
		{"none", nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tab := NewTable(Params{M: 64, K: 2})
			in := slices.Clone(tc.in)
			tab.Set(1, in)
			if len(in) > 0 {
				in[0] = bloomOf(30) // the sender's buffer is not the table's
			}
			got, ok := tab.Filters(1)
			require.True(t, ok)
			assert.Equal(t, tc.stored, got)
		})
	}
}

// TestTableSetMatchesAsAdvertise is the property behind not reducing again:
// for random rows, in any order, a table built from them as sent matches
// what one of their reductions matches.
func TestTableSetMatchesAsAdvertise(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 19))
	p := Params{M: 96, K: 3}
	for range 200 {
		sent, reduced := NewTable(p), NewTable(p)
		for router := range uint32(1 + r.IntN(6)) {
			var row []Bloom
			for range r.IntN(12) {
				row = append(row, randomBloom(r, p.M, 1+r.IntN(4)))
			}
			if r.IntN(2) == 0 {
				slices.SortFunc(row, Bloom.Compare) // in order, covered ones and all
			}
			sent.Set(router, row)
			reduced.Set(router, Advertise(row))
		}
		a, b := sent.Snapshot(), reduced.Snapshot()
		for range 20 {
			msg := randomBloom(r, p.M, r.IntN(30))
			da, db := bitset.New(0), bitset.New(0)
			a.Match(msg, da)
			b.Match(msg, db)
			require.Equal(t, setBits(db), setBits(da), "message %v", msg)
		}
	}
}

func TestMatchEmptyTable(t *testing.T) {
	snap := NewTable(DefaultParams()).Snapshot()
	dst := bitset.New(8).Set(2)
	snap.Match(bloomOf(1, 2, 3), dst)
	snap.MatchLinear(bloomOf(1, 2, 3), dst)
	assert.Equal(t, []uint{2}, setBits(dst))
}

func setBits(b *bitset.BitSet) []uint {
	out := []uint{}
	for i, ok := b.NextSet(0); ok; i, ok = b.NextSet(i + 1) {
		out = append(out, i)
	}
	return out
}

// matchBrute is D of Carzaniga09 §2.2 straight from the definition.
func matchBrute(t *Table, bm Bloom) []uint {
	out := []uint{}
	for _, id := range t.Routers() {
		f, _ := t.Filters(id)
		if slices.ContainsFunc(f, func(b Bloom) bool { return b.SubsetOf(bm) }) {
			out = append(out, uint(id))
		}
	}
	return out
}

// randomTable draws a table whose filters come from a small pool, so that
// filters are shared between routers and some are hot, with sometimes the
// zero filter, routers without filters, and sparse router IDs.
func randomTable(r *rand.Rand) (*Table, []Bloom) {
	m := []int{64, 192, 512}[r.IntN(3)]
	tab := NewTable(Params{M: m, K: 3})
	pool := make([]Bloom, 1+r.IntN(400))
	for i := range pool {
		pool[i] = randomBloom(r, m, 1+r.IntN(8))
	}
	if r.IntN(4) == 0 {
		pool[0] = Bloom{}
	}
	routers := r.IntN(200)
	sparse := r.IntN(4) == 0
	for i := range routers {
		id := uint32(i)
		if sparse {
			id = uint32(r.IntN(1 << 16))
		}
		fs := make([]Bloom, r.IntN(30))
		for j := range fs {
			fs[j] = pool[r.IntN(len(pool))]
		}
		tab.Set(id, fs)
	}
	msgs := make([]Bloom, 50)
	for i := range msgs {
		if i%2 == 0 {
			msgs[i] = randomBloom(r, m, r.IntN(m)) // any density
		} else {
			// A union of pool filters plus noise matches something.
			msgs[i] = randomBloom(r, m, r.IntN(m/8))
			for range 1 + r.IntN(4) {
				msgs[i] = msgs[i].Or(pool[r.IntN(len(pool))])
			}
		}
	}
	return tab, msgs
}

// Match against MatchLinear and the definition on random tables, with the
// cold path chosen by cost and pinned to each side.
func TestMatchMatchesLinearOnRandomTables(t *testing.T) {
	r := rand.New(rand.NewPCG(31, 32))
	for i := range 200 {
		tab, msgs := randomTable(r)
		snap := tab.Snapshot()
		// The definition's answer once per message, not once per path.
		wants := make([][]uint, len(msgs))
		for j, bm := range msgs {
			wants[j] = matchBrute(tab, bm)
		}
		for _, force := range []matchPath{pathByCost, pathLeft, pathIndex} {
			snap.force = force
			for j, bm := range msgs {
				want := wants[j]
				lin, idx := bitset.New(0), bitset.New(0)
				snap.MatchLinear(bm, lin)
				snap.Match(bm, idx)
				require.Equal(t, want, setBits(lin), "table %d linear", i)
				require.Equal(t, want, setBits(idx), "table %d indexed (path %d), message %v", i, force, bm)
			}
		}
	}
}

func TestMatchAddsToDst(t *testing.T) {
	tab := NewTable(Params{M: 64, K: 2})
	tab.Set(1, []Bloom{bloomOf(1)})
	tab.Set(2, []Bloom{bloomOf(2)})
	dst := bitset.New(100).Set(0).Set(99)
	tab.Snapshot().Match(bloomOf(2), dst)
	assert.Equal(t, []uint{0, 2, 99}, setBits(dst), "Match sets bits and clears none")
}

// Carzaniga09 §2.2 on the paper workload: Match = MatchLinear, both cold
// paths, and no router with an exact match is missing from D (eq. 1).
func TestMatchOnPaperWorkload(t *testing.T) {
	for _, cfg := range []workload.Config{workload.Default(), workload.SingleConstraint(), workload.Ranges()} {
		const routers = 60
		// One mesh per workload, encoded with each of the parameters.
		mesh := newPaperMesh(t, cfg, routers, 5, 200)
		exactly := make([][]bool, len(mesh.messages)) // message → broker → an exact match
		for i, m := range mesh.messages {
			exactly[i] = make([]bool, routers)
			for b := range routers {
				exactly[i][b] = mesh.exact(b, m)
			}
		}
		for _, p := range []Params{DefaultParams(), DefaultParamsV1(), {M: 192, K: 7}, {Scheme: SchemeCatV2, M: 256, K: 3}} {
			tab := NewTable(p)
			for b := range routers {
				tab.Set(uint32(b), mesh.filters(p, b))
			}
			snap := tab.Snapshot()
			name := fmt.Sprintf("names=%d M=%d K=%d", cfg.Names, p.M, p.K)
			exact := 0
			for i, m := range mesh.messages {
				bm := p.EncodeMessage(m)
				lin := bitset.New(routers)
				snap.MatchLinear(bm, lin)
				for _, force := range []matchPath{pathByCost, pathLeft, pathIndex} {
					snap.force = force
					idx := bitset.New(routers)
					snap.Match(bm, idx)
					require.True(t, lin.Equal(idx), "%s: %v vs %v", name, lin, idx)
				}
				for b := range routers {
					if exactly[i][b] {
						exact++
						require.True(t, lin.Test(uint(b)), "%s: broker %d matches %v exactly but is not in D", name, b, m)
					}
				}
			}
			assert.Positive(t, exact, name)
		}
	}
}

func TestMatchDoesNotAllocate(t *testing.T) {
	snap, msgs := paperSnapshot(t, workload.SingleConstraint(), DefaultParams(), 100, 100)
	assert.Zero(t, matchAllocs(snap, msgs))
}

// matchAllocs is the allocations of one Match on snap, over msgs in turn.
func matchAllocs(snap *Snapshot, msgs []Bloom) float64 {
	dst := bitset.New(uint(snap.MaxID()) + 1)
	i := 0
	return testing.AllocsPerRun(200, func() {
		dst.ClearAll()
		snap.Match(msgs[i%len(msgs)], dst)
		i++
	})
}

// A Snapshot is read-only: concurrent Matches agree with MatchLinear (and
// -race sees no writes).
func TestSnapshotConcurrentMatch(t *testing.T) {
	snap, msgs := paperSnapshot(t, workload.SingleConstraint(), DefaultParams(), 100, 100)
	want := make([]*bitset.BitSet, len(msgs))
	for i, bm := range msgs {
		want[i] = bitset.New(0)
		snap.MatchLinear(bm, want[i])
	}
	var wg sync.WaitGroup
	errs := make(chan string, 4)
	for g := range 4 {
		wg.Go(func() {
			dst := bitset.New(0)
			for i := g; i < len(msgs); i += 2 {
				dst.ClearAll()
				snap.Match(msgs[i], dst)
				if !dst.Equal(want[i]) {
					errs <- fmt.Sprintf("message %d: %v, want %v", i, dst, want[i])
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}
