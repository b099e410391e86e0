package match

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"sort"

	"github.com/dripmesh/drip/internal/content"
)

// SubscriberID names a subscription; the broker chooses the values.
type SubscriberID uint64

// Index matches messages against the predicates of many subscribers. The
// zero Index is not usable; call New. An Index is not safe for concurrent
// use: Match updates per-message scratch state, so even concurrent Matches
// need the caller's lock.
type Index struct {
	names map[string]*attrIndex // distinct constraints by attribute name

	// Distinct constraints, by id. What Match touches sits apart from the
	// rest, in dense slices.
	cons      []consInfo
	consByKey map[consKey]int32
	freeCons  []int32
	access    []accessList // filters whose access constraint this is
	state     []consState  // what phase 1 of Match reads and writes

	// Distinct filters, by id.
	filters     []filterInfo
	filterKeys  []string         // by filter id: its key in filterByKey
	filterByKey map[string]int32 // key: the filter's sorted constraint ids
	freeFilters []int32
	nFilters    int

	// Subscribers, by dense slot.
	subs      map[SubscriberID]int32
	slots     []subscriber
	subState  []subState // by slot, for Match
	freeSlots []int32

	// gen numbers the messages; stamps equal to it belong to the current
	// message, which spares clearing O(constraints) state per message.
	gen  uint32
	hits []int32 // satisfied constraints that are some filter's access constraint

	idBuf  []int32 // scratch for internFilter
	keyBuf []byte

	groupMin int32 // plain filters sharing a bound that form a boundGroup
}

// consInfo is what the index keeps per distinct constraint outside Match.
type consInfo struct {
	c    content.Constraint // as first added; any equivalent one would do
	attr *attrIndex         // of c.Name
	key  consKey
	rank uint8
	refs int32 // filters containing it; it is dropped at 0
}

// consState is what phase 1 of Match needs of a constraint, packed small
// because phase 1 visits constraints in no useful order.
type consState struct {
	seen     uint32 // gen of the last message found to satisfy it
	accessOf int32  // len(access[id])
}

type subState struct {
	id       SubscriberID
	reported uint32 // gen of the last message it was reported for
}

// consKey identifies a constraint up to equivalence: numbers are normalised
// (x < 3 and x < 3.0 are one constraint), NaN operands are one key.
type consKey struct {
	name string
	op   content.Op
	kind content.Kind // KindInt for every number, KindInvalid for exists
	str  string
	num  num
	b    bool
}

// filterInfo is one distinct conjunction.
type filterInfo struct {
	// cons are the distinct constraint ids; cons[0] is the access
	// constraint, the only one through which Match reaches the filter, and
	// the rest follow most selective first so a failing check stops early.
	cons []int32
	// rest is how Match checks cons[1:], in the filter's own memory so
	// that checking a filter does not wander over the index.
	rest   []check
	owners []owner // subscribers whose predicate contains this filter
	// Where the filter sits in access[cons[0]]: at accessPos of its plain
	// list, or, when group is set, in that group under the key bound.
	accessPos int32
	group     *boundGroup
	bound     num
}

// accessList holds the filters reached through one access constraint.
// Where many of them also order one numeric attribute with one operator
// (symbol = "DRIP" && n < K, a K per subscriber), those are kept in a
// boundGroup sorted by the bound, so that Match visits only the filters
// whose ordering the message satisfies: ten thousand such filters cost a
// binary search, not ten thousand checks, for a message whose n satisfies
// none of them. A group costs a binary search per message, more than
// checking a few filters, so it forms only once groupMin plain filters
// share the attribute and operator, and dissolves below a quarter of that.
type accessList struct {
	plain  []int32            // checked one by one
	bounds []*boundGroup      // few: one per attribute and operator
	counts map[boundKey]int32 // plain filters by the bound they would be grouped by
}

// boundKey is what the filters of a boundGroup share.
type boundKey struct {
	attr *attrIndex
	op   content.Op
}

// defaultGroupMin is where a group starts to pay: measured on the paper's
// workload, where groups of a few filters made Match slower.
const defaultGroupMin = 32

// boundGroup is the filters of one access constraint that share an
// ordering operator on one numeric attribute, sorted by its operand.
type boundGroup struct {
	attr    *attrIndex // of the ordered attribute, for the message's value
	op      content.Op // <, <=, > or >=
	keys    []num      // the operands, ascending; never NaN
	filters []int32    // filters[i] has operand keys[i]
}

