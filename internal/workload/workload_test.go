package workload

import (
	"crypto/sha256"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dripmesh/drip/internal/content"
)

func mustNew(t testing.TB, c Config) *Generator {
	t.Helper()
	g, err := New(c)
	require.NoError(t, err)
	return g
}

func TestPresetsAreValid(t *testing.T) {
	require.NoError(t, Default().Validate())
	require.NoError(t, SingleConstraint().Validate())
	require.NoError(t, Ranges().Validate())
	// Carzaniga09 §5.1.4: 10 attributes, 60% strings over 200 terms, ints in
	// [0,100], 20 filters of 1–5 constraints.
	d := Default()
	assert.Equal(t, 10, d.AttrsPerMessage)
	assert.Equal(t, 0.6, d.StringFraction)
	assert.Equal(t, 200, d.Terms)
	assert.Equal(t, int64(100), d.IntMax)
	assert.Equal(t, 20, d.FiltersPerPredicate)
	assert.Equal(t, [2]int{1, 5}, [2]int{d.MinConstraints, d.MaxConstraints})
	s := SingleConstraint()
	assert.Equal(t, [2]int{1, 1}, [2]int{s.MinConstraints, s.MaxConstraints})
}

func TestValidateRejectsNonsense(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*Config)
		want   string
	}{
		{"no names", func(c *Config) { c.Names = 0 }, "Names = 0"},
		{"fewer names than attributes", func(c *Config) { c.Names = 9 }, "AttrsPerMessage = 10 exceeds Names = 9"},
		{"no attributes", func(c *Config) { c.AttrsPerMessage = 0 }, "AttrsPerMessage = 0"},
		{"negative string fraction", func(c *Config) { c.StringFraction = -0.1 }, "StringFraction"},
		{"string fraction above 1", func(c *Config) { c.StringFraction = 1.5 }, "StringFraction"},
		{"NaN string fraction", func(c *Config) { c.StringFraction = math.NaN() }, "StringFraction"},
		{"no terms", func(c *Config) { c.Terms = 0 }, "Terms = 0"},
		{"more terms than the list", func(c *Config) { c.Terms = MaxTerms + 1 }, "Terms = 201"},
		{"negative IntMax", func(c *Config) { c.IntMax = -1 }, "IntMax = -1"},
		{"no filters", func(c *Config) { c.FiltersPerPredicate = 0 }, "FiltersPerPredicate = 0"},
		{"no constraints", func(c *Config) { c.MinConstraints = 0 }, "MinConstraints = 0"},
		{"min above max", func(c *Config) { c.MinConstraints = 6 }, "MinConstraints = 6 exceeds MaxConstraints = 5"},
		{"more constraints than names", func(c *Config) { c.MaxConstraints = 11 }, "MaxConstraints = 11 exceeds Names = 10"},
		{"filters a broker would reject", func(c *Config) { c.Names, c.MaxConstraints = 100, 65 }, "exceed content.DefaultLimits"},
		{"predicates a broker would reject", func(c *Config) { c.FiltersPerPredicate = 1025 }, "exceed content.DefaultLimits"},
		{"negative range fraction", func(c *Config) { c.RangeFraction = -0.5 }, "RangeFraction"},
		{"NaN two-sided fraction", func(c *Config) { c.TwoSidedFraction = math.NaN() }, "TwoSidedFraction"},
		{"two-sided ranges a broker would reject", func(c *Config) {
			c.Names, c.MinConstraints, c.MaxConstraints, c.RangeFraction, c.TwoSidedFraction = 100, 1, 40, 0.5, 0.5
		}, "80 constraints exceed content.DefaultLimits"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Default()
			tt.mutate(&c)
			err := c.Validate()
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
			g, err2 := New(c)
			assert.Nil(t, g)
			assert.Equal(t, err, err2)
		})
	}
}

func TestTermList(t *testing.T) {
	require.Equal(t, 200, MaxTerms, "Carzaniga09 §5.1.4: a set of 200 frequent terms")
	seen := map[string]bool{}
	for i, term := range terms {
		assert.False(t, seen[term], "term %d %q repeated", i, term)
		seen[term] = true
		// contains operands come from a term's interior, which needs 3 bytes.
		assert.GreaterOrEqual(t, len(term), 3, "term %d %q", i, term)
		assert.Equal(t, strings.Trim(term, "abcdefghijklmnopqrstuvwxyz"), "", "term %d %q not plain lowercase", i, term)
	}
}

