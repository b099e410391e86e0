package match

import (
	"math"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dripmesh/drip/internal/content"
)

var (
	s     = content.String
	i     = content.Int
	fl    = content.Float
	b     = content.Bool
	nan   = math.NaN()
	inf   = math.Inf(1)
	negZ  = math.Copysign(0, -1)
	big53 = int64(1<<53 + 1) // the first int64 that float64 cannot hold
)

const longText = "Or can I just leave them covered for a few days till the nights get warmer?"

func con(name string, op content.Op, v content.Value) content.Constraint {
	return content.Constraint{Name: name, Op: op, Value: v}
}

// TestOperators checks each operator on one attribute against a value of
// each interesting kind, with content's semantics (content/doc.go): missing
// attributes and type mismatches satisfy nothing, "!=" included; numbers
// compare exactly across int and float; NaN satisfies only "!=".
func TestOperators(t *testing.T) {
	const (
		eq = content.OpEq
		ne = content.OpNe
		lt = content.OpLt
		le = content.OpLe
		gt = content.OpGt
		ge = content.OpGe
	)
	tests := []struct {
		name string
		c    content.Constraint
		v    content.Value // the message's value of "x"; invalid: no x at all
		want bool
	}{
		{"string = same", con("x", eq, s("ab")), s("ab"), true},
		{"string = other", con("x", eq, s("ab")), s("abc"), false},
		{"string = missing", con("x", eq, s("ab")), content.Value{}, false},
		{"string 3 = int 3 is a mismatch", con("x", eq, s("3")), i(3), false},
		{"int 3 = string 3 is a mismatch", con("x", eq, i(3)), s("3"), false},
		{"int = float, same number", con("x", eq, i(3)), fl(3), true},
		{"float = int, same number", con("x", eq, fl(3)), i(3), true},
		{"int = float, other number", con("x", eq, i(3)), fl(3.5), false},
		{"0 = -0.0", con("x", eq, i(0)), fl(negZ), true},
		{"2^53+1 = 2^53 float is exact", con("x", eq, i(big53)), fl(1 << 53), false},
		{"2^53 float = 2^53+1", con("x", eq, fl(1<<53)), i(big53), false},
		{"MaxInt64 = 2^63 float", con("x", eq, i(math.MaxInt64)), fl(0x1p63), false},
		{"-2^63 float = MinInt64", con("x", eq, fl(-0x1p63)), i(math.MinInt64), true},
		{"= on NaN value", con("x", eq, i(1)), fl(nan), false},
		{"bool = same", con("x", eq, b(true)), b(true), true},
		{"bool = other", con("x", eq, b(true)), b(false), false},
		{"bool = int is a mismatch", con("x", eq, b(true)), i(1), false},

		{"string != other", con("x", ne, s("a")), s("b"), true},
		{"string != same", con("x", ne, s("a")), s("a"), false},
		{"!= missing", con("x", ne, s("a")), content.Value{}, false},
		{"string != int is a mismatch", con("x", ne, s("a")), i(1), false},
		{"int != float, same number", con("x", ne, i(3)), fl(3), false},
		{"int != float, other number", con("x", ne, i(3)), fl(3.5), true},
		{"!= 2^53 float vs 2^53+1", con("x", ne, fl(1<<53)), i(big53), true},
		{"!= on NaN value", con("x", ne, i(1)), fl(nan), true},
		{"number != bool is a mismatch", con("x", ne, i(1)), b(true), false},
		{"bool != other", con("x", ne, b(true)), b(false), true},
		{"bool != same", con("x", ne, b(false)), b(false), false},

		{"int < larger", con("x", lt, i(5)), i(4), true},
		{"int < equal", con("x", lt, i(5)), i(5), false},
		{"int <= equal", con("x", le, i(5)), fl(5), true},
		{"int > equal", con("x", gt, i(5)), i(5), false},
		{"int >= equal", con("x", ge, i(5)), i(5), true},
		{"int < fraction", con("x", lt, fl(2.5)), i(2), true},
		{"int > fraction", con("x", gt, fl(2.5)), i(3), true},
		{"negative int > negative fraction", con("x", gt, fl(-2.5)), i(-2), true},
		{"negative int < negative fraction", con("x", lt, fl(-2.5)), i(-3), true},
		{"-0.0 < 0", con("x", lt, i(0)), fl(negZ), false},
		{"2^53+1 > 2^53 float", con("x", gt, fl(1<<53)), i(big53), true},
		{"MaxInt64 < 2^63 float", con("x", lt, fl(0x1p63)), i(math.MaxInt64), true},
		{"MinInt64 >= -2^63 float", con("x", ge, fl(-0x1p63)), i(math.MinInt64), true},
		{"+Inf value > MaxInt64", con("x", gt, i(math.MaxInt64)), fl(inf), true},
		{"-Inf value < MinInt64", con("x", lt, i(math.MinInt64)), fl(-inf), true},
		{"1e19 value > MaxInt64", con("x", gt, i(math.MaxInt64)), fl(1e19), true},
		{"< on NaN value", con("x", lt, i(1)), fl(nan), false},
		{">= on NaN value", con("x", ge, i(1)), fl(nan), false},
		{"< number on string is a mismatch", con("x", lt, i(1)), s("0"), false},
		{"string < is bytewise", con("x", lt, s("a")), s("B"), true},
		{"string < prefix of it", con("x", lt, s("ab")), s("a"), true},
		{"string <= equal", con("x", le, s("ab")), s("ab"), true},
		{"string > longer", con("x", gt, s("ab")), s("abc"), true},
		{"string >= smaller", con("x", ge, s("b")), s("abc"), false},
		{"string < on int is a mismatch", con("x", lt, s("5")), i(1), false},
		{"string < on bool is a mismatch", con("x", lt, s("z")), b(true), false},

		{"prefix yes", con("x", content.OpPrefix, s("ab")), s("abc"), true},
		{"prefix whole", con("x", content.OpPrefix, s("ab")), s("ab"), true},
		{"prefix longer than value", con("x", content.OpPrefix, s("abc")), s("ab"), false},
		{"prefix no", con("x", content.OpPrefix, s("b")), s("abc"), false},
		{"empty prefix on empty string", con("x", content.OpPrefix, s("")), s(""), true},
		{"prefix on int is a mismatch", con("x", content.OpPrefix, s("1")), i(12), false},
		{"suffix yes", con("x", content.OpSuffix, s("bc")), s("abc"), true},
		{"suffix no", con("x", content.OpSuffix, s("ab")), s("abc"), false},
		{"empty suffix", con("x", content.OpSuffix, s("")), s("abc"), true},
		{"contains middle", con("x", content.OpContains, s("b")), s("abc"), true},
		{"contains no", con("x", content.OpContains, s("ca")), s("abc"), false},
		{"contains empty", con("x", content.OpContains, s("")), s(""), true},
		{"contains in a long text (scan)", con("x", content.OpContains, s("warmer")), s(longText), true},
		{"contains not in a long text (scan)", con("x", content.OpContains, s("colder")), s(longText), false},
		{"contains on bool is a mismatch", con("x", content.OpContains, s("t")), b(true), false},

		{"exists string", con("x", content.OpExists, content.Value{}), s(""), true},
		{"exists NaN", con("x", content.OpExists, content.Value{}), fl(nan), true},
		{"exists bool", con("x", content.OpExists, content.Value{}), b(false), true},
		{"exists missing", con("x", content.OpExists, content.Value{}), content.Value{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			attrs := map[string]content.Value{"other": i(0)}
			if tt.v.IsValid() {
				attrs["x"] = tt.v
			}
			m := content.MessageFrom(attrs)
			p := content.Predicate{{tt.c}}
			require.Equal(t, tt.want, p.Matches(m), "the table disagrees with content")
			x := New()
			// Alone, the constraint is its filter's access constraint and
			// is found in phase 1; behind a selective one, a broad
			// constraint is checked on demand.
			require.NoError(t, x.Add(7, p))
			require.NoError(t, x.Add(8, content.Predicate{{con("other", eq, i(0)), tt.c}}))
			got := slices.Sorted(slices.Values(x.Match(m, nil)))
			if tt.want {
				assert.Equal(t, []SubscriberID{7, 8}, got)
			} else {
				assert.Empty(t, got)
			}
		})
	}
}

