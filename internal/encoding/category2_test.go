package encoding

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/dripmesh/drip/internal/content"
	"github.com/dripmesh/drip/internal/workload"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMessageCategoriesV2(t *testing.T) {
	m := content.MessageFrom(map[string]content.Value{
		"s": content.String("abab"), "x": content.Int(5), "g": content.Float(math.NaN()), "b": content.Bool(true),
		"e": content.String(""),
	})
	assert.Equal(t, []string{
		"∃?b", "?b=true",
		"∃$e", "$e=",
		"∃#g", "#g=NaN", // NaN: no order, so no nodes
		"∃$s", "$s=abab",
		"ps=a", "ss=b", "us=a", "bs=ab", "us=b", "bs=ba",
		"∃#x", "#x=5",
		// 5 = 1.25·2^2: sign 1, exponent 2+64 = 1000010, mantissa 010000.
		"rx=1/1", "rx=2/3", "rx=3/6", "rx=4/c", "rx=5/18", "rx=6/30", "rx=7/61", "rx=8/c2",
		"rx=9/184", "rx=10/309", "rx=11/612", "rx=12/c24", "rx=13/1848", "rx=14/3090",
	}, SchemeCatV2.Categories(m))

	long := strings.Repeat("a", 10) + "XY" + strings.Repeat("b", 20) + "ZZ"
	got := SchemeCatV2.Categories(content.MessageFrom(map[string]content.Value{"s": content.String(long)}))
	assert.Contains(t, got, "ls=", "longer than gramLimit")
	assert.Contains(t, got, "bs=XY", "in the first gramWindow bytes")
	assert.Contains(t, got, "bs=ZZ", "in the last gramWindow bytes")
	assert.NotContains(t, got, "bs=Yb", "beyond the first window")
	assert.Contains(t, got, "ss=Z")
}

func TestFilterCategoriesV2(t *testing.T) {
	for _, tc := range []struct {
		text string
		want [][]string
	}{
		{`x = 3`, [][]string{{"#x=3", "∃#x"}}}, // a lone equality carries its existence
		{`x = 3 && y = "a"`, [][]string{{"#x=3", "$y=a"}}},
		{`x exists`, [][]string{nil}},
		{`x != 3`, [][]string{{"∃#x"}}},
		{`b != true`, [][]string{{"∃?b", "?b=false"}}},
		{`s < "m"`, [][]string{{"∃$s"}}},
		{`s prefix ""`, [][]string{{"∃$s"}}},
		{`s prefix "abc"`, [][]string{{"∃$s", "ps=a", "bs=ab", "bs=bc"}}},
		{`s suffix "xyz"`, [][]string{{"∃$s", "ss=z", "bs=xy", "bs=yz"}}},
		{`s contains "e"`, [][]string{{"∃$s", "us=e"}, {"∃$s", "ls="}}},
		{`s contains "abc"`, [][]string{{"∃$s", "bs=ab", "bs=bc"}, {"∃$s", "ls="}}},
		{`s contains "` + strings.Repeat("z", 25) + `"`, [][]string{{"∃$s", "ls="}}},
		// Only pairs of the first 12 bytes of a prefix, at most 8 of them.
		{`s prefix "abcdefghijklmn"`, [][]string{{"∃$s", "ps=a", "bs=ab", "bs=bc", "bs=cd", "bs=ef", "bs=fg", "bs=hi", "bs=ij", "bs=kl"}}},
		// x <= 0: the negatives (level 1, no ancestors) or the bucket of 0.
		{`x <= 0`, [][]string{{"∃#x", "rx=1/0"}, {"∃#x", "rx=14/2000", "rx=13/1000", "rx=12/800"}}},
		// x < 0: the negatives, since 0 starts its bucket.
		{`x < 0`, [][]string{{"∃#x", "rx=1/0"}}},
		// x > -1: -1 ends its bucket, which is left out: (-1, 0) and [0, ∞).
		{`x > -1`, [][]string{{"∃#x", "rx=2/1", "rx=1/0"}, {"∃#x", "rx=1/1"}}},
		// x >= -1 keeps it.
		{`x >= -1`, [][]string{{"∃#x", "rx=14/fff", "rx=13/7ff", "rx=12/3ff"}, {"∃#x", "rx=2/1", "rx=1/0"}, {"∃#x", "rx=1/1"}}},
		// x >= 1: the node "11", one Bloom.
		{`x >= 1`, [][]string{{"∃#x", "rx=2/3", "rx=1/1"}}},
		// Ranges on one attribute are intersected: 1 <= x < 1.5 is one node
		// (with two ancestors: the filter is on one attribute).
		{`x >= 1 && x < 1.5`, [][]string{{"∃#x", "∃#x", "rx=9/180", "rx=8/c0", "rx=7/60"}}},
		// On two attributes, ranges get at most rangeNodes nodes each and no
		// ancestors: y = 2 is selective already.
		{`x >= 1 && x < 1.5 && y = 2`, [][]string{{"∃#x", "∃#x", "#y=2", "rx=9/180"}}},
		{`x > 100 && y = 2`, [][]string{{"∃#x", "#y=2", "rx=2/3"}}}, // x >= 1
		{`x > 5 && x < 3`, [][]string{{"∃#x", "∃#x"}}},              // unsatisfiable: no nodes
		{`x < 1e300`, [][]string{{"∃#x"}}},                          // every key: nothing beyond existence
	} {
		p := content.MustParse(tc.text)
		assert.Equal(t, tc.want, SchemeCatV2.FilterCategories(p[0]), tc.text)
	}
}

