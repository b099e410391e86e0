package encoding

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/bits-and-blooms/bitset"
	"github.com/dripmesh/drip/internal/workload"
	"github.com/stretchr/testify/require"
)

// A table changed by random sequences of Set and Remove, with Snapshots
// taken now and then, matches as the definition says at every Snapshot —
// whether Snapshot indexed only the changed routers (the delta) or
// everything — and as a full build of the same contents. Destination sets
// start with random bits, which Match must keep: the delta path masks and
// restores the changed routers' bits around the base's match.
func TestIncrementalSnapshotMatchesFullBuild(t *testing.T) {
	deltas, fulls, grown := 0, 0, 0
	for seed := range 150 {
		r := rand.New(rand.NewPCG(uint64(seed), 77))
		// A start of some size, then a trickle of changes.
		tab, ref, pool, randomFilters, idRange := randomChanges(r, true)
		p := tab.p
		for step := range 60 {
			switch k := r.IntN(12); {
			case k < 10:
				change(r, k, tab, ref, pool, randomFilters, idRange)
			default:
				snap := tab.Snapshot()
				if snap.delta != nil {
					deltas++
					for _, id := range snap.delta.ids {
						if _, masked := slices.BinarySearch(snap.changed, id); !masked && slices.Contains(snap.base.ids, id) {
							grown++ // in the base, unmasked, with added filters in the delta
							break
						}
					}
				} else {
					fulls++
				}
				checkSnapshot(t, r, p, snap, ref, pool, idRange, fmt.Sprintf("seed %d step %d", seed, step))
			}
		}
	}
	// Both paths were taken, or the test shows nothing about one.
	require.Greater(t, deltas, 500, "snapshots with a delta")
	require.Greater(t, fulls, 100, "full builds")
	require.Greater(t, grown, 200, "snapshots with a router that only gained filters")
}

// checkSnapshot checks snap against ref, the simple reference (router →
// filters): its routers and filters, and Match on random messages, some
// made of pool's filters, into destination sets with random bits already
// set, on every match path; and MatchLinear and a full build of ref alike.
func checkSnapshot(t *testing.T, r *rand.Rand, p Params, snap *Snapshot, ref map[uint32][]Bloom, pool []Bloom, idRange int, where string) {
	t.Helper()
	m := p.M
	full := NewTable(p)
	for id, fs := range ref {
		full.Set(id, fs)
	}
	fullSnap := full.Snapshot()
	require.Equal(t, fullSnap.Routers(), snap.Routers(), where)
	for _, id := range snap.Routers() {
		got, _ := snap.Filters(id)
		want, _ := fullSnap.Filters(id)
		// slices.Equal first: require.Equal's reflection over every
		// router's 256-byte Blooms was a sixth of the test's time.
		if !slices.Equal(want, got) {
			require.Equal(t, want, got, "%s router %d", where, id)
		}
	}
	for range 20 {
		bm := randomBloom(r, m, r.IntN(m))
		if r.IntN(2) == 0 && len(pool) > 0 {
			bm = randomBloom(r, m, r.IntN(m/8))
			for range 1 + r.IntN(4) {
				bm = bm.Or(pool[r.IntN(len(pool))])
			}
		}
		pre := bitset.New(0)
		for range r.IntN(6) {
			pre.Set(uint(r.IntN(idRange)))
		}
		// The reference: the routers set before, and each router with a
		// filter contained in bm.
		want := pre.Clone()
		for id, fs := range ref {
			if slices.ContainsFunc(fs, func(b Bloom) bool { return b.SubsetOf(bm) }) {
				want.Set(uint(id))
			}
		}
		for _, force := range []matchPath{pathByCost, pathLeft, pathIndex} {
			snap.force = force
			got := pre.Clone()
			snap.Match(bm, got)
			if got.SymmetricDifferenceCardinality(want) != 0 {
				require.Equal(t, setBits(want), setBits(got), "%s path %d (delta %v): Match", where, force, snap.delta != nil)
			}
		}
		snap.force = pathByCost
		lin, fullGot := pre.Clone(), pre.Clone()
		snap.MatchLinear(bm, lin)
		fullSnap.Match(bm, fullGot)
		if lin.SymmetricDifferenceCardinality(want) != 0 || fullGot.SymmetricDifferenceCardinality(want) != 0 {
			require.Equal(t, setBits(want), setBits(lin), "%s: MatchLinear", where)
			require.Equal(t, setBits(want), setBits(fullGot), "%s: full build", where)
		}
	}
}