// TestNonFiniteOperands covers constraint operands that Validate refuses
// but content.Constraint.Matches defines, through the unvalidated replace.
func TestNonFiniteOperands(t *testing.T) {
	tests := []struct {
		c    content.Constraint
		v    content.Value
		want bool
	}{
		{con("x", content.OpEq, fl(nan)), fl(nan), false},
		{con("x", content.OpNe, fl(nan)), fl(nan), true},
		{con("x", content.OpNe, fl(nan)), i(1), true},
		{con("x", content.OpNe, fl(nan)), s("a"), false},
		{con("x", content.OpLe, fl(nan)), i(1), false},
		{con("x", content.OpGt, fl(nan)), fl(inf), false},
		{con("x", content.OpLt, fl(inf)), i(math.MaxInt64), true},
		{con("x", content.OpEq, fl(inf)), fl(inf), true},
		{con("x", content.OpGe, fl(-inf)), fl(-inf), true},
	}
	for _, tt := range tests {
		t.Run(tt.c.String()+" on "+tt.v.Literal(), func(t *testing.T) {
			m := content.MessageFrom(map[string]content.Value{"x": tt.v})
			p := content.Predicate{{tt.c}}
			require.Equal(t, tt.want, p.Matches(m), "the table disagrees with content")
			x := New()
			x.replace(1, p)
			assert.Equal(t, tt.want, len(x.Match(m, nil)) == 1)
		})
	}
}