// A filter never expands to more than maxDisjuncts Blooms, however many
// ranges and substrings it has.
func TestFilterExpansionIsBounded(t *testing.T) {
	p := content.MustParse(`a > 3 && b < 1000 && c > 77 && d < -5 && e > 9 && s contains "xy" && t contains "q" && u contains "ab" && v contains "cd" && w contains "ef"`)
	got := SchemeCatV2.FilterCategories(p[0])
	assert.LessOrEqual(t, len(got), maxDisjuncts)
	assert.Greater(t, len(got), 1)
	lone := SchemeCatV2.FilterCategories(content.MustParse(`x > 5.123 && x < 999.5`)[0])
	assert.LessOrEqual(t, len(lone), loneRangeNodes)
}

// A client's filter within every parser limit (64 constraints) can hold 64
// two-way groups: 2^64 Blooms, which wrapped the product to 0 and expanded
// without end. The product saturates instead, and the filter is weakened
// to fit like any other.
func TestFilterExpansionSaturates(t *testing.T) {
	two := [][]string{{"a"}, {"b"}}
	groups := make([][][]string, 64)
	for i := range groups {
		groups[i] = two
	}
	require.Equal(t, maxDisjuncts+1, expansion(groups), "2^64 saturates instead of wrapping to 0")
	assert.Equal(t, 16, expansion(groups[:4]))
	terms := func(n int, term func(i int) string) string {
		parts := make([]string, n)
		for i := range parts {
			parts[i] = term(i)
		}
		return strings.Join(parts, " && ")
	}
	ranges := func(i int) string { return fmt.Sprintf("f%d < 1", i) }
	substrings := func(i int) string { return fmt.Sprintf(`s%d contains "ab"`, i) }
	for _, tc := range []struct {
		name string
		text string
	}{
		{"64 ranges", terms(64, ranges)},
		{"63 ranges", terms(63, ranges)},
		{"64 substrings", terms(64, substrings)},
		{"32 ranges and 32 substrings", terms(32, ranges) + " && " + terms(32, substrings)},
		{"65 ranges", terms(65, ranges)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := content.ParseWithLimits(tc.text, content.Limits{MaxFilters: 1, MaxConstraints: 65, MaxString: 64, MaxName: 8, MaxText: 1 << 12})
			require.NoError(t, err)
			require.LessOrEqual(t, expansion(v2FilterPlan(p[0]).groups), maxDisjuncts, "bounded before it expands")
			assert.LessOrEqual(t, len(SchemeCatV2.FilterCategories(p[0])), maxDisjuncts)
		})
	}
}

