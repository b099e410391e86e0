package encoding

import (
	"cmp"
	"maps"
	"math/bits"
	"slices"

	"github.com/bits-and-blooms/bitset"
)

// Table is the PREDICATES table of Carzaniga09 §2.2 while it is being
// changed: router ID → encoded predicate. It is not safe for concurrent use;
// its owner (the broker's routing goroutine) applies advertisements and
// withdrawals to it and publishes a Snapshot for the forwarding path.
//
// The split is deliberate: matching runs on every message from many
// goroutines and must not take a lock, while advertisements change rarely.
// A Snapshot is immutable, so readers share it through an atomic pointer
// and a rebuild never disturbs a Match in progress.
//
// Building a snapshot's index is the expensive part, and it need not hold
// up the owner: Plan takes what the next snapshot needs (cheap), Build.Run
// indexes it on any goroutine while the owner goes on changing the table,
// and Install hands the owner the snapshot. Snapshot does all three at
// once.
type Table struct {
	p       Params
	entries map[uint32][]Bloom
	// cur is the layout of the last installed build: its base, and what
	// changed since as its delta indexes it. It is immutable: a build
	// derives the next one (Build.Run) and Install replaces it.
	cur *layout
	// dirty holds the routers set or removed since the last Plan, which
	// the next build sorts into its layout.
	dirty map[uint32]struct{}
	// pending is the build planned and not yet installed: at most one,
	// since each derives its layout from the one before.
	pending *Build
	// fullOnly makes every Snapshot a full build (tests and benchmarks
	// compare the two).
	fullOnly bool
}

// layout is what a snapshot's index is made of, kept for the next build
// to start from. base is the index of the last full build (nil before the
// first). What changed since is kept as the delta index needs it (see
// Snapshot): rows holds per router the filters the delta indexes,
// deltaFilters counts them, masked holds the routers whose base rows are
// stale, and delta is their index. A layout is never changed once built,
// and its Bloom slices are shared with the table and its snapshots, which
// never modify them either (Set stores a copy, redo new slices).
type layout struct {
	base         *index
	baseFilters  int
	rows         map[uint32][]Bloom
	deltaFilters int
	masked       map[uint32]struct{}
	delta        *index
}

// NewTable returns an empty table for Blooms encoded with p. It panics if p
// is invalid.
func NewTable(p Params) *Table {
	p.mustValidate()
	return &Table{p: p, entries: make(map[uint32][]Bloom), cur: &layout{}, dirty: make(map[uint32]struct{})}
}

// Set replaces router's encoded predicate with a copy of filters. A router
// with no filters stays in the table and matches nothing.
//
// An advertisement in Advertise's order (sorted by Compare, without
// duplicates), as every broker sends its own, is taken as it is, in time
// linear in its size; anything else is reduced with Advertise first. Set
// does not look again for filters that others cover: the origin removed
// them, and one a faulty sender left in costs matching time, never a wrong
// match. Looking again cost a broker 0.3–2.2 ms of its control plane for
// every advertisement it received at 200–1,000 filters a router, where the
// check and copy take 0.05–0.3 ms (BenchmarkBuildSteps/*/set).
func (t *Table) Set(router uint32, filters []Bloom) {
	if inAdvertiseOrder(filters) {
		t.entries[router] = slices.Clone(filters)
	} else {
		t.entries[router] = Advertise(filters)
	}
	t.dirty[router] = struct{}{}
}

// inAdvertiseOrder reports whether filters are strictly ascending by
// Compare: sorted, without duplicates.
func inAdvertiseOrder(filters []Bloom) bool {
	prev := -1
	for i := range filters {
		pop := filters[i].PopCount()
		if i > 0 && (pop < prev || pop == prev && compareWords(&filters[i-1], &filters[i]) >= 0) {
			return false
		}
		prev = pop
	}
	return true
}

// Remove drops router from the table.
func (t *Table) Remove(router uint32) {
	delete(t.entries, router)
	t.dirty[router] = struct{}{}
}