func TestAddRejects(t *testing.T) {
	x := New()
	p := content.MustParse(`a = 1`)
	require.NoError(t, x.Add(1, p))

	err := x.Add(1, content.MustParse(`b = 2`))
	require.ErrorContains(t, err, "subscriber 1 is already present")

	bad := content.Predicate{{con("a", content.OpPrefix, i(1))}}
	err = x.Add(2, bad)
	require.ErrorContains(t, err, "subscriber 2")
	require.ErrorContains(t, err, "does not apply")
	require.ErrorContains(t, x.Add(3, content.Predicate{}), "no filters")

	err = x.Replace(1, bad)
	require.ErrorContains(t, err, "subscriber 1")
	assert.Equal(t, 1, x.Len())
	assert.Equal(t, 1, x.Filters())
	assert.Equal(t, 1, x.Constraints())
	m := content.MessageFrom(map[string]content.Value{"a": i(1), "b": i(2)})
	assert.Equal(t, []SubscriberID{1}, x.Match(m, nil), "a failed Replace keeps the old predicate")
}

func TestSharing(t *testing.T) {
	m := content.MessageFrom(map[string]content.Value{"x": i(1), "y": s("ab")})
	match := func(x *Index) []SubscriberID { return slices.Sorted(slices.Values(x.Match(m, nil))) }

	t.Run("duplicate constraints in one filter are required once", func(t *testing.T) {
		x := New()
		require.NoError(t, x.Add(1, content.MustParse(`x = 1 && x = 1`)))
		require.NoError(t, x.Add(2, content.MustParse(`x = 1 && x = 1.0 && y prefix "a" && y prefix "a"`)))
		assert.Equal(t, 2, x.Constraints())
		assert.Equal(t, 2, x.Filters())
		assert.Equal(t, []SubscriberID{1, 2}, match(x))
	})
	t.Run("one filter, two subscribers", func(t *testing.T) {
		x := New()
		require.NoError(t, x.Add(1, content.MustParse(`x = 1 && y = "ab"`)))
		require.NoError(t, x.Add(2, content.MustParse(`y = "ab" && x = 1.0`)))
		assert.Equal(t, 1, x.Filters())
		assert.Equal(t, []SubscriberID{1, 2}, match(x))
		require.True(t, x.Remove(1))
		assert.Equal(t, 1, x.Filters())
		assert.Equal(t, []SubscriberID{2}, match(x))
		require.False(t, x.Remove(1))
	})
	t.Run("a subscriber is reported once however many filters match", func(t *testing.T) {
		x := New()
		require.NoError(t, x.Add(1, content.MustParse(`x = 1 || y = "ab" || x = 1 || x exists`)))
		assert.Equal(t, 3, x.Filters())
		assert.Equal(t, []SubscriberID{1}, match(x))
	})
	t.Run("Replace swaps predicates and keeps shared filters", func(t *testing.T) {
		x := New()
		require.NoError(t, x.Add(1, content.MustParse(`x = 2 || y = "ab"`)))
		require.NoError(t, x.Replace(1, content.MustParse(`y = "ab" || x > 5`)))
		assert.Equal(t, 2, x.Filters())
		assert.Equal(t, []SubscriberID{1}, match(x))
		require.NoError(t, x.Replace(1, content.MustParse(`x = 2`)))
		assert.Empty(t, match(x))
		assert.Equal(t, 1, x.Constraints())
		require.NoError(t, x.Replace(2, content.MustParse(`x exists`)), "Replace adds a new subscriber")
		assert.Equal(t, []SubscriberID{2}, match(x))
	})
	t.Run("Remove frees everything", func(t *testing.T) {
		x := New()
		require.NoError(t, x.Add(1, content.MustParse(`x = 1 && y contains "b" || x != 3 || y < "z"`)))
		require.NoError(t, x.Add(2, content.MustParse(`x = 1 && y suffix "b" || x >= 0`)))
		require.True(t, x.Remove(1))
		require.True(t, x.Remove(2))
		assert.Zero(t, x.Len())
		assert.Zero(t, x.Filters())
		assert.Zero(t, x.Constraints())
		assert.Empty(t, x.names)
		assert.Empty(t, match(x))
	})
}