// holding returns the range of g.filters whose ordering the value the
// current message (numbered gen) gave g's attribute satisfies: x < t holds
// for the t above the value, x <= t for those at or above it, and so on. A
// missing, non-numeric or NaN value satisfies none.
func (g *boundGroup) holding(gen uint32) (lo, hi int) {
	a := g.attr
	if a.curGen != gen {
		return 0, 0
	}
	if k := a.cur.Kind(); k != content.KindInt && k != content.KindFloat {
		return 0, 0
	}
	v := toNum(a.cur)
	if v.kind == numNaN {
		return 0, 0
	}
	// below: first key >= v; upTo: first key > v.
	below, eq := slices.BinarySearchFunc(g.keys, v, cmpNum)
	upTo := below
	if eq {
		upTo += sort.Search(len(g.keys)-below, func(i int) bool { return cmpNum(g.keys[below+i], v) > 0 })
	}
	switch g.op {
	case content.OpLt:
		return upTo, len(g.keys)
	case content.OpLe:
		return below, len(g.keys)
	case content.OpGt:
		return 0, below
	default: // content.OpGe
		return 0, upTo
	}
}

// boundOf returns the check of rest that a filter is grouped by: its first
// ordering on a number, which is never NaN here (a NaN ordering holds for
// nothing, so it ranks first and is the filter's access constraint).
func boundOf(rest []check) (check, bool) {
	for _, k := range rest {
		switch k.op {
		case content.OpLt, content.OpLe, content.OpGt, content.OpGe:
			if kind := k.value.Kind(); kind == content.KindInt || kind == content.KindFloat {
				if toNum(k.value).kind != numNaN {
					return k, true
				}
			}
		}
	}
	return check{}, false
}

// insert files filter fi in the access list, in its group if there is
// one, and records where in f. filters is the index's table, for moving
// filters into a group that forms.
func (al *accessList) insert(fi int32, f *filterInfo, filters []filterInfo, groupMin int32) {
	f.accessPos, f.group = int32(len(al.plain)), nil
	k, bounded := boundOf(f.rest)
	if !bounded {
		al.plain = append(al.plain, fi)
		return
	}
	key := boundKey{k.attr, k.op}
	for _, g := range al.bounds {
		if g.attr == key.attr && g.op == key.op {
			g.add(fi, f, toNum(k.value))
			return
		}
	}
	al.plain = append(al.plain, fi)
	if al.counts == nil {
		al.counts = make(map[boundKey]int32)
	}
	if al.counts[key]++; al.counts[key] >= groupMin {
		al.form(key, filters)
	}
}

// form moves the plain filters bounded on key into a new group.
func (al *accessList) form(key boundKey, filters []filterInfo) {
	g := &boundGroup{attr: key.attr, op: key.op}
	kept := al.plain[:0]
	for _, fi := range al.plain {
		f := &filters[fi]
		if k, ok := boundOf(f.rest); ok && k.attr == key.attr && k.op == key.op {
			g.add(fi, f, toNum(k.value))
			continue
		}
		f.accessPos = int32(len(kept))
		kept = append(kept, fi)
	}
	clear(al.plain[len(kept):])
	al.plain = kept
	al.bounds = append(al.bounds, g)
	delete(al.counts, key)
}

// add files filter fi, of bound n, in g.
func (g *boundGroup) add(fi int32, f *filterInfo, n num) {
	f.group, f.bound, f.accessPos = g, n, -1
	i, _ := slices.BinarySearchFunc(g.keys, n, cmpNum)
	g.keys = slices.Insert(g.keys, i, n)
	g.filters = slices.Insert(g.filters, i, fi)
}

// remove takes filter fi out of the access list. filters is the index's
// table, for updating the position of the filter that takes fi's place.
func (al *accessList) remove(fi int32, f *filterInfo, filters []filterInfo, groupMin int32) {
	if g := f.group; g != nil {
		i, _ := slices.BinarySearchFunc(g.keys, f.bound, cmpNum)
		for g.filters[i] != fi {
			i++ // among the filters of an equal bound
		}
		g.keys = slices.Delete(g.keys, i, i+1)
		g.filters = slices.Delete(g.filters, i, i+1)
		f.group = nil
		if int32(len(g.filters))*4 < groupMin {
			al.dissolve(g, filters)
		}
		return
	}
	last := int32(len(al.plain) - 1)
	if f.accessPos != last {
		moved := al.plain[last]
		al.plain[f.accessPos] = moved
		filters[moved].accessPos = f.accessPos
	}
	al.plain = al.plain[:last]
	if k, ok := boundOf(f.rest); ok {
		key := boundKey{k.attr, k.op}
		if al.counts[key]--; al.counts[key] == 0 {
			delete(al.counts, key)
		}
	}
}