func TestVocabularySortsInIndexOrder(t *testing.T) {
	assert.Equal(t, []string{"a00", "a01", "a02"}, vocabulary(3))
	v := vocabulary(150)
	assert.Equal(t, "a000", v[0])
	assert.Equal(t, "a149", v[149])
	assert.IsIncreasing(t, v)
}

func TestSameSeedSameStreams(t *testing.T) {
	for _, c := range []Config{Default(), SingleConstraint()} {
		a, b := mustNew(t, c), mustNew(t, c)
		assert.Equal(t, texts(a.Messages(50)), texts(b.Messages(50)))
		assert.Equal(t, texts(a.Predicates(5)), texts(b.Predicates(5)))

		a = mustNew(t, c)
		c.Seed++
		d := mustNew(t, c)
		assert.NotEqual(t, texts(a.Messages(50)), texts(d.Messages(50)))
		assert.NotEqual(t, texts(a.Predicates(5)), texts(d.Predicates(5)))
	}
}

// The predicates of an experiment must not depend on how many messages were
// generated first, and the reverse.
func TestStreamsAreIndependent(t *testing.T) {
	fresh := mustNew(t, Default())
	wantMsgs, wantPreds := texts(fresh.Messages(20)), texts(fresh.Predicates(3))

	reversed := mustNew(t, Default())
	gotPreds := texts(reversed.Predicates(3))
	assert.Equal(t, wantMsgs, texts(reversed.Messages(20)))
	assert.Equal(t, wantPreds, gotPreds)

	interleaved := mustNew(t, Default())
	var msgs, preds []string
	for i := range 20 {
		msgs = append(msgs, interleaved.Message().String())
		if i < 3 {
			preds = append(preds, interleaved.Predicate().String())
		}
	}
	assert.Equal(t, wantMsgs, msgs)
	assert.Equal(t, wantPreds, preds)
}

func texts[T fmt.Stringer](xs []T) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = x.String()
	}
	return out
}

// kinds maps each name of c's vocabulary to the kind its values must have.
func kinds(c Config) map[string]content.Kind {
	m := map[string]content.Kind{}
	for i, n := range vocabulary(c.Names) {
		m[n] = content.KindInt
		if i < c.stringNames() {
			m[n] = content.KindString
		}
	}
	return m
}

func TestStringFractionSplitsNames(t *testing.T) {
	tests := []struct {
		names    int
		fraction float64
		strings  int
	}{
		{10, 0.6, 6},
		{10, 0, 0},
		{10, 1, 10},
		{10, 0.25, 3}, // 2.5 rounds away from zero
		{200, 0.6, 120},
		{7, 0.6, 4},
	}
	for _, tt := range tests {
		c := Default()
		c.Names, c.AttrsPerMessage, c.StringFraction = tt.names, tt.names, tt.fraction
		if c.MaxConstraints > c.Names {
			c.MaxConstraints = c.Names
		}
		m := mustNew(t, c).Message()
		var got int
		for i, a := range m.Attributes() {
			if a.Value.Kind() == content.KindString {
				got++
				// The string names are the first ones.
				assert.Less(t, i, tt.strings, "names=%d fraction=%v: %s", tt.names, tt.fraction, m)
			}
		}
		assert.Equal(t, tt.strings, got, "names=%d fraction=%v", tt.names, tt.fraction)
	}
}