// TestAccessConstraint checks that a filter is reached only through its
// most selective constraint and still requires all the others.
func TestAccessConstraint(t *testing.T) {
	x := New()
	require.NoError(t, x.Add(1, content.MustParse(`x exists && y > 0 && z = "k" && w != 1`)))
	require.Equal(t, 1, x.Filters())
	acc := x.cons[x.filters[0].cons[0]].c
	assert.Equal(t, `z = "k"`, acc.String())

	full := map[string]content.Value{"x": b(true), "y": i(1), "z": s("k"), "w": i(2)}
	assert.Len(t, x.Match(content.MessageFrom(full), nil), 1)
	for name := range full {
		partial := map[string]content.Value{}
		for n, v := range full {
			if n != name {
				partial[n] = v
			}
		}
		assert.Empty(t, x.Match(content.MessageFrom(partial), nil), "without %s", name)
	}
}

// TestGenerationWrap checks the once-in-2^32 reset of the stamps.
func TestGenerationWrap(t *testing.T) {
	x := New()
	require.NoError(t, x.Add(1, content.MustParse(`x = 1 && y = 2`)))
	require.NoError(t, x.Add(2, content.MustParse(`y = 2`)))
	yes := content.MessageFrom(map[string]content.Value{"x": i(1), "y": i(2)})
	no := content.MessageFrom(map[string]content.Value{"x": i(0), "y": i(2)})
	x.gen = math.MaxUint32 - 2
	for range 3 {
		assert.ElementsMatch(t, []SubscriberID{1, 2}, x.Match(yes, nil))
		// A stale stamp of x = 1 from the previous message must not count.
		assert.Equal(t, []SubscriberID{2}, x.Match(no, nil))
	}
	assert.Less(t, x.gen, uint32(10), "the generation wrapped")
}

func TestMatchAppendsToDst(t *testing.T) {
	x := New()
	m := content.MessageFrom(map[string]content.Value{"x": i(1)})
	assert.Equal(t, []SubscriberID{9}, x.Match(m, []SubscriberID{9}), "empty index")
	require.NoError(t, x.Add(1, content.MustParse(`x = 1`)))
	assert.Equal(t, []SubscriberID{9, 1}, x.Match(m, []SubscriberID{9}))
	assert.Empty(t, x.Match(content.Message{}, nil))
}

// TestMatchDoesNotAllocate is the steady-state promise of Match.
func TestMatchDoesNotAllocate(t *testing.T) {
	x := New()
	require.NoError(t, x.Add(1, content.MustParse(`a = "ab" && n > 2 || a prefix "a" && n != 4 || a contains "b"`)))
	require.NoError(t, x.Add(2, content.MustParse(`n <= 3.5 && a suffix "b" || f = true || n exists`)))
	m := content.MessageFrom(map[string]content.Value{"a": s("ab"), "n": i(3), "f": b(true)})
	dst := make([]SubscriberID, 0, 4)
	x.Match(m, dst) // grow scratch space
	allocs := testing.AllocsPerRun(100, func() { dst = x.Match(m, dst[:0]) })
	assert.Zero(t, allocs)
	assert.ElementsMatch(t, []SubscriberID{1, 2}, dst)
}

// TestNumAgreesWithCanonicalNumber holds num, the map key for numeric
// equality, to content.CanonicalNumber, the textual key the Bloom encoding
// uses: same key exactly when same text.
func TestNumAgreesWithCanonicalNumber(t *testing.T) {
	vals := append(slices.Clone(genNumbers), fl(0.1), fl(-1e300), fl(1e300), i(-7), fl(-7))
	for _, v := range vals {
		for _, w := range vals {
			if math.IsNaN(v.Float()) || math.IsNaN(w.Float()) {
				continue // "=" to nothing, while CanonicalNumber gives NaN a text
			}
			sameText := content.CanonicalNumber(v) == content.CanonicalNumber(w)
			assert.Equal(t, sameText, toNum(v) == toNum(w), "%#v vs %#v", v, w)
		}
	}
}