// dissolve returns the filters of a group grown too small to the plain
// list.
func (al *accessList) dissolve(g *boundGroup, filters []filterInfo) {
	al.bounds = slices.DeleteFunc(al.bounds, func(h *boundGroup) bool { return h == g })
	if len(g.filters) == 0 {
		return
	}
	if al.counts == nil {
		al.counts = make(map[boundKey]int32)
	}
	for _, fi := range g.filters {
		f := &filters[fi]
		f.group, f.accessPos = nil, int32(len(al.plain))
		al.plain = append(al.plain, fi)
	}
	al.counts[boundKey{g.attr, g.op}] += int32(len(g.filters))
}

// check is one constraint of a filter as Match checks it: by its stamp if
// it is found in phase 1, or, for the on-demand ones (attr != nil), by
// evaluating the operator and operand on the value the message gave attr's
// name. On-demand constraints are evaluated even while linked as some other
// filter's access constraint: the answer is the same and needs no lookup.
type check struct {
	c     int32
	op    content.Op
	value content.Value
	attr  *attrIndex
}

// owner is one subscriber of a filter, with the position of the filter in
// that subscriber's list, so removal is O(1) at both ends.
type owner struct {
	slot int32
	idx  int32
}

type subscriber struct {
	filters []int32 // distinct filters of the predicate
	pos     []int32 // pos[i]: position of this subscriber in filters[filters[i]].owners
}

// Selectivity ranks: the access constraint of a filter is the one of lowest
// rank, a guess at the least often satisfied. The guess only affects speed.
const (
	rankNever    uint8 = iota // NaN operand with =, <, <=, >, >=: satisfied by nothing
	rankEq                    // = on strings and numbers
	rankAffix                 // prefix, suffix
	rankContains              // contains
	rankWide                  // orderings, = on booleans
	rankNe                    // !=
	rankExists                // exists
)

// New returns an empty index.
func New() *Index {
	return &Index{
		names:       make(map[string]*attrIndex),
		consByKey:   make(map[consKey]int32),
		filterByKey: make(map[string]int32),
		subs:        make(map[SubscriberID]int32),
		groupMin:    defaultGroupMin,
	}
}

// Len returns the number of subscribers.
func (x *Index) Len() int { return len(x.subs) }

// Filters returns the number of distinct filters installed: a filter found
// in several predicates, or twice in one, counts once.
func (x *Index) Filters() int { return x.nFilters }

// Constraints returns the number of distinct constraints installed.
func (x *Index) Constraints() int { return len(x.consByKey) }

// Add installs predicate p for subscriber id. It fails if id is already
// present or p is invalid (content.Predicate.Validate); the index is then
// unchanged.
func (x *Index) Add(id SubscriberID, p content.Predicate) error {
	if _, ok := x.subs[id]; ok {
		return fmt.Errorf("match: subscriber %d is already present", id)
	}
	return x.Replace(id, p)
}

// Replace installs predicate p for subscriber id, replacing its previous
// predicate if it has one. If p is invalid it returns the error and leaves
// the index unchanged. Filters common to the old and new predicates stay
// installed throughout.
func (x *Index) Replace(id SubscriberID, p content.Predicate) error {
	if err := p.Validate(); err != nil {
		return fmt.Errorf("match: subscriber %d: %w", id, err)
	}
	x.replace(id, p)
	return nil
}