// Builds run beside changes: a table changed by random sequences of Set
// and Remove, with builds planned, run on another goroutine while the
// changes go on, and installed at random moments, gives at every Install a
// snapshot that matches as the definition says on the table's contents
// when the build was planned, and the changes made while it ran are in the
// next one: once changes stop, a last build matches the table as it is.
// The result never depends on whether a build overlapped changes, nor on
// what kind of build it was. Run under -race, it also checks that a build
// shares nothing mutable with the table.
func TestBuildsBesideChangesMatchFullBuild(t *testing.T) {
	overlapped, deltas, fulls := 0, 0, 0
	for seed := range 50 {
		r := rand.New(rand.NewPCG(uint64(seed), 91))
		tab, ref, pool, randomFilters, idRange := randomChanges(r, false)
		p := tab.p
		tab.Snapshot()
		var (
			build      *Build
			planned    map[uint32][]Bloom // ref when build was planned
			ran        chan struct{}
			changedDur bool // the table changed while build was in flight
		)
		install := func(where string) {
			<-ran
			snap := tab.Install(build)
			if changedDur {
				overlapped++
			}
			if snap.delta != nil {
				deltas++
			} else {
				fulls++
			}
			checkSnapshot(t, r, p, snap, planned, pool, idRange, where)
			build = nil
		}
		for step := range 120 {
			where := fmt.Sprintf("seed %d step %d", seed, step)
			switch k := r.IntN(14); {
			case k < 10:
				change(r, k, tab, ref, pool, randomFilters, idRange)
				changedDur = build != nil
			case build == nil:
				build, planned, ran, changedDur = tab.Plan(r.IntN(6) == 0), maps.Clone(ref), make(chan struct{}), false
				go func(b *Build, done chan struct{}) {
					b.Run()
					close(done)
				}(build, ran)
			default:
				install(where)
			}
		}
		if build != nil {
			install(fmt.Sprintf("seed %d: the last build", seed))
		}
		// The changes made while the last build ran are in the next.
		checkSnapshot(t, r, p, tab.Snapshot(), ref, pool, idRange, fmt.Sprintf("seed %d: after the changes stopped", seed))
	}
	require.Greater(t, overlapped, 400, "builds with changes while in flight")
	require.Greater(t, deltas, 300, "builds with a delta")
	require.Greater(t, fulls, 300, "full builds")
}

// Plan and Install refuse to be used out of turn: one build in flight,
// installed by the table that planned it, once it has run.
func TestOneBuildInFlight(t *testing.T) {
	tab := NewTable(Params{M: 64, K: 3})
	tab.Set(1, []Bloom{{}})
	b := tab.Plan(false)
	require.Panics(t, func() { tab.Plan(false) }, "a second Plan while one is in flight")
	require.Panics(t, func() { tab.Install(b) }, "Install before Run")
	other := NewTable(Params{M: 64, K: 3})
	require.Panics(t, func() { other.Install(b.Run()) }, "Install by another table")
	snap := tab.Install(b)
	require.Equal(t, []uint32{1}, snap.Routers())
	require.Panics(t, func() { tab.Install(b) }, "Install twice")
	require.NotPanics(t, func() { tab.Install(tab.Plan(false).Run()) })
}

// A Snapshot that only re-indexed the routers changed since the last full
// build does not allocate in Match either.
func TestIncrementalMatchDoesNotAllocate(t *testing.T) {
	p := DefaultParams()
	mesh := newPaperMesh(t, workload.SingleConstraint(), 100, 5, 100)
	tab := NewTable(p)
	for r := range 100 {
		tab.Set(uint32(r), mesh.filters(p, r))
	}
	tab.Snapshot()
	tab.Set(3, mesh.filters(p, 4))
	tab.Remove(99)
	snap := tab.Snapshot()
	require.NotNil(t, snap.delta)
	msgs := make([]Bloom, len(mesh.messages))
	for i, m := range mesh.messages {
		msgs[i] = p.EncodeMessage(m)
	}
	require.Zero(t, matchAllocs(snap, msgs))
}