func TestMessagesFollowTheModel(t *testing.T) {
	c := Default()
	c.Names, c.Terms, c.IntMax = 40, 5, 3
	g := mustNew(t, c)
	kindOf := kinds(c)
	inVocab := map[string]bool{}
	for _, term := range terms[:c.Terms] {
		inVocab[term] = true
	}
	const n = 20000
	nameCount := map[string]int{}
	strCount := map[string]int{}
	intCount := map[int64]int{}
	for range n {
		m := g.Message()
		if m.Len() != c.AttrsPerMessage { // NewMessage rejects repeated names
			t.Fatalf("%d attributes in %s", m.Len(), m)
		}
		for _, a := range m.Attributes() {
			nameCount[a.Name]++
			if kindOf[a.Name] != a.Value.Kind() {
				t.Fatalf("attribute %s has the wrong type in %s", a.Name, m)
			}
			if a.Value.Kind() == content.KindString {
				if !inVocab[a.Value.Str()] {
					t.Fatalf("%q outside the first %d terms", a.Value.Str(), c.Terms)
				}
				strCount[a.Value.Str()]++
			} else {
				if a.Value.Int() < 0 || a.Value.Int() > c.IntMax {
					t.Fatalf("%d outside [0,%d]", a.Value.Int(), c.IntMax)
				}
				intCount[a.Value.Int()]++
			}
		}
	}
	// Uniform names: each appears in AttrsPerMessage/Names of the messages.
	require.Len(t, nameCount, c.Names)
	for name, k := range nameCount {
		assert.InDelta(t, 0.25, float64(k)/n, 0.02, "name %s", name)
	}
	// Uniform values over the whole range, ends included.
	require.Len(t, strCount, c.Terms)
	require.Len(t, intCount, int(c.IntMax)+1)
	totalStr, totalInt := 0, 0
	for _, k := range strCount {
		totalStr += k
	}
	for _, k := range intCount {
		totalInt += k
	}
	for s, k := range strCount {
		assert.InDelta(t, 1.0/5, float64(k)/float64(totalStr), 0.02, "term %q", s)
	}
	for i, k := range intCount {
		assert.InDelta(t, 1.0/4, float64(k)/float64(totalInt), 0.02, "int %d", i)
	}
	// Carzaniga09 §5.1.4: 60% of the attributes are strings.
	assert.InDelta(t, 0.6, float64(totalStr)/float64(totalStr+totalInt), 0.02)
}

// fromSomeTerm reports whether op is a proper prefix (prefix), a proper
// suffix (suffix) or an interior substring (neither) of some term.
func fromSomeTerm(vocab []string, op string, prefix, suffix bool) bool {
	for _, t := range vocab {
		if len(op) >= len(t) {
			continue
		}
		switch {
		case prefix && strings.HasPrefix(t, op), suffix && strings.HasSuffix(t, op):
			return true
		case !prefix && !suffix && len(t) > 2 && strings.Contains(t[1:len(t)-1], op):
			return true
		}
	}
	return false
}

func TestFiltersFollowTheModel(t *testing.T) {
	c := Default()
	c.Names, c.Terms = 30, 50
	g := mustNew(t, c)
	kindOf := kinds(c)
	vocab := terms[:c.Terms]
	inVocab := map[string]bool{}
	for _, term := range vocab {
		inVocab[term] = true
	}
	const n = 40000
	sizes := map[int]int{}
	ops := map[content.Kind]map[content.Op]int{content.KindString: {}, content.KindInt: {}}
	for range n {
		f := g.Filter()
		sizes[len(f)]++
		names := map[string]bool{}
		for _, con := range f {
			if err := con.Validate(); err != nil {
				t.Fatal(err)
			}
			if names[con.Name] {
				t.Fatalf("name %s twice in %s", con.Name, f)
			}
			names[con.Name] = true
			k := con.Value.Kind()
			if kindOf[con.Name] != k {
				t.Fatalf("%s: wrong type for the name", con)
			}
			ops[k][con.Op]++
			var ok bool
			switch {
			case k == content.KindInt:
				ok = con.Value.Int() >= 0 && con.Value.Int() <= c.IntMax
			case con.Op == content.OpEq:
				ok = inVocab[con.Value.Str()]
			case con.Op == content.OpPrefix:
				ok = fromSomeTerm(vocab, con.Value.Str(), true, false)
			case con.Op == content.OpSuffix:
				ok = fromSomeTerm(vocab, con.Value.Str(), false, true)
			case con.Op == content.OpContains:
				ok = fromSomeTerm(vocab, con.Value.Str(), false, false)
			}
			if !ok {
				t.Fatalf("%s: operand outside the model", con)
			}
		}
	}
	// Constraint counts uniform over [MinConstraints, MaxConstraints].
	require.Len(t, sizes, 5)
	for k := 1; k <= 5; k++ {
		assert.InDelta(t, 0.2, float64(sizes[k])/n, 0.01, "filters of %d constraints", k)
	}
	frac := func(k content.Kind, op content.Op) float64 {
		total := 0
		for _, v := range ops[k] {
			total += v
		}
		return float64(ops[k][op]) / float64(total)
	}
	// Carzaniga09 §5.1.4: string ops 70% equality, 30% equally split over
	// prefix, suffix and substring; int ops 80% =, 10% <, 10% >.
	assert.InDelta(t, 0.7, frac(content.KindString, content.OpEq), 0.01)
	assert.InDelta(t, 0.1, frac(content.KindString, content.OpPrefix), 0.01)
	assert.InDelta(t, 0.1, frac(content.KindString, content.OpSuffix), 0.01)
	assert.InDelta(t, 0.1, frac(content.KindString, content.OpContains), 0.01)
	assert.InDelta(t, 0.8, frac(content.KindInt, content.OpEq), 0.01)
	assert.InDelta(t, 0.1, frac(content.KindInt, content.OpLt), 0.01)
	assert.InDelta(t, 0.1, frac(content.KindInt, content.OpGt), 0.01)
	// Names are uniform, so constraints split by type like the names do.
	strs, ints := 0, 0
	for _, v := range ops[content.KindString] {
		strs += v
	}
	for _, v := range ops[content.KindInt] {
		ints += v
	}
	assert.InDelta(t, 0.6, float64(strs)/float64(strs+ints), 0.01)
}