// replace is Replace without validation. Beyond what Validate admits it
// handles any constraint whose operator applies to its value, non-finite
// float operands included, the way content.Constraint.Matches does; the
// tests use that to keep the index honest should content ever admit them.
func (x *Index) replace(id SubscriberID, p content.Predicate) {
	slot, ok := x.subs[id]
	if !ok {
		slot = x.newSlot(id)
	}
	s := &x.slots[slot]
	oldFilters, oldPos := s.filters, s.pos
	oldIdx := make(map[int32]int, len(oldFilters))
	for j, fi := range oldFilters {
		oldIdx[fi] = j
	}
	kept := make([]bool, len(oldFilters))
	newSeen := make(map[int32]bool, len(p))
	s.filters, s.pos = make([]int32, 0, len(p)), make([]int32, 0, len(p))
	for _, f := range p {
		fi := x.internFilter(f)
		if newSeen[fi] {
			continue
		}
		newSeen[fi] = true
		if j, ok := oldIdx[fi]; ok {
			kept[j] = true
			x.filters[fi].owners[oldPos[j]].idx = int32(len(s.filters))
			s.filters = append(s.filters, fi)
			s.pos = append(s.pos, oldPos[j])
			continue
		}
		x.addOwner(slot, fi)
	}
	// Dropped last, so constraints shared with the new predicate are never
	// freed and re-interned.
	for j, fi := range oldFilters {
		if !kept[j] {
			x.removeOwner(fi, oldPos[j])
		}
	}
}

// Remove uninstalls subscriber id's predicate and reports whether id was
// present. Filters and constraints no other subscriber uses are freed.
func (x *Index) Remove(id SubscriberID) bool {
	slot, ok := x.subs[id]
	if !ok {
		return false
	}
	s := x.slots[slot]
	for j, fi := range s.filters {
		x.removeOwner(fi, s.pos[j])
	}
	delete(x.subs, id)
	x.slots[slot] = subscriber{}
	x.freeSlots = append(x.freeSlots, slot)
	return true
}

func (x *Index) newSlot(id SubscriberID) int32 {
	var slot int32
	if n := len(x.freeSlots); n > 0 {
		slot = x.freeSlots[n-1]
		x.freeSlots = x.freeSlots[:n-1]
		x.subState[slot].id = id
	} else {
		slot = int32(len(x.slots))
		x.slots = append(x.slots, subscriber{})
		x.subState = append(x.subState, subState{id: id})
	}
	x.subs[id] = slot
	return slot
}

func (x *Index) addOwner(slot, fi int32) {
	s, f := &x.slots[slot], &x.filters[fi]
	s.filters = append(s.filters, fi)
	s.pos = append(s.pos, int32(len(f.owners)))
	f.owners = append(f.owners, owner{slot: slot, idx: int32(len(s.filters) - 1)})
}

// removeOwner drops the owner at position p of filter fi, and the filter
// itself when that was the last owner.
func (x *Index) removeOwner(fi, p int32) {
	f := &x.filters[fi]
	last := int32(len(f.owners) - 1)
	if p != last {
		moved := f.owners[last]
		f.owners[p] = moved
		x.slots[moved.slot].pos[moved.idx] = p
	}
	f.owners = f.owners[:last]
	if last == 0 {
		x.releaseFilter(fi)
	}
}

// internFilter returns the id of the distinct filter equivalent to f,
// installing it (with no owners yet) if needed. f must be valid.
func (x *Index) internFilter(f content.Filter) int32 {
	ids := x.idBuf[:0]
	for _, c := range f {
		ids = append(ids, x.internConstraint(c))
	}
	x.idBuf = ids
	// Sorting and compacting makes the key canonical and drops duplicate
	// constraints (x = 1 && x = 1, or x = 1 && x = 1.0), which would
	// otherwise be required twice.
	slices.Sort(ids)
	ids = slices.Compact(ids)
	x.keyBuf = x.keyBuf[:0]
	for _, id := range ids {
		x.keyBuf = binary.LittleEndian.AppendUint32(x.keyBuf, uint32(id))
	}
	if fi, ok := x.filterByKey[string(x.keyBuf)]; ok {
		// Every constraint of an installed filter was installed already, so
		// internConstraint created none that could leak here.
		return fi
	}
	return x.installFilter(slices.Clone(ids), string(x.keyBuf))
}