// BenchmarkSnapshotAfterChange is what a broker's PREDICATES rebuild costs
// when one router's advertisement changed since the last: one more filter,
// as when a subscription arrives at its broker. full rebuilds everything
// (every rebuild before the delta); incremental is Table.Snapshot, which
// re-indexes the changed routers and every so often everything. Then the
// cost of Match on such a snapshot, against one without a delta.
func BenchmarkSnapshotAfterChange(b *testing.B) {
	p := DefaultParams()
	for _, size := range []struct{ routers, clients int }{{42, 15}, {1000, 5}} {
		mesh := newPaperMesh(b, workload.SingleConstraint(), size.routers, size.clients+1, 200)
		base := make([][]Bloom, size.routers)
		for r := range size.routers {
			base[r] = mesh.filters(p, r)
		}
		setup := func(fullOnly bool) *Table {
			tab := NewTable(p)
			tab.fullOnly = fullOnly
			for r := range size.routers {
				// The last client's filters arrive one by one, below.
				tab.Set(uint32(r), base[r][:len(base[r])-20])
			}
			tab.Snapshot()
			return tab
		}
		for _, mode := range []string{"full", "incremental"} {
			b.Run(fmt.Sprintf("routers=%d/filters=%d/%s", size.routers, size.routers*size.clients*20, mode), func(b *testing.B) {
				tab := setup(mode == "full")
				b.ReportAllocs()
				i := 0
				for b.Loop() {
					// Router i%routers gains one filter of its last client
					// (and starts over once it has all 20).
					r := i % size.routers
					n := len(base[r]) - 20 + (i/size.routers)%20 + 1
					tab.Set(uint32(r), base[r][:n])
					tab.Snapshot()
					i++
				}
			})
		}
		msgs := make([]Bloom, len(mesh.messages))
		for i, m := range mesh.messages {
			msgs[i] = p.EncodeMessage(m)
		}
		for _, mode := range []string{"full", "incremental"} {
			tab := setup(mode == "full")
			// Near the most a delta holds before a full build: changed
			// routers with a tenth of the filters (the limit is an eighth).
			for r := range size.routers / 10 {
				tab.Set(uint32(r), base[r])
			}
			snap := tab.Snapshot()
			if (snap.delta != nil) != (mode == "incremental") {
				b.Fatalf("%s: delta %v", mode, snap.delta != nil)
			}
			b.Run(fmt.Sprintf("routers=%d/match/%s", size.routers, mode), func(b *testing.B) {
				dst := bitset.New(uint(snap.MaxID()) + 1)
				b.ReportAllocs()
				i := 0
				for b.Loop() {
					dst.ClearAll()
					snap.Match(msgs[i%len(msgs)], dst)
					i++
				}
			})
		}
	}
}