// The paper presets' seeded streams are part of every recorded
// experiment: the range options must not move them. The digests were
// computed with the generator before RangeFraction existed.
func TestPaperStreamsAreUnchanged(t *testing.T) {
	for _, tc := range []struct {
		c      Config
		digest string
		first  string
	}{
		{Default(), "5ceadb045e4522e6", `a01 = "japan" && a02 prefix "servic" && a05 prefix "officia" && a03 = "court" && a08 = 32`},
		{SingleConstraint(), "0b586aa1e27e169f", `a023 prefix "f"`},
	} {
		g := mustNew(t, tc.c)
		h := sha256.New()
		for _, p := range g.Predicates(50) {
			fmt.Fprintln(h, p.String())
		}
		for _, m := range g.Messages(50) {
			fmt.Fprintln(h, m.String())
		}
		assert.Equal(t, tc.digest, fmt.Sprintf("%x", h.Sum(nil)[:8]), "names=%d", tc.c.Names)
		assert.Equal(t, tc.first, mustNew(t, tc.c).Filter().String())
	}
}

func TestRangesFollowTheConfig(t *testing.T) {
	c := Ranges()
	g := mustNew(t, c)
	kindOf := kinds(c)
	const n = 20000
	var eq, lt, gt, two int
	for range n {
		f := g.Filter()
		require.NoError(t, content.Predicate{f}.Validate())
		names := map[string]int{}
		for _, con := range f {
			names[con.Name]++
			require.Equal(t, kindOf[con.Name], con.Value.Kind(), "%s", con)
		}
		require.Len(t, names, 1, "%s: one name per filter", f)
		for i := 0; i < len(f); i++ {
			con := f[i]
			if con.Value.Kind() == content.KindString {
				continue
			}
			if names[con.Name] == 2 {
				// A two-sided range: x > lo && x < hi, hi - lo in [2, IntMax/20+2].
				next := f[i+1]
				require.Equal(t, content.OpGt, con.Op, "%s", f)
				require.Equal(t, content.OpLt, next.Op, "%s", f)
				require.Equal(t, con.Name, next.Name, "%s", f)
				width := next.Value.Int() - con.Value.Int()
				require.True(t, width >= 2 && width <= c.IntMax/20+2, "%s", f)
				two++
				i++
				continue
			}
			switch con.Op {
			case content.OpEq:
				eq++
			case content.OpLt:
				lt++
			case content.OpGt:
				gt++
			default:
				t.Fatalf("%s: not an int operator", con)
			}
		}
	}
	ints := float64(eq + lt + gt + two)
	assert.InDelta(t, 0.1, float64(eq)/ints, 0.01, "equalities")
	assert.InDelta(t, 0.72, float64(two)/ints, 0.01, "two-sided ranges")
	assert.InDelta(t, 0.09, float64(lt)/ints, 0.01, "<")
	assert.InDelta(t, 0.09, float64(gt)/ints, 0.01, ">")
}