// installFilter installs the filter of distinct constraints ids under key,
// with no owners yet, choosing its access constraint.
func (x *Index) installFilter(ids []int32, key string) int32 {
	slices.SortStableFunc(ids, func(a, b int32) int {
		return int(x.cons[a].rank) - int(x.cons[b].rank)
	})
	for _, id := range ids {
		x.cons[id].refs++
	}
	var fi int32
	if n := len(x.freeFilters); n > 0 {
		fi = x.freeFilters[n-1]
		x.freeFilters = x.freeFilters[:n-1]
	} else {
		fi = int32(len(x.filters))
		x.filters = append(x.filters, filterInfo{})
		x.filterKeys = append(x.filterKeys, "")
	}
	acc := ids[0]
	rest := make([]check, len(ids)-1)
	for i, id := range ids[1:] {
		rest[i].c = id
		if ci := &x.cons[id]; onDemand(ci.c.Op) {
			rest[i].op, rest[i].value, rest[i].attr = ci.c.Op, ci.c.Value, ci.attr
		}
	}
	x.filters[fi] = filterInfo{cons: ids, rest: rest}
	x.access[acc].insert(fi, &x.filters[fi], x.filters, x.groupMin)
	st := &x.state[acc]
	st.accessOf++
	if st.accessOf == 1 && onDemand(x.cons[acc].c.Op) {
		// Now that it gives access to a filter, Match must find it.
		x.cons[acc].attr.link(x.cons[acc].c, acc)
	}
	x.filterKeys[fi] = key
	x.filterByKey[key] = fi
	x.nFilters++
	return fi
}

func (x *Index) releaseFilter(fi int32) {
	f := &x.filters[fi]
	acc := f.cons[0]
	x.access[acc].remove(fi, f, x.filters, x.groupMin)
	st := &x.state[acc]
	st.accessOf--
	if st.accessOf == 0 && onDemand(x.cons[acc].c.Op) {
		x.cons[acc].attr.unlink(x.cons[acc].c, acc)
	}
	for _, c := range f.cons {
		if x.cons[c].refs--; x.cons[c].refs == 0 {
			x.releaseConstraint(c)
		}
	}
	delete(x.filterByKey, x.filterKeys[fi])
	x.filters[fi] = filterInfo{}
	x.filterKeys[fi] = ""
	x.freeFilters = append(x.freeFilters, fi)
	x.nFilters--
}

// internConstraint returns the id of the distinct constraint equivalent to
// c, installing it with no references if needed. c must be valid.
func (x *Index) internConstraint(c content.Constraint) int32 {
	k := keyOf(c)
	if id, ok := x.consByKey[k]; ok {
		return id
	}
	var id int32
	if n := len(x.freeCons); n > 0 {
		id = x.freeCons[n-1]
		x.freeCons = x.freeCons[:n-1]
	} else {
		id = int32(len(x.cons))
		x.cons = append(x.cons, consInfo{})
		x.access = append(x.access, accessList{})
		x.state = append(x.state, consState{})
	}
	a := x.names[c.Name]
	if a == nil {
		a = newAttrIndex()
		x.names[c.Name] = a
	}
	x.cons[id] = consInfo{c: c, attr: a, key: k, rank: rankOf(c)}
	x.state[id] = consState{}
	x.consByKey[k] = id
	a.add(c, id)
	return id
}

func (x *Index) releaseConstraint(id int32) {
	ci := &x.cons[id]
	a := ci.attr
	a.drop(ci.c, id)
	if a.size == 0 {
		delete(x.names, ci.c.Name)
	}
	delete(x.consByKey, ci.key)
	*ci = consInfo{}
	x.state[id] = consState{}
	x.freeCons = append(x.freeCons, id)
}

func keyOf(c content.Constraint) consKey {
	k := consKey{name: c.Name, op: c.Op, kind: c.Value.Kind()}
	switch k.kind {
	case content.KindString:
		k.str = c.Value.Str()
	case content.KindBool:
		k.b = c.Value.Bool()
	case content.KindInt, content.KindFloat:
		k.kind = content.KindInt
		k.num = toNum(c.Value)
	}
	return k
}

func rankOf(c content.Constraint) uint8 {
	v := c.Value
	nan := v.Kind() == content.KindFloat && math.IsNaN(v.Float())
	switch c.Op {
	case content.OpEq:
		switch {
		case nan:
			return rankNever
		case v.Kind() == content.KindBool:
			return rankWide
		}
		return rankEq
	case content.OpPrefix, content.OpSuffix:
		return rankAffix
	case content.OpContains:
		return rankContains
	case content.OpNe:
		return rankNe
	case content.OpExists:
		return rankExists
	}
	if nan {
		return rankNever
	}
	return rankWide
}