// BenchmarkBuildSteps measures the three steps of a PREDICATES rebuild
// when one router's advertisement gained a filter since the last: plan
// (Plan) and install (Install) are what a broker's control plane still
// does itself, run is what it leaves to another goroutine. set is the
// change itself (Set of the router's advertisement as its broker sent it,
// reduced and in order), which the control plane does for every
// advertisement it receives. 42
// routers of 10, 20 and 50 clients of 20 filters are the scale lab's
// clients sweep (docs/results/experiments/scale).
func BenchmarkBuildSteps(b *testing.B) {
	p := DefaultParams()
	for _, size := range []struct{ routers, clients int }{{42, 10}, {42, 20}, {42, 50}, {1000, 5}} {
		mesh := newPaperMesh(b, workload.SingleConstraint(), size.routers, size.clients+1, 1)
		base := make([][]Bloom, size.routers)
		for r := range size.routers {
			base[r] = mesh.filters(p, r)
		}
		// ads[r][k]: router r's advertisement with k filters of its last
		// client, as its broker sends it.
		ads := make([][][]Bloom, size.routers)
		for r := range size.routers {
			for k := range 21 {
				ads[r] = append(ads[r], Advertise(base[r][:len(base[r])-20+k]))
			}
		}
		tab := NewTable(p)
		for r := range size.routers {
			tab.Set(uint32(r), ads[r][0])
		}
		tab.Snapshot()
		i := 0
		// change: router i%routers gains one filter of its last client
		// (and starts over once it has all 20).
		change := func() {
			r := i % size.routers
			tab.Set(uint32(r), ads[r][(i/size.routers)%20+1])
			i++
		}
		name := fmt.Sprintf("routers=%d/filters=%d", size.routers, size.routers*size.clients*20)
		b.Run(name+"/set", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				change()
				b.StopTimer()
				tab.Install(tab.Plan(false).Run())
				b.StartTimer()
			}
		})
		b.Run(name+"/plan", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				change()
				b.StartTimer()
				build := tab.Plan(false)
				b.StopTimer()
				tab.Install(build.Run())
				b.StartTimer()
			}
		})
		b.Run(name+"/run", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				change()
				build := tab.Plan(false)
				b.StartTimer()
				build.Run()
				b.StopTimer()
				tab.Install(build)
				b.StartTimer()
			}
		})
		b.Run(name+"/install", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				change()
				build := tab.Plan(false).Run()
				b.StartTimer()
				tab.Install(build)
			}
		})
	}
}

// randomChanges starts a table of random contents, up to 150 routers' filters
// drawn from a pool of up to 200 Bloom filters (with an empty one, which
// matches every message, in a quarter of the tables if withEmpty), and the
// simple reference of its contents (router → filters), and the pool;
// randomFilters draws a router's filters from it, and router IDs are below idRange.
func randomChanges(r *rand.Rand, withEmpty bool) (tab *Table, ref map[uint32][]Bloom, pool []Bloom, randomFilters func() []Bloom, idRange int) {
	m := []int{64, 192, 512}[r.IntN(3)]
	pool = make([]Bloom, 1+r.IntN(200))
	for i := range pool {
		pool[i] = randomBloom(r, m, 1+r.IntN(8))
	}
	if withEmpty && r.IntN(4) == 0 {
		pool[0] = Bloom{}
	}
	idRange = []int{8, 100, 300, 1 << 16}[r.IntN(4)]
	ref = map[uint32][]Bloom{}
	tab = NewTable(Params{M: m, K: 3})
	randomFilters = func() []Bloom {
		fs := make([]Bloom, r.IntN(40))
		for j := range fs {
			fs[j] = pool[r.IntN(len(pool))]
		}
		return fs
	}
	for range r.IntN(150) {
		id := uint32(r.IntN(idRange))
		ref[id] = randomFilters()
		tab.Set(id, ref[id])
	}
	return tab, ref, pool, randomFilters, idRange
}

// change makes the random change k (below 10) to tab and its reference
// ref, drawn as randomChanges draws: k < 4 sets a router's filters anew;
// k < 8 gives a router more filters (a subscription arrives: the delta
// holds the new ones alone while the base row stays true; Advertise may
// drop filters the new ones cover); k < 10 removes a router, usually one
// that is there.
func change(r *rand.Rand, k int, tab *Table, ref map[uint32][]Bloom, pool []Bloom, randomFilters func() []Bloom, idRange int) {
	id := uint32(r.IntN(idRange))
	switch {
	case k < 4:
		ref[id] = randomFilters()
		tab.Set(id, ref[id])
	case k < 8:
		if len(ref) > 0 && r.IntN(4) > 0 {
			id = slices.Sorted(maps.Keys(ref))[r.IntN(len(ref))]
		}
		fs := slices.Clone(ref[id])
		for range 1 + r.IntN(3) {
			fs = append(fs, pool[r.IntN(len(pool))])
		}
		ref[id] = fs
		tab.Set(id, fs)
	default:
		if len(ref) > 0 && r.IntN(2) == 0 {
			id = slices.Sorted(maps.Keys(ref))[r.IntN(len(ref))]
		}
		delete(ref, id)
		tab.Remove(id)
	}
}