// The preset's point is moderate replication: a message must be wanted by
// some brokers and not by most, or broker-level false positives mean
// nothing.
func TestRangesReplication(t *testing.T) {
	g := mustNew(t, Ranges())
	const brokers, clients = 50, 10
	preds := g.Predicates(brokers * clients)
	brokerOf := make([]int, len(preds))
	for i := range preds {
		brokerOf[i] = i % brokers
	}
	_, broker := Replication(preds, brokerOf, g.Messages(300))
	t.Logf("broker replication %.1f of %d", broker, brokers)
	assert.InDelta(t, 0.6*brokers, broker, 0.15*brokers, "brokers per message")
}

func TestPredicatesValidateAndRoundTrip(t *testing.T) {
	for _, c := range []Config{Default(), SingleConstraint(), Ranges()} {
		g := mustNew(t, c)
		for _, p := range g.Predicates(200) {
			require.NoError(t, p.Validate())
			require.Len(t, p, c.FiltersPerPredicate)
			q, err := content.Parse(p.String())
			require.NoError(t, err, "%s", p)
			require.Equal(t, p, q)
			require.Equal(t, p.String(), q.String())
		}
	}
}

func TestExtremeConfigs(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*Config)
	}{
		{"one name, one term, one int", func(c *Config) {
			c.Names, c.AttrsPerMessage, c.Terms, c.IntMax, c.MaxConstraints = 1, 1, 1, 0, 1
		}},
		{"all strings", func(c *Config) { c.StringFraction = 1 }},
		{"all ints, full int64 range", func(c *Config) { c.StringFraction, c.IntMax = 0, math.MaxInt64 }},
		{"filters as wide as the vocabulary", func(c *Config) { c.MinConstraints, c.MaxConstraints = 10, 10 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Default()
			tt.mutate(&c)
			g := mustNew(t, c)
			for range 100 {
				m := g.Message()
				require.Equal(t, c.AttrsPerMessage, m.Len())
				for _, a := range m.Attributes() {
					if a.Value.Kind() == content.KindInt {
						require.GreaterOrEqual(t, a.Value.Int(), int64(0))
						require.LessOrEqual(t, a.Value.Int(), c.IntMax)
					}
				}
				p := g.Predicate()
				require.NoError(t, p.Validate())
				for _, f := range p {
					require.True(t, len(f) >= c.MinConstraints && len(f) <= c.MaxConstraints, "%s", f)
				}
			}
		})
	}
}

func FuzzGenerator(f *testing.F) {
	f.Add(int64(1), 10, 10, 0.6, 200, int64(100), 20, 1, 5)
	f.Add(int64(-7), 1, 1, 0.0, 1, int64(0), 1, 1, 1)
	f.Fuzz(func(t *testing.T, seed int64, names, attrs int, frac float64, nTerms int, intMax int64, filters, lo, hi int) {
		c := Config{Seed: seed, Names: names, AttrsPerMessage: attrs, StringFraction: frac, Terms: nTerms,
			IntMax: intMax, FiltersPerPredicate: filters, MinConstraints: lo, MaxConstraints: hi}
		if c.Names > 500 || c.FiltersPerPredicate > 50 {
			t.Skip("too large to be quick")
		}
		g, err := New(c)
		if err != nil {
			require.Error(t, c.Validate())
			return
		}
		m := g.Message()
		require.Equal(t, c.AttrsPerMessage, m.Len())
		p := g.Predicate()
		require.NoError(t, p.Validate())
		q, err := content.Parse(p.String())
		require.NoError(t, err)
		require.Equal(t, p, q)
	})
}

func BenchmarkMessage(b *testing.B) {
	g := mustNew(b, Default())
	b.ReportAllocs()
	for b.Loop() {
		g.Message()
	}
}

func BenchmarkPredicate(b *testing.B) {
	g := mustNew(b, Default())
	b.ReportAllocs()
	for b.Loop() {
		g.Predicate()
	}
}
