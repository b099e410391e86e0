package match

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dripmesh/drip/internal/content"
)

// reference is the simple model the index must agree with: every predicate
// evaluated one by one with content's own Matches.
type reference map[SubscriberID]content.Predicate

func (r reference) match(m content.Message) []SubscriberID {
	var out []SubscriberID
	for id, p := range r {
		if p.Matches(m) {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// distinctFilters counts the filters of r up to the equivalence the index
// uses: a filter is its set of normalised constraints.
func (r reference) distinctFilters() int {
	seen := map[string]bool{}
	for _, p := range r {
		for _, f := range p {
			keys := make([]string, len(f))
			for i, c := range f {
				k := keyOf(c)
				keys[i] = strings.Join([]string{k.name, k.op.String(), k.kind.String(), k.str,
					strconv.FormatBool(k.b), strconv.Itoa(int(k.num.kind)),
					strconv.FormatInt(k.num.i, 10), strconv.FormatFloat(k.num.f, 'g', -1, 64)}, "\x00")
			}
			slices.Sort(keys)
			seen[strings.Join(slices.Compact(keys), "&")] = true
		}
	}
	return len(seen)
}

// exercise drives an index and the reference through the same random
// interleaving of Add, Replace and Remove (valid and invalid), comparing
// Match after every step, then removes everything and checks that nothing
// is left behind. It stops after steps operations or when more returns false.
// With nonFinite, predicates may hold NaN and infinite operands, which
// Validate refuses, so they are installed through the unvalidated replace.
func exercise(t testing.TB, c chooser, steps int, more func() bool, nonFinite bool) {
	x := New()
	// Small thresholds, so that bound groups form and dissolve.
	x.groupMin = int32(1 + c.intn(4))
	ref := reference{}
	var dst []SubscriberID
	for step := 0; step < steps && more(); step++ {
		id := SubscriberID(c.intn(10))
		_, present := ref[id]
		var what string
		switch op := c.intn(10); {
		case op < 4:
			p := genPredicate(c, nonFinite)
			what = fmt.Sprintf("Add(%d, %s)", id, p)
			switch {
			case nonFinite && !present:
				x.replace(id, p)
				ref[id] = p
			case nonFinite:
			case present:
				require.Error(t, x.Add(id, p), what)
			default:
				require.NoError(t, x.Add(id, p), what)
				ref[id] = p
			}
		case op < 7:
			p := genPredicate(c, nonFinite)
			what = fmt.Sprintf("Replace(%d, %s)", id, p)
			if nonFinite {
				x.replace(id, p)
			} else {
				require.NoError(t, x.Replace(id, p), what)
			}
			ref[id] = p
		case op < 9:
			what = fmt.Sprintf("Remove(%d)", id)
			require.Equal(t, present, x.Remove(id), what)
			delete(ref, id)
		default:
			p := genInvalidPredicate(c)
			what = fmt.Sprintf("invalid Add/Replace(%d, %#v)", id, p)
			require.Error(t, x.Add(id, p), what)
			require.Error(t, x.Replace(id, p), what)
		}
		checkInvariants(t, x, ref, what)
		for range 4 {
			m := genMessage(c)
			dst = x.Match(m, dst[:0])
			got := slices.Sorted(slices.Values(dst))
			hits := slices.Sorted(slices.Values(x.hits))
			require.Len(t, slices.Compact(hits), len(x.hits), "a constraint was hit twice for one message")
			require.Equal(t, ref.match(m), got, "after %s: message %s against %v", what, m, ref)
		}
	}
	for id := range ref {
		require.True(t, x.Remove(id))
		delete(ref, id)
		checkInvariants(t, x, ref, "final Remove")
	}
	require.Zero(t, x.Len())
	require.Zero(t, x.Filters())
	require.Zero(t, x.Constraints())
	require.Empty(t, x.names, "Remove must free every per-name structure")
}

// checkInvariants verifies the index's cross-references against each other
// and its counts against the reference.
func checkInvariants(t testing.TB, x *Index, ref reference, after string) {
	require.Equal(t, len(ref), x.Len(), "after %s", after)
	require.Equal(t, ref.distinctFilters(), x.Filters(), "after %s: distinct filters", after)
	require.Equal(t, len(x.filterByKey), x.Filters(), "after %s", after)

	refs := map[int32]int32{}
	for key, fi := range x.filterByKey {
		f := x.filters[fi]
		require.Equal(t, key, x.filterKeys[fi])
		require.NotEmpty(t, f.owners, "after %s: filter %d has no owner but is installed", after, fi)
		al := x.access[f.cons[0]]
		if g := f.group; g != nil {
			require.Contains(t, al.bounds, g, "after %s: the filter's group is its access constraint's", after)
			i := slices.Index(g.filters, fi)
			require.GreaterOrEqual(t, i, 0, "after %s: filter %d is in its group", after, fi)
			require.Equal(t, f.bound, g.keys[i], "after %s: the filter's bound", after)
			k, ok := boundOf(f.rest)
			require.True(t, ok)
			require.Equal(t, g.attr, k.attr)
			require.Equal(t, g.op, k.op)
		} else {
			require.Equal(t, fi, al.plain[f.accessPos], "after %s: access position", after)
		}
		counts := map[boundKey]int32{}
		for _, pfi := range al.plain {
			if k, ok := boundOf(x.filters[pfi].rest); ok {
				counts[boundKey{k.attr, k.op}]++
			}
		}
		require.Equal(t, counts, nilIfEmpty(al.counts), "after %s: plain filters by bound", after)
		for key, n := range counts {
			require.Less(t, n, x.groupMin, "after %s: enough plain filters share a bound to form a group", after)
			for _, g := range al.bounds {
				require.False(t, g.attr == key.attr && g.op == key.op, "after %s: a plain filter belongs in a group", after)
			}
		}
		n := len(al.plain)
		for _, g := range al.bounds {
			require.GreaterOrEqual(t, int32(len(g.filters))*4, x.groupMin, "after %s: a group too small to keep", after)
			require.NotEmpty(t, g.filters, "after %s: empty groups are dropped", after)
			require.Len(t, g.keys, len(g.filters))
			require.True(t, slices.IsSortedFunc(g.keys, cmpNum), "after %s: bounds sorted", after)
			n += len(g.filters)
		}
		require.Equal(t, n, int(x.state[f.cons[0]].accessOf), "after %s: access count", after)
		for i, c := range f.cons {
			refs[c]++
			if i > 0 {
				require.LessOrEqual(t, x.cons[f.cons[0]].rank, x.cons[c].rank, "access constraint is the most selective")
			}
		}
		for p, o := range f.owners {
			s := x.slots[o.slot]
			require.Equal(t, fi, s.filters[o.idx], "after %s: owner index", after)
			require.Equal(t, int32(p), s.pos[o.idx], "after %s: owner position", after)
		}
	}
	require.Len(t, refs, x.Constraints(), "after %s: a constraint no filter uses is installed", after)
	size := 0
	for name, a := range x.names {
		size += a.size
		checkTrie(t, a.strPrefix, "prefix of "+name)
		checkTrie(t, a.strSuffix, "suffix of "+name)
		if a.strContains != nil {
			checkTrie(t, a.strContains.trie, "contains of "+name)
			require.Len(t, a.strContains.all, a.strContains.trie.keys)
		}
	}
	require.Equal(t, x.Constraints(), size, "after %s: per-name structures", after)
	for key, id := range x.consByKey {
		require.Equal(t, key, x.cons[id].key)
		require.Equal(t, refs[id], x.cons[id].refs, "after %s: refcount of %s", after, x.cons[id].c)
	}
	for id, slot := range x.subs {
		require.Equal(t, id, x.subState[slot].id)
		require.Len(t, x.slots[slot].filters, len(x.slots[slot].pos))
	}
}

// TestMatchAgreesWithOneByOne is the main property: on random interleavings
// of Add, Replace and Remove over small vocabularies full of edge cases
// (NaN, -0, ±Inf, ints beyond 2^53 and near ±2^63, "3" vs 3, empty strings,
// duplicate constraints and filters), Match returns exactly the subscribers
// whose predicate content.Predicate.Matches accepts, each once.
func TestMatchAgreesWithOneByOne(t *testing.T) {
	for seed := range uint64(40) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			c := randChooser{rand.New(rand.NewPCG(seed, 0x6d61746368))}
			exercise(t, c, 150, func() bool { return true }, false)
		})
	}
}