// TestBoundGroups: filters sharing an access constraint and ordering one
// number are visited through a sorted group; every operator, at, around
// and between bounds, across ints and floats (3 and 3.0 are one bound;
// 2^53+1 and 2^53 as a float are not), and with values that satisfy no
// ordering (missing, a string, NaN), must agree with one-by-one evaluation.
func TestBoundGroups(t *testing.T) {
	bounds := []content.Value{i(-5), i(0), fl(2.5), i(3), fl(3), i(3), i(big53), fl(1 << 53), i(math.MaxInt64), fl(inf)}
	values := []content.Value{content.Value{}, s("3"), fl(nan), fl(-inf), i(-6), i(-5), fl(negZ), i(0), fl(2.5), i(2), i(3), fl(3),
		fl(3.5), fl(1 << 53), i(big53), i(big53 + 1), i(math.MaxInt64), fl(inf)}
	for _, op := range []content.Op{content.OpLt, content.OpLe, content.OpGt, content.OpGe} {
		t.Run(op.String(), func(t *testing.T) {
			x := New()
			x.groupMin = 2
			ref := reference{}
			for j, bound := range bounds {
				p := content.Predicate{{con("k", content.OpEq, s("K")), con("x", op, bound)}}
				x.replace(SubscriberID(j), p) // +Inf is refused by Validate, handled by the index
				ref[SubscriberID(j)] = p
			}
			al := x.access[x.consByKey[keyOf(con("k", content.OpEq, s("K")))]]
			require.Len(t, al.bounds, 1, "the filters are grouped by their bound")
			require.Empty(t, al.plain)
			for _, v := range values {
				attrs := map[string]content.Value{"k": s("K")}
				if v.Kind() != content.KindInvalid {
					attrs["x"] = v
				}
				m := content.MessageFrom(attrs)
				got := slices.Sorted(slices.Values(x.Match(m, nil)))
				assert.Equal(t, ref.match(m), got, "x %s bound, x = %v", op, v)
			}
			for j := range bounds {
				require.True(t, x.Remove(SubscriberID(j)))
				delete(ref, SubscriberID(j))
				checkInvariants(t, x, ref, "Remove")
			}
		})
	}
}

// TestBoundGroupsFormAndDissolve: a group forms once groupMin plain
// filters share a bound's attribute and operator, takes later ones
// directly, and dissolves into the plain list below a quarter of groupMin.
func TestBoundGroupsFormAndDissolve(t *testing.T) {
	x := New()
	x.groupMin = 8
	ref := reference{}
	acc := func() accessList { return x.access[x.consByKey[keyOf(con("k", content.OpEq, s("K")))]] }
	add := func(j int) {
		p := content.Predicate{{con("k", content.OpEq, s("K")), con("n", content.OpLt, i(int64(j)))}}
		require.NoError(t, x.Add(SubscriberID(j), p))
		ref[SubscriberID(j)] = p
		checkInvariants(t, x, ref, "Add")
	}
	remove := func(j int) {
		require.True(t, x.Remove(SubscriberID(j)))
		delete(ref, SubscriberID(j))
		checkInvariants(t, x, ref, "Remove")
	}
	// An unbounded filter stays plain throughout.
	require.NoError(t, x.Add(100, content.MustParse(`k = "K"`)))
	ref[100] = content.MustParse(`k = "K"`)
	for j := range 7 {
		add(j)
	}
	assert.Empty(t, acc().bounds, "seven filters are checked one by one")
	add(7)
	require.Len(t, acc().bounds, 1, "the eighth forms a group")
	assert.Len(t, acc().plain, 1)
	add(8)
	assert.Len(t, acc().bounds[0].filters, 9, "later filters join the group")
	for j := 8; j >= 2; j-- {
		remove(j)
	}
	require.Len(t, acc().bounds, 1, "two filters are a quarter of eight")
	remove(1)
	assert.Empty(t, acc().bounds, "one filter dissolves the group")
	assert.Len(t, acc().plain, 2)
	m := content.MessageFrom(map[string]content.Value{"k": s("K"), "n": i(-1)})
	assert.ElementsMatch(t, []SubscriberID{0, 100}, x.Match(m, nil))
}