// Routers returns the routers in the table in ascending order.
func (t *Table) Routers() []uint32 {
	ids := make([]uint32, 0, len(t.entries))
	for id := range t.entries {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// Filters returns router's encoded predicate as stored (in Advertise's
// order, without duplicates).
// The slice is shared: do not modify it.
func (t *Table) Filters(router uint32) ([]Bloom, bool) {
	f, ok := t.entries[router]
	return f, ok
}

// The limits of an incremental Snapshot: beyond either, the changes since
// the last full build are indexed with the rest in a new one. maxChanged
// bounds the per-Match work of masking stale rows in the base (and the
// stack it takes); deltaShare bounds the delta's filters, what rebuilding
// it costs at each Snapshot and the Match work it adds, to an eighth of the
// base's filters.
const (
	maxChanged = 256
	deltaShare = 8
)

// Snapshot builds the read-only, indexed form of the table's current
// contents: Plan, Build.Run and Install in one call.
//
// A full build costs time linear in the number of filters plus a sort (see
// docs/results/encoded-matching.md): about 10 ms at 42 routers × 300
// filters. In a mesh where subscriptions come and go, a few routers'
// advertisements change at a time, most often by a filter or a few added;
// rebuilding everything for each change kept every broker of a 42-site lab
// rebuilding for seconds after each wave of subscriptions
// (docs/results/experiments/scale). So Snapshot keeps the index of its
// last full build as the base and indexes only what changed since (the
// delta): of a router that only gained filters, those filters; of a router
// new since the base, all of its filters; of a router that lost a filter
// or left, its current filters, if any, while Match masks its stale row in
// the base. Match runs the base, then the delta. Once the delta would hold
// more than a deltaShare-th of the base's filters, or more than
// maxChanged rows are masked, Snapshot builds everything again, and that
// build is the new base. A Snapshot then costs the changes since the
// last one, plus indexing the delta (at most a deltaShare-th of a full
// build), plus a full build each time the changes add up to a
// deltaShare-th of the table. The result of Match never depends on which
// was done.
func (t *Table) Snapshot() *Snapshot { return t.Install(t.Plan(false).Run()) }

// FullSnapshot is Snapshot without a delta: it indexes everything anew
// (and makes that the base). A Snapshot with a delta matches somewhat
// slower; its owner may replace it with a full one once changes pause.
func (t *Table) FullSnapshot() *Snapshot { return t.Install(t.Plan(true).Run()) }

// Build is one snapshot on its way: what Plan took from the table, the
// index Run builds from it, and the layout Install gives the table.
type Build struct {
	p    Params
	from *layout // the table's layout when planned: immutable
	full bool    // index everything, with no delta
	// The table's contents when planned: ids ascending, filters[i] the
	// predicate of ids[i]; and the routers changed since the last Plan.
	ids     []uint32
	filters [][]Bloom
	dirty   []uint32

	to   *layout   // what Run derived from from
	snap *Snapshot // what Run built
}

// Plan takes what the next snapshot needs, and leaves the table to be
// changed while Build.Run indexes it: the routers and the (immutable)
// filter slices of each, the routers changed since the last Plan and the
// layout of the last build. Its cost is linear in the number of routers,
// not filters. The changes made after it go into the next build, once this
// one is installed. full asks for a full build (FullSnapshot).
//
// At most one build is in flight: Plan panics until the last one planned
// is installed.
func (t *Table) Plan(full bool) *Build {
	if t.pending != nil {
		panic("encoding: Table.Plan called while a build is in flight (Install it first)")
	}
	ids := t.Routers()
	b := &Build{p: t.p, from: t.cur, full: full || t.fullOnly, ids: ids, filters: make([][]Bloom, len(ids)),
		dirty: make([]uint32, 0, len(t.dirty))}
	for slot, id := range ids {
		b.filters[slot] = t.entries[id]
	}
	for id := range t.dirty {
		b.dirty = append(b.dirty, id)
	}
	// Sorted, so that a build does the same whatever the map's order.
	slices.Sort(b.dirty)
	clear(t.dirty)
	t.pending = b
	return b
}

// Run builds the index that Plan described and returns b. It touches
// nothing of the table's, so it may run on any goroutine while the
// table's owner goes on changing it; a second call does nothing.
func (b *Build) Run() *Build {
	if b.snap != nil {
		return b
	}
	s := &Snapshot{ids: b.ids, filters: b.filters}
	if len(b.ids) > 0 {
		s.maxID = b.ids[len(b.ids)-1]
	}
	b.snap, b.to = s, b.derive()
	b.to.compose(s)
	return b
}

// derive returns the layout of the snapshot b builds.
func (b *Build) derive() *layout {
	from := b.from
	if from.base != nil && len(b.dirty) == 0 && (!b.full || from.delta == nil) {
		return from // nothing changed since the last build
	}
	if from.base != nil && !b.full {
		to := &layout{base: from.base, baseFilters: from.baseFilters, deltaFilters: from.deltaFilters,
			rows: maps.Clone(from.rows), masked: maps.Clone(from.masked)}
		if to.rows == nil {
			to.rows = map[uint32][]Bloom{}
		}
		if to.masked == nil {
			to.masked = map[uint32]struct{}{}
		}
		for _, id := range b.dirty {
			now, ok := b.row(id)
			to.redo(id, now, ok)
		}
		if len(to.masked) <= maxChanged && to.deltaFilters*deltaShare <= to.baseFilters {
			if len(to.rows) > 0 || len(to.masked) > 0 {
				ids := slices.Sorted(maps.Keys(to.rows))
				rows := make([][]Bloom, len(ids))
				for i, id := range ids {
					rows[i] = to.rows[id]
				}
				to.delta = buildIndex(b.p, ids, rows)
			}
			return to
		}
	}
	to := &layout{base: buildIndex(b.p, b.ids, b.filters)}
	for _, f := range b.filters {
		to.baseFilters += len(f)
	}
	return to
}

// rowOf returns router's filters from rows kept as ascending ids and the
// filters of each, as builds, snapshots and indexes keep them.
func rowOf(ids []uint32, filters [][]Bloom, router uint32) ([]Bloom, bool) {
	slot, ok := slices.BinarySearch(ids, router)
	if !ok {
		return nil, false
	}
	return filters[slot], true
}

// row returns router's filters as planned.
func (b *Build) row(router uint32) ([]Bloom, bool) {
	return rowOf(b.ids, b.filters, router)
}

// Install makes b, planned by this table's last Plan and run, the table's
// last build, and returns its snapshot. It panics if b is another build
// or has not run.
func (t *Table) Install(b *Build) *Snapshot {
	switch {
	case b != t.pending:
		panic("encoding: Table.Install of a build this table is not waiting for")
	case b.snap == nil:
		panic("encoding: Table.Install of a build that has not run")
	}
	t.cur, t.pending = b.to, nil
	return b.snap
}

// compose gives s the layout's base and delta.
func (l *layout) compose(s *Snapshot) {
	s.base, s.delta, s.span = l.base, l.delta, max(s.maxID, l.base.maxID)
	if l.delta != nil {
		s.changed = slices.Sorted(maps.Keys(l.masked))
		s.span = max(s.span, l.delta.maxID)
	}
}

// redo sorts router, changed since the last build, into what the delta
// index holds and which base rows Match masks, now that its filters are
// now (ok: it is in the table). A router whose filters now include every
// filter it had in the base (subscriptions came, none went: the common
// change) keeps its base row, and the delta holds only the filters added;
// a router new since the base is all delta. A router that lost a filter or
// left is masked in the base, and the delta holds its current filters, if
// any.
func (l *layout) redo(router uint32, now []Bloom, ok bool) {
	l.deltaFilters -= len(l.rows[router])
	delete(l.rows, router)
	delete(l.masked, router)
	old, inBase := l.base.row(router)
	switch {
	case !ok:
		if inBase {
			l.masked[router] = struct{}{}
		}
	case !inBase:
		l.rows[router] = now
	default:
		added, grown := addedTo(old, now)
		switch {
		case !grown:
			l.rows[router] = now
			l.masked[router] = struct{}{}
		case len(added) > 0:
			l.rows[router] = added
		}
	}
	l.deltaFilters += len(l.rows[router])
}

// addedTo returns the filters of now that old lacks, and whether now has
// every filter of old. Both are rows of a table, without duplicates
// (Advertise).
func addedTo(old, now []Bloom) (added []Bloom, grown bool) {
	if len(now) < len(old) {
		return nil, false
	}
	have := make(map[uint64][]int32, len(old)) // hash → indexes into old
	for i := range old {
		h := old[i].hash()
		have[h] = append(have[h], int32(i))
	}
	found := 0
	for j := range now {
		if slices.ContainsFunc(have[now[j].hash()], func(i int32) bool { return old[i] == now[j] }) {
			found++
		} else {
			added = append(added, now[j])
		}
	}
	return added, found == len(old)
}

// Snapshot is an immutable PREDICATES table with an index for Match: the
// index of a full build (base), and, when routers changed since, the index
// of just those routers (delta) with the list of them (Table.Snapshot). It
// is safe for concurrent use.
type Snapshot struct {
	ids     []uint32  // routers in ascending order
	filters [][]Bloom // filters[i] is router ids[i]'s predicate
	maxID   uint32    // the highest router ID
	// span is the highest router ID of the table and of base: Match
	// writes the bits of base's routers before it masks the changed ones.
	span    uint32
	base    *index
	delta   *index   // nil: base is the whole table
	changed []uint32 // routers whose base rows are stale (masked), ascending; at most maxChanged

	force matchPath // tests pin the cold path; zero chooses by cost
}

// Partial reports whether the snapshot indexes some routers apart from the
// rest, as Table.Snapshot does after a few changes (Table.FullSnapshot
// does not).
func (s *Snapshot) Partial() bool { return s.delta != nil }

// Routers returns the routers in the snapshot in ascending order. The slice
// is shared: do not modify it.
func (s *Snapshot) Routers() []uint32 { return s.ids }

// Filters returns router's encoded predicate. The slice is shared: do not
// modify it.
func (s *Snapshot) Filters(router uint32) ([]Bloom, bool) {
	return rowOf(s.ids, s.filters, router)
}

// MaxID is at least the highest router ID in the snapshot (more when a
// router removed since the last full build had the highest ID then). A
// destination set of length MaxID()+1 or more is never grown by Match,
// which then allocates nothing.
func (s *Snapshot) MaxID() uint32 { return s.span }

// Match adds to dst (bit i = router ID i, the destination-set contract of
// docs/design.md §4) every router with some filter Bi ⊆ bm: the set D of Carzaniga09
// §2.2 for a message with Bloom bm. It does not clear dst.
func (s *Snapshot) Match(bm Bloom, dst *bitset.BitSet) {
	if len(s.ids) == 0 {
		return
	}
	out := s.destWords(dst)
	if s.delta == nil {
		s.base.match(bm, out, s.force)
		return
	}
	// The base's rows of the changed routers are stale: remember what dst
	// held for them, let the base set what it will, and put it back before
	// the delta adds what their current filters match.
	var held [maxChanged / 64]uint64
	for i, id := range s.changed {
		if out[id>>6]&(1<<(id&63)) != 0 {
			held[i>>6] |= 1 << (i & 63)
		}
	}
	s.base.match(bm, out, s.force)
	for i, id := range s.changed {
		out[id>>6] = out[id>>6]&^(1<<(id&63)) | (held[i>>6]>>(i&63)&1)<<(id&63)
	}
	s.delta.match(bm, out, s.force)
}

// destWords grows dst to cover every router ID Match may write and
// returns its words.
func (s *Snapshot) destWords(dst *bitset.BitSet) []uint64 {
	if dst.Len() <= uint(s.span) {
		// Bit span is beyond dst, so it was clear: set and clear it only
		// to grow.
		dst.Set(uint(s.span)).Clear(uint(s.span))
	}
	return dst.Words()
}

// MatchLinear is the reference for Match: it tests every router's filters in
// turn and stops at a router's first match. It gives the same result.
func (s *Snapshot) MatchLinear(bm Bloom, dst *bitset.BitSet) {
	if len(s.ids) == 0 {
		return
	}
	out := s.destWords(dst)
	nWords := (s.base.m + 63) / 64
	for slot, id := range s.ids {
		for i := range s.filters[slot] {
			if s.filters[slot][i].subsetOfFirst(&bm, nWords) {
				out[id>>6] |= 1 << (id & 63)
				break
			}
		}
	}
}

// index is the indexed form of some routers' predicates, which a Snapshot
// matches with. It is immutable.
//
// # Index
//
// Identical filters are stored once with the list of routers that
// advertise them, and split by how many routers share them:
//
//   - hot filters, shared by many routers (on the seed's workloads these
//     are the existence-only filters, which nearly every message matches),
//     keep their router set as a bitmap over router IDs and are tested
//     first, each with one subset test and, on a match, one OR of the
//     bitmap into the destination set;
//   - cold filters are indexed by two of their set positions, their key
//     positions p1 < p2, in a two-level trie in the style of SFF and
//     TagMatch: a node per p1 and, below it, a bucket per p2. A filter can
//     match only if both are set in the message's Bloom, so Match descends
//     only into the p1 and p2 set in it (intersecting bit masks, not
//     walking lists) and tests the filters of those buckets, stored as
//     position lists so that the index stays in cache. With message
//     density d (the share of set bits) that tests about d² of the cold
//     filters; a deeper trie would save tests only by visiting about as
//     many more nodes. The key positions are a filter's two rarest among
//     the cold filters (buildColdIndex), which are rarely set in messages
//     too.
//
// After the hot filters, routers already matched need no more work (the
// per-router early exit). When few routers are left, the common case on
// dense workloads where nearly every router has a hot match, Match scans
// just those routers' cold filters; otherwise it runs the cold index. Both
// give the same set; the choice is made per message from an estimate of
// the two costs.
type index struct {
	m      int
	coarse int      // the coarse part of the Bloom is [0, coarse)
	nWords int      // words of a Bloom of width m
	ids    []uint32 // routers in ascending order; their index is their slot
	// filters[slot] is the router's predicate for MatchLinear and Filters.
	filters [][]Bloom

	maxID uint32
	dense bool // router IDs are dense enough for bitmaps over the ID space
	// all has a bit per router ID in the table (dense only).
	all []uint64
	// slotOf maps a router ID to its slot (dense only).
	slotOf []int32

	always []uint32 // routers with the zero filter, which matches every message

	hot        []Bloom
	hotRouters []uint64 // len(hot) bitmaps of len(all) words each

	// Cold filters of each router, for the per-router path: router slot s
	// owns the entries coldOf[coldStart[s]:coldStart[s+1]].
	coldOf    []uint32
	coldStart []uint32

	// The cold index, by each filter's two key positions p1 < p2 (its
	// rarest, see buildColdIndex). level1[p] is used when l1Mask has bit
	// p; bucket b holds entries bucketStart[b] up to bucketStart[b+1].
	l1Mask      Bloom
	l1Count     int          // nodes in l1Mask
	level1      []level1Node // M entries
	bucketStart []uint32
	// Node n's children (the p2 under it) are the bits of the n.nw words
	// at childWords[n.off:], word childIdx[i] of a Bloom each;
	// childRank[i] counts the node's children in its words before. Only
	// words that hold children are stored: at M=2048 a full Bloom per node
	// would be 256 bytes, and a loop over 32 words per node visited.
	childWords []uint64
	childIdx   []uint8
	childRank  []uint16
	// Cold filters are stored as their sorted set positions, not as Blooms:
	// a sparse filter is then a few bytes, and the index, visited in
	// random order, stays in cache. Entry e has positions
	// positions[entries[e].pos:entries[e+1].pos] and routers
	// routers[entries[e].rtr:entries[e+1].rtr]; a sentinel ends the slice.
	entries   []coldEntry
	positions []uint16
	routers   []uint32
	nCold     int // distinct cold filters
}

type matchPath uint8

const (
	pathByCost matchPath = iota
	pathLeft
	pathIndex
)

// coldEntry locates a cold filter's positions and routers. Its positions
// start with the two key positions and the third rarest, which third
// repeats (noThird if it has fewer): in a bucket, where the first two are
// known to be set, that one test rejects most entries without touching
// positions.
type coldEntry struct {
	pos, rtr uint32
	third    uint16
}

const noThird = 0xffff

type level1Node struct {
	base   uint32 // bucket index of the lowest child
	single int32  // entry of the filter whose only bit is p1, or -1
	off    uint32 // first word of the children in childWords
	nw     uint32 // words of children
}

// The estimate of buildColdIndex. coarseChance and fineChance are the
// percent of bits set in the two parts of a typical cat-v2 message Bloom
// (10 attributes, docs/results/encoded-matching.md); popularWeight says how
// much more often than its share of filters a message has a category that
// filters share. Only speed depends on them, never the result.
const (
	coarseChance  = 21
	fineChance    = 41
	popularWeight = 10
)

// hotMinRouters is the fewest routers a filter must have to be hot: below
// it, setting routers one by one is as cheap as a bitmap OR and the filter
// is better off in the index.
const hotMinRouters = 8

// buildIndex indexes the predicates of routers ids (ascending), rows[i]
// that of ids[i]. It keeps both slices and modifies neither.
func buildIndex(p Params, ids []uint32, rows [][]Bloom) *index {
	s := &index{m: p.M, coarse: p.coarseBits(), nWords: (p.M + 63) / 64, ids: ids, filters: rows}
	pairs := 0
	for _, f := range rows {
		pairs += len(f)
	}
	if len(ids) > 0 {
		s.maxID = ids[len(ids)-1]
	}
	nWords := int(s.maxID)/64 + 1
	// A bitmap over the ID space is at most ~64 bits per router: the
	// StatefulSet ordinals of docs/design.md §3 always are.
	s.dense = nWords <= len(ids)+16
	if s.dense {
		s.all = make([]uint64, nWords)
		s.slotOf = make([]int32, nWords*64)
		for slot, id := range ids {
			s.all[id>>6] |= 1 << (id & 63)
			s.slotOf[id] = int32(slot)
		}
	}

	// Number the distinct filters, remember the number of every (router,
	// filter) pair, and count the routers of each. The map is keyed by a
	// hash, with a chain through same-hash filters: a map keyed by the
	// 256-byte Blooms themselves would store every key on the heap.
	// The slices are sized for the worst case, every filter distinct, so
	// that they are allocated once rather than grown by doubling.
	index := make(map[uint64]int32, pairs)
	distinct := make([]*Bloom, 0, pairs) // into s.filters, which no one modifies
	count, sameHash := make([]int32, 0, pairs), make([]int32, 0, pairs)
	pairDistinct := make([]int32, 0, pairs)
	for slot := range ids {
		for j := range s.filters[slot] {
			b := &s.filters[slot][j]
			h := b.hash()
			d, ok := index[h]
			for ok && *distinct[d] != *b {
				d = sameHash[d]
				ok = d >= 0
			}
			if !ok {
				d = int32(len(distinct))
				first, had := index[h]
				if !had {
					first = -1
				}
				index[h] = d
				distinct = append(distinct, b)
				count = append(count, 0)
				sameHash = append(sameHash, first)
			}
			count[d]++
			pairDistinct = append(pairDistinct, d)
		}
	}
	// owners(d) = ownerIDs[ownerStart[d]:ownerStart[d+1]], in ascending
	// router order (a counting sort of the pairs).
	ownerStart := make([]int32, len(distinct)+1)
	for d, c := range count {
		ownerStart[d+1] = ownerStart[d] + c
	}
	ownerIDs := make([]uint32, pairs)
	fill := slices.Clone(ownerStart[:len(distinct)])
	i := 0
	for slot, id := range ids {
		for range s.filters[slot] {
			d := pairDistinct[i]
			ownerIDs[fill[d]] = id
			fill[d]++
			i++
		}
	}
	owners := func(d int32) []uint32 { return ownerIDs[ownerStart[d]:ownerStart[d+1]] }

	hotMin := int32(max(hotMinRouters, nWords))
	var hot []int32
	cold := make([]int32, 0, len(distinct))
	for d, b := range distinct {
		switch {
		case b.IsZero():
			s.always = owners(int32(d))
		case s.dense && count[d] >= hotMin:
			hot = append(hot, int32(d))
		default:
			cold = append(cold, int32(d))
		}
	}

	// Most widely shared first, so that the routers are covered early.
	slices.SortStableFunc(hot, func(a, b int32) int { return cmp.Compare(count[b], count[a]) })
	s.hot = make([]Bloom, len(hot))
	s.hotRouters = make([]uint64, len(hot)*nWords)
	for i, d := range hot {
		s.hot[i] = *distinct[d]
		bm := s.hotRouters[i*nWords : (i+1)*nWords]
		for _, id := range owners(d) {
			bm[id>>6] |= 1 << (id & 63)
		}
	}

	entryOf := s.buildColdIndex(distinct, cold, owners)
	s.coldStart = make([]uint32, len(ids)+1)
	s.coldOf = make([]uint32, 0, pairs)
	i = 0
	for slot := range ids {
		for range s.filters[slot] {
			if e := entryOf[pairDistinct[i]]; e >= 0 {
				s.coldOf = append(s.coldOf, uint32(e))
			}
			i++
		}
		s.coldStart[slot+1] = uint32(len(s.coldOf))
	}
	return s
}

// buildColdIndex lays the cold filters out by their two key positions and
// returns the entry of each distinct filter, -1 if not cold.
//
// A filter's key positions are its two rarest among the cold filters
// (ties to the lower position), its third the third rarest. Positions that
// many filters share belong to categories that many messages have too, the
// existence categories above all (a cat-v2 filter has one per non-equality
// constraint, and on the default workload every message has every
// attribute): keyed by them, a filter would be a candidate for nearly
// every message. (Its lowest positions, the first choice, are as common as
// any: on default under cat-v2 they made Match 100 times slower.)
func (s *index) buildColdIndex(distinct []*Bloom, cold []int32, owners func(int32) []uint32) []int32 {
	s.nCold = len(cold)
	s.level1 = make([]level1Node, s.m)
	for p := range s.level1 {
		s.level1[p] = level1Node{single: -1}
	}
	// Every cold filter's positions, once: ordered[ordStart[i]:ordStart[i+1]]
	// for cold[i], ascending here and in entry order after keyOrder.
	freq := make([]int32, s.m)
	ordStart := make([]uint32, len(cold)+1)
	total, pairs := 0, 0
	for _, d := range cold {
		total += distinct[d].PopCount()
		pairs += len(owners(d))
	}
	ordered := make([]uint16, 0, total)
	s.routers = make([]uint32, 0, pairs)
	for i, d := range cold {
		ordered = distinct[d].appendPositions16(ordered)
		ordStart[i+1] = uint32(len(ordered))
	}
	for _, p := range ordered {
		freq[p]++
	}
	// est approximates how often a position is set in a message, in
	// units of 1/nCold: the part's density by chance, plus the share of
	// filters that have it, weighted: a category that many filters require
	// (the existence of a common attribute) is one that many messages have.
	est := make([]int64, s.m)
	for p := range est {
		chance := coarseChance
		if p >= s.coarse {
			chance = fineChance
		}
		est[p] = int64(len(cold))*int64(chance)/100 + popularWeight*int64(freq[p])
	}
	rarer := func(a, b uint16) int {
		if c := cmp.Compare(est[a], est[b]); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	}
	// keyOrder puts a filter's ascending positions in entry order: the two
	// key positions ascending, the third rarest, then the rest, still
	// ascending (moving the three to the front keeps the others' order).
	keyOrder := func(pos []uint16) {
		var top [3]int // indexes of the rarest, in rank order
		n := min(3, len(pos))
		for r := range n {
			best := -1
			for j := range pos {
				if (r < 1 || j != top[0]) && (r < 2 || j != top[1]) && (best < 0 || rarer(pos[j], pos[best]) < 0) {
					best = j
				}
			}
			top[r] = best
		}
		var first [3]uint16
		for r := range n {
			first[r] = pos[top[r]]
		}
		if n >= 2 && first[1] < first[0] {
			first[0], first[1] = first[1], first[0]
		}
		// Shift the others right, past the three, keeping their order.
		w := len(pos)
		for j := len(pos) - 1; j >= 0; j-- {
			if (n > 0 && j == top[0]) || (n > 1 && j == top[1]) || (n > 2 && j == top[2]) {
				continue
			}
			w--
			pos[w] = pos[j]
		}
		copy(pos, first[:n])
	}
	// A one-bit filter has p2 = MaxBits, which sorts it after the bucketed
	// filters, so that each bucket's entries run up to the next bucket's
	// first.
	type keyed struct {
		p1, p2 uint16
		d      int32 // index into cold
	}
	keys := make([]keyed, len(cold))
	for i := range cold {
		pos := ordered[ordStart[i]:ordStart[i+1]]
		keyOrder(pos)
		k := keyed{pos[0], MaxBits, int32(i)}
		if len(pos) > 1 {
			k.p2 = pos[1]
		}
		keys[i] = k
	}
	oneBit := func(k keyed) int {
		if k.p2 == MaxBits {
			return 1
		}
		return 0
	}
	slices.SortFunc(keys, func(a, b keyed) int {
		if c := cmp.Compare(oneBit(a), oneBit(b)); c != 0 {
			return c
		}
		if c := cmp.Compare(a.p1, b.p1); c != 0 {
			return c
		}
		if c := cmp.Compare(a.p2, b.p2); c != 0 {
			return c
		}
		return cmp.Compare(a.d, b.d)
	})
	entryOf := make([]int32, len(distinct))
	for i := range entryOf {
		entryOf[i] = -1
	}
	bucketed := uint32(0) // entries below it are in buckets
	var children []keyed  // the distinct (p1, p2) of the buckets, in order
	s.entries = make([]coldEntry, 0, len(keys)+1)
	s.positions = make([]uint16, 0, len(ordered))
	for _, k := range keys {
		e := uint32(len(s.entries))
		i := k.d // the index into cold
		d := cold[i]
		entryOf[d] = int32(e)
		first := uint32(len(s.positions))
		s.positions = append(s.positions, ordered[ordStart[i]:ordStart[i+1]]...)
		third := uint16(noThird)
		if uint32(len(s.positions))-first > 2 {
			third = s.positions[first+2]
		}
		s.entries = append(s.entries, coldEntry{first, uint32(len(s.routers)), third})
		s.routers = append(s.routers, owners(d)...)

		n := &s.level1[k.p1]
		s.l1Mask.Set(int(k.p1))
		if k.p2 == MaxBits {
			n.single = int32(e)
			continue
		}
		if last := len(children) - 1; last < 0 || children[last].p1 != k.p1 || children[last].p2 != k.p2 {
			if last < 0 || children[last].p1 != k.p1 {
				n.base = uint32(len(s.bucketStart))
			}
			children = append(children, k)
			s.bucketStart = append(s.bucketStart, e)
		}
		bucketed = e + 1
	}
	s.entries = append(s.entries, coldEntry{uint32(len(s.positions)), uint32(len(s.routers)), noThird})
	s.bucketStart = append(s.bucketStart, bucketed)
	s.l1Count = s.l1Mask.PopCount()
	// Lay out each node's children words and their ranks.
	for i := 0; i < len(children); {
		j := i
		for j < len(children) && children[j].p1 == children[i].p1 {
			j++
		}
		n := &s.level1[children[i].p1]
		n.off = uint32(len(s.childWords))
		var r uint16
		for _, c := range children[i:j] { // ascending p2
			w := uint8(c.p2 >> 6)
			if last := len(s.childIdx) - 1; uint32(len(s.childIdx)) == n.off || s.childIdx[last] != w {
				s.childWords = append(s.childWords, 0)
				s.childIdx = append(s.childIdx, w)
				s.childRank = append(s.childRank, r)
			}
			s.childWords[len(s.childWords)-1] |= 1 << (c.p2 & 63)
			r++
		}
		n.nw = uint32(len(s.childWords)) - n.off
		i = j
	}
	return entryOf
}

// row returns router's filters in the index.
func (s *index) row(router uint32) ([]Bloom, bool) {
	return rowOf(s.ids, s.filters, router)
}

// match adds to out, which covers every router ID, the routers of the
// index with some filter Bi ⊆ bm (Snapshot.Match).
func (s *index) match(bm Bloom, out []uint64, force matchPath) {
	if len(s.ids) == 0 {
		return
	}
	for _, id := range s.always {
		out[id>>6] |= 1 << (id & 63)
	}
	if s.dense {
		nWords := len(s.all)
		for i := range s.hot {
			// By index: ranging over values would copy 256 bytes each.
			if s.hot[i].subsetOfFirst(&bm, s.nWords) {
				hr := s.hotRouters[i*nWords : (i+1)*nWords]
				for j, w := range hr {
					out[j] |= w
				}
			}
		}
	}
	if s.nCold == 0 {
		return
	}
	limit := s.indexCost(bm)
	switch force {
	case pathLeft:
		limit = len(s.coldOf)
	case pathIndex:
		limit = -1
	}
	switch left, ok := s.leftWork(out, limit); {
	case !ok:
		s.matchIndex(bm, out)
	case left > 0:
		s.matchLeft(bm, out)
	}
}

// indexCost estimates the filter tests of matchIndex: if a share d of the
// level-1 nodes is set in bm, the index visits about d² of the cold
// filters, plus those d nodes. (Measuring d over the nodes rather than all
// M bits matters under cat-v2, whose filters start in the sparser first
// quarter of the Bloom.)
func (s *index) indexCost(bm Bloom) int {
	v := 0
	for i := range s.nWords {
		v += bits.OnesCount64(bm.w[i] & s.l1Mask.w[i])
	}
	return s.nCold*v/s.l1Count*v/s.l1Count + v
}

// leftWork reports whether the routers not yet in out have at most limit
// cold filters in total, and if so how many routers that is.
func (s *index) leftWork(out []uint64, limit int) (routers int, ok bool) {
	work := 0
	if s.dense {
		for i, w := range s.all {
			for u := w &^ out[i]; u != 0; u &= u - 1 {
				slot := s.slotOf[i<<6+bits.TrailingZeros64(u)]
				work += int(s.coldStart[slot+1] - s.coldStart[slot])
				routers++
				if work > limit {
					return 0, false
				}
			}
		}
		return routers, true
	}
	for slot, id := range s.ids {
		if out[id>>6]&(1<<(id&63)) == 0 {
			work += int(s.coldStart[slot+1] - s.coldStart[slot])
			routers++
			if work > limit {
				return 0, false
			}
		}
	}
	return routers, true
}

// matchLeft scans the cold filters of each router not yet in out.
func (s *index) matchLeft(bm Bloom, out []uint64) {
	try := func(slot int, id uint32) {
		for _, e := range s.coldOf[s.coldStart[slot]:s.coldStart[slot+1]] {
			if s.entryIn(e, 0, bm) {
				out[id>>6] |= 1 << (id & 63)
				return
			}
		}
	}
	if s.dense {
		for i, w := range s.all {
			for u := w &^ out[i]; u != 0; u &= u - 1 {
				id := uint32(i<<6 + bits.TrailingZeros64(u))
				try(int(s.slotOf[id]), id)
			}
		}
		return
	}
	for slot, id := range s.ids {
		if out[id>>6]&(1<<(id&63)) == 0 {
			try(slot, id)
		}
	}
}

// matchIndex runs the cold index.
func (s *index) matchIndex(bm Bloom, out []uint64) {
	for i := range s.nWords {
		for u := bm.w[i] & s.l1Mask.w[i]; u != 0; u &= u - 1 {
			n := &s.level1[i<<6+bits.TrailingZeros64(u)]
			if n.single >= 0 {
				s.setRouters(out, uint32(n.single))
			}
			for k := n.off; k < n.off+n.nw; k++ {
				cw := s.childWords[k]
				for c := cw & bm.w[s.childIdx[k]]; c != 0; c &= c - 1 {
					below := cw & (1<<bits.TrailingZeros64(c) - 1)
					bk := n.base + uint32(s.childRank[k]) + uint32(bits.OnesCount64(below))
					for e := s.bucketStart[bk]; e < s.bucketStart[bk+1]; e++ {
						// The bucket's p1 and p2 are set in bm.
						th := s.entries[e].third
						if th == noThird || bm.w[th>>6]&(1<<(th&63)) != 0 && s.anyLeft(out, e) && s.entryIn(e, 3, bm) {
							s.setRouters(out, e)
						}
					}
				}
			}
		}
	}
}

// entryIn reports whether the positions of entry e from the skip-th on are
// all set in bm.
func (s *index) entryIn(e uint32, skip uint32, bm Bloom) bool {
	for _, p := range s.positions[s.entries[e].pos+skip : s.entries[e+1].pos] {
		if bm.w[p>>6]&(1<<(p&63)) == 0 {
			return false
		}
	}
	return true
}

// anyLeft reports whether some router of entry e is not yet in out: the
// per-router early exit, inside the index. On dense workloads most
// candidates belong to routers that an earlier filter already matched.
func (s *index) anyLeft(out []uint64, e uint32) bool {
	for _, id := range s.routers[s.entries[e].rtr:s.entries[e+1].rtr] {
		if out[id>>6]&(1<<(id&63)) == 0 {
			return true
		}
	}
	return false
}

func (s *index) setRouters(out []uint64, e uint32) {
	for _, id := range s.routers[s.entries[e].rtr:s.entries[e+1].rtr] {
		out[id>>6] |= 1 << (id & 63)
	}
}