// rich draws messages and predicates aimed at the fine categories: strings
// short and long (beyond gramLimit), empty, unicode and bytes that matter
// to the syntax; constraint operands cut from those strings so that
// prefix, suffix and contains match often; numbers of both kinds at the
// edges and near each other; ranges on one attribute combined.
type rich struct{ r *rand.Rand }

var richNames = []string{"a", "b", "c", "a=b", `\`, "rx", "ps"}

func (g rich) str() string {
	switch g.r.IntN(8) {
	case 0:
		return ""
	case 1:
		return strings.Repeat("ab", 5+g.r.IntN(40)) + "Z" // long
	case 2:
		return "héllo wörld ✓ " + strings.Repeat("x", g.r.IntN(30))
	case 3:
		return "=\\∃$#?"
	default:
		const alphabet = "abcdeXY"
		b := make([]byte, 1+g.r.IntN(gramLimit+6))
		for i := range b {
			b[i] = alphabet[g.r.IntN(len(alphabet))]
		}
		return string(b)
	}
}

func (g rich) value() content.Value {
	switch g.r.IntN(7) {
	case 0, 1, 2:
		return content.String(g.str())
	case 3, 4, 5:
		return randomNumber(g.r)
	default:
		return content.Bool(g.r.IntN(2) == 0)
	}
}

func (g rich) message() content.Message {
	attrs := map[string]content.Value{}
	for range 1 + g.r.IntN(len(richNames)) {
		attrs[richNames[g.r.IntN(len(richNames))]] = g.value()
	}
	return content.MessageFrom(attrs)
}

// operand cuts a constraint operand for op from a string.
func (g rich) operand(op content.Op) content.Value {
	s := g.str()
	if s == "" || g.r.IntN(5) == 0 {
		return content.String(s)
	}
	i, j := g.r.IntN(len(s)), g.r.IntN(len(s)+1)
	if i > j {
		i, j = j, i
	}
	switch op {
	case content.OpPrefix:
		return content.String(s[:j])
	case content.OpSuffix:
		return content.String(s[i:])
	default:
		return content.String(s[i:j])
	}
}

var richOps = []content.Op{
	content.OpEq, content.OpNe, content.OpLt, content.OpLe, content.OpGt, content.OpGe,
	content.OpPrefix, content.OpSuffix, content.OpContains, content.OpExists,
}

func (g rich) filter() content.Filter {
	f := make(content.Filter, 1+g.r.IntN(4))
	for i := range f {
		c := content.Constraint{Name: richNames[g.r.IntN(len(richNames))], Op: richOps[g.r.IntN(len(richOps))]}
		switch c.Op {
		case content.OpExists:
		case content.OpPrefix, content.OpSuffix, content.OpContains:
			c.Value = g.operand(c.Op)
		default:
			c.Value = g.value()
		}
		f[i] = c
	}
	return f
}

func (g rich) predicate() content.Predicate {
	p := make(content.Predicate, 1+g.r.IntN(3))
	for i := range p {
		p[i] = g.filter()
	}
	return p
}

// Carzaniga09 §3, eq. 1, for cat-v2 on category sets: whenever a predicate
// matches a message exactly, some category set of it is a subset of the
// message's categories. This is the exact (collision-free) check; the
// Bloom-level check is TestNoFalseNegatives.
func TestNoFalseNegativesOnCategories(t *testing.T) {
	check := func(t *testing.T, msgs []content.Message, preds []content.Predicate, minMatches int) {
		sets := make([][][]string, len(preds))
		for i, p := range preds {
			for _, f := range p {
				sets[i] = append(sets[i], SchemeCatV2.FilterCategories(f)...)
			}
		}
		matches := 0
		for _, m := range msgs {
			have := map[string]bool{}
			for _, c := range SchemeCatV2.Categories(m) {
				have[c] = true
			}
			for i, p := range preds {
				if !p.Matches(m) {
					continue
				}
				matches++
				found := false
				for _, set := range sets[i] {
					in := true
					for _, c := range set {
						in = in && have[c]
					}
					found = found || in
				}
				require.True(t, found, "%v matches %v, but none of its category sets %q is in the message's %q",
					p, m, sets[i], SchemeCatV2.Categories(m))
			}
		}
		assert.Greater(t, matches, minMatches, "the generator must exercise matches, or the test proves nothing")
	}
	t.Run("rich", func(t *testing.T) {
		g := rich{rand.New(rand.NewPCG(31, 32))}
		var msgs []content.Message
		var preds []content.Predicate
		for range 1500 {
			msgs = append(msgs, g.message())
			preds = append(preds, g.predicate())
		}
		check(t, msgs, preds, 20000)
	})
	t.Run("adversarial", func(t *testing.T) {
		gen := newAdversary(33)
		var msgs []content.Message
		var preds []content.Predicate
		for range 600 {
			msgs = append(msgs, gen.message())
			preds = append(preds, gen.predicate())
		}
		check(t, msgs, preds, 5000)
	})
	t.Run("workloads", func(t *testing.T) {
		for _, cfg := range []workload.Config{workload.Default(), workload.SingleConstraint(), workload.Ranges()} {
			g, err := workload.New(cfg)
			require.NoError(t, err)
			check(t, g.Messages(300), g.Predicates(100), 500)
		}
	})
}

// FuzzFilterCategories maps fuzzed constraints (clients' predicates are
// untrusted) and checks the necessary condition against a message built
// from fuzzed values: if the filter matches the message exactly, one of its
// category sets is among the message's, and the filter expands to at most
// maxDisjuncts sets.
func FuzzFilterCategories(f *testing.F) {
	f.Add(uint8(content.OpContains), "ab", uint8(content.OpLt), int64(10), 2.5, "xaby", int64(3), 1.0, uint8(0))
	f.Add(uint8(content.OpPrefix), "héllo", uint8(content.OpGt), int64(-7), math.Copysign(0, -1), "héllo wörld", int64(-1), 0x1p63, uint8(3))
	f.Add(uint8(content.OpSuffix), strings.Repeat("z", 30), uint8(content.OpGe), int64(1<<53+1), 1e300, strings.Repeat("z", 40), int64(1<<53), 1e-300, uint8(5))
	f.Fuzz(func(t *testing.T, sop uint8, operand string, nop uint8, ni int64, nf float64, sval string, mi int64, mf float64, shape uint8) {
		num := func(i int64, f float64, asFloat bool) content.Value {
			if asFloat {
				return content.Float(f)
			}
			return content.Int(i)
		}
		filter := content.Filter{
			{Name: "s", Op: content.Op(sop % 11), Value: content.String(operand)},
			{Name: "n", Op: content.Op(nop % 11), Value: num(ni, nf, shape&1 != 0)},
		}
		if shape&4 != 0 {
			// A second bound on n, as in two-sided ranges.
			filter = append(filter, content.Constraint{Name: "n", Op: content.Op((nop/11)%11 + 1), Value: num(ni/2, nf*2, shape&8 != 0)})
		}
		if shape&16 != 0 {
			filter = filter[1:] // one attribute
		}
		m := content.MessageFrom(map[string]content.Value{"s": content.String(sval), "n": num(mi, mf, shape&2 != 0)})
		sets := SchemeCatV2.FilterCategories(filter)
		require.LessOrEqual(t, len(sets), maxDisjuncts)
		if !filter.Matches(m) {
			return
		}
		have := map[string]bool{}
		for _, c := range SchemeCatV2.Categories(m) {
			have[c] = true
		}
		for _, set := range sets {
			in := true
			for _, c := range set {
				in = in && have[c]
			}
			if in {
				return
			}
		}
		t.Fatalf("%v matches %v, but none of %q is in %q", filter, m, sets, SchemeCatV2.Categories(m))
	})
}

// TestFnvNodeIsTheHashOfThePayload: fnvNode hashes exactly the bytes
// appendNodePayload writes, for every node of every level.
func TestFnvNodeIsTheHashOfThePayload(t *testing.T) {
	for l := 0; l <= keyBits; l++ {
		for _, k := range []uint16{0, 1, 0x7fff, 0x8000, 0xabcd, 0xffff, 0x1234, 0x0f0f} {
			n := keyNode(k, l)
			want := fnvAdd(fnvOffset64, appendNodePayload(nil, n))
			require.Equal(t, want, fnvNode(fnvOffset64, n), "node %+v", n)
		}
	}
}