// TestMatchAgreesWithOneByOneNonFinite is the same property with NaN and
// infinite operands in constraints, which Validate refuses today but the
// index treats as content.Constraint.Matches does: NaN operands make "=" and
// the orderings unsatisfiable and "!=" satisfied by every number.
func TestMatchAgreesWithOneByOneNonFinite(t *testing.T) {
	for seed := range uint64(20) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			c := randChooser{rand.New(rand.NewPCG(seed, 0x6e616e))}
			exercise(t, c, 150, func() bool { return true }, true)
		})
	}
}

// FuzzMatch reads the same kind of operation stream from fuzzer bytes, so
// coverage guidance can steer towards the corners of the semantics.
func FuzzMatch(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9})
	f.Add([]byte("\x00\x03\x02\x05\x01\x00\x09\x07\x03\x02\x01\x00\x05\x05\x05\x05"))
	r := rand.New(rand.NewPCG(1, 2))
	for range 4 {
		b := make([]byte, 64)
		for i := range b {
			b[i] = byte(r.IntN(256))
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 1024 {
			return // longer inputs add little but slow down minimisation
		}
		c := &byteChooser{b: data}
		exercise(t, c, 200, func() bool { return !c.empty() }, c.intn(2) == 1)
	})
}

// checkTrie verifies that a trie holds its operands and nothing else: every
// node is reachable once, every leaf but the root ends an operand, and the
// unreachable nodes are exactly the free ones.
func checkTrie(t testing.TB, tr *byteTrie, what string) {
	if tr == nil {
		return
	}
	require.NotZero(t, tr.keys, "%s: an empty trie is kept", what)
	reached, keys := 0, 0
	var walk func(n int32)
	walk = func(n int32) {
		reached++
		nd := tr.nodes[n]
		if nd.c != none {
			keys++
		}
		var kids []int32
		for _, e := range nd.edges {
			kids = append(kids, e.kid)
		}
		if n == 0 {
			require.Empty(t, nd.edges, "%s: the root's children are in the table", what)
			for _, k := range tr.root {
				if k != 0 {
					kids = append(kids, k)
				}
			}
		}
		require.True(t, n == 0 || nd.c != none || len(kids) > 0, "%s: node %d leads nowhere", what, n)
		for _, k := range kids {
			walk(k)
		}
	}
	walk(0)
	require.Equal(t, tr.keys, keys, "%s: operands", what)
	require.Equal(t, len(tr.nodes), reached+len(tr.free), "%s: nodes", what)
}

func nilIfEmpty(m map[boundKey]int32) map[boundKey]int32 {
	if len(m) == 0 {
		return map[boundKey]int32{}
	}
	return m
}
