package encoding

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/dripmesh/drip/internal/content"
	"github.com/dripmesh/drip/internal/workload"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// bloomOfCategories is β of Carzaniga09 §3 computed from the string forms.
func bloomOfCategories(p Params, cats []string) Bloom {
	var b Bloom
	for _, c := range cats {
		for _, pos := range p.Positions(c, nil) {
			b.Set(pos)
		}
	}
	return b
}

// encodeFilter is the one Bloom of a cat-v1 filter.
func encodeFilter(p Params, f content.Filter) Bloom {
	bs := p.AppendFilter(nil, f)
	if len(bs) != 1 {
		panic("a cat-v1 filter encodes to one Bloom")
	}
	return bs[0]
}

// blooms is β of each category set.
func blooms(p Params, sets [][]string) []Bloom {
	var out []Bloom
	for _, s := range sets {
		out = append(out, bloomOfCategories(p, s))
	}
	return out
}

// The streaming encoders hash exactly the category strings, each into the
// part of the Bloom its class belongs to.
func TestEncodersAgreeWithCategories(t *testing.T) {
	gen := newAdversary(11)
	for _, p := range []Params{{M: 8, K: 1}, {M: 192, K: 7}, {M: 512, K: 32}, {Scheme: SchemeCatV2, M: 64, K: 1}, {Scheme: SchemeCatV2, M: 1024, K: 3}, DefaultParams()} {
		for range 500 {
			m := gen.message()
			require.Equal(t, bloomOfCategories(p, p.Scheme.Categories(m)), p.EncodeMessage(m), "%v %v", p, m)
			f := gen.filter()
			require.Equal(t, blooms(p, p.Scheme.FilterCategories(f)), p.AppendFilter(nil, f), "%v %v", p, f)
		}
	}
}

func TestEncodeLongCategoriesSpill(t *testing.T) {
	long := strings.Repeat("n=", 300)
	m := content.MessageFrom(map[string]content.Value{long: content.String(strings.Repeat("v", 500)), "x": content.Int(3)})
	for _, p := range []Params{{M: 256, K: 5}, DefaultParams()} {
		assert.Equal(t, bloomOfCategories(p, p.Scheme.Categories(m)), p.EncodeMessage(m))
	}
}

func TestEncodeFilterEdgeCases(t *testing.T) {
	for _, p := range []Params{DefaultParamsV1(), DefaultParams()} {
		assert.Equal(t, []Bloom{{}}, p.AppendFilter(nil, nil), "an empty filter matches everything")
		assert.Equal(t, []Bloom{{}}, p.AppendFilter(nil, content.MustParse(`a exists && b exists`)[0]),
			"exists has no category: the zero Bloom, which every message contains")
		assert.Empty(t, p.EncodePredicate(nil), "an empty predicate matches nothing")
		pred := content.MustParse(`a = 1 || b prefix "x" || c exists`)
		got := p.EncodePredicate(pred)
		require.Len(t, got, 3, "these filters are one Bloom each")
		assert.Equal(t, p.AppendFilter(nil, pred[1]), got[1:2])
		assert.True(t, got[2].IsZero())
		// Never-satisfiable constraints may encode to anything; they encode to
		// their type's existence category at most, which keeps the filter a
		// necessary condition.
		bad := content.Filter{{Name: "a", Op: content.OpEq}, {Name: "b", Op: content.OpPrefix, Value: content.Int(1)}}
		assert.Equal(t, [][]string{{"∃#b"}}, p.Scheme.FilterCategories(bad))
		assert.Equal(t, []Bloom{bloomOfCategories(p, []string{"∃#b"})}, p.AppendFilter(nil, bad))
	}
}

func TestEncodersPanicOnInvalidParams(t *testing.T) {
	assert.PanicsWithError(t, "encoding: M=0 bits, want a multiple of 8 in 8..512", func() {
		Params{K: 1}.EncodeMessage(content.Message{})
	})
	assert.Panics(t, func() { Params{M: 64}.AppendFilter(nil, nil) })
	assert.Panics(t, func() { Params{Scheme: 9, M: 64, K: 1}.EncodeMessage(content.Message{}) })
}

func TestEncodeMessageDoesNotAllocate(t *testing.T) {
	g, err := workload.New(workload.Default())
	require.NoError(t, err)
	m := g.Message()
	big := content.MessageFrom(map[string]content.Value{
		"price": content.Float(123.456e7), "n": content.Int(math.MinInt64), "ok": content.Bool(false),
	})
	for _, p := range []Params{DefaultParamsV1(), DefaultParams()} {
		assert.Zero(t, testing.AllocsPerRun(100, func() { p.EncodeMessage(m) }))
		assert.Zero(t, testing.AllocsPerRun(100, func() { p.EncodeMessage(big) }))
	}
	f := g.Filter()
	v1 := DefaultParamsV1()
	assert.Equal(t, 1.0, testing.AllocsPerRun(100, func() { v1.AppendFilter(nil, f) }), "a cat-v1 filter allocates only its result")
}

// Carzaniga09 §3, eq. 1: p(m) ⇒ ∃ B_p^i ⊆ B_m. Over adversarial messages and
// predicates (every operator and kind, mismatched kinds, NaN, ±Inf, -0,
// int/float equality, names with '=' and '\') and the paper workload, at
// several Params, including tiny ones where hash collisions are common.
func TestNoFalseNegatives(t *testing.T) {
	params := []Params{{M: 8, K: 1}, {M: 64, K: 3}, DefaultParamsV1(), {M: 512, K: 12}, {Scheme: SchemeCatV2, M: 64, K: 1}, {Scheme: SchemeCatV2, M: 256, K: 3}, DefaultParams()}
	check := func(t *testing.T, msgs []content.Message, preds []content.Predicate) int {
		matches := 0
		for _, p := range params {
			enc := make([][]Bloom, len(preds))
			for i, pred := range preds {
				enc[i] = p.EncodePredicate(pred)
			}
			for _, m := range msgs {
				bm := p.EncodeMessage(m)
				for i, pred := range preds {
					if !pred.Matches(m) {
						continue
					}
					matches++
					found := false
					for _, b := range enc[i] {
						found = found || b.SubsetOf(bm)
					}
					require.True(t, found, "%v matches %v but no Bloom of it is ⊆ the message's (M=%d K=%d)",
						pred, m, p.M, p.K)
				}
			}
		}
		return matches
	}
	t.Run("adversarial", func(t *testing.T) {
		gen := newAdversary(12)
		var msgs []content.Message
		var preds []content.Predicate
		for range 400 {
			msgs = append(msgs, gen.message())
			preds = append(preds, gen.predicate())
		}
		// The generator must exercise matches, or the test proves nothing.
		assert.Greater(t, check(t, msgs, preds), 2000)
	})
	t.Run("paper", func(t *testing.T) {
		for _, cfg := range []workload.Config{workload.Default(), workload.SingleConstraint()} {
			g, err := workload.New(cfg)
			require.NoError(t, err)
			assert.Greater(t, check(t, g.Messages(300), g.Predicates(100)), 500)
		}
	})
}

// adversary generates messages and predicates over a tiny vocabulary, so
// that names collide and constraints often match, with every operator and
// value kind and the edge values of the content semantics.
type adversary struct{ r *rand.Rand }

func newAdversary(seed uint64) adversary { return adversary{rand.New(rand.NewPCG(seed, 99))} }

var (
	advNames   = []string{"a", "b", "a=", "=", `\`, `a\=b`, "∃$a", "#"}
	advStrings = []string{"", "a", "ab", "abc", "b", "=", `\`, "ba", "∃"}
	advNumbers = []content.Value{
		content.Int(0), content.Int(1), content.Int(-1), content.Int(3), content.Int(math.MaxInt64),
		content.Int(math.MinInt64), content.Int(1<<53 + 1),
		content.Float(0), content.Float(math.Copysign(0, -1)), content.Float(1), content.Float(3),
		content.Float(2.5), content.Float(1 << 53), content.Float(0x1p63), content.Float(math.NaN()),
		content.Float(math.Inf(1)), content.Float(math.Inf(-1)),
	}
	advOps = []content.Op{
		content.OpEq, content.OpNe, content.OpLt, content.OpLe, content.OpGt, content.OpGe,
		content.OpPrefix, content.OpSuffix, content.OpContains, content.OpExists,
	}
)

func (a adversary) value() content.Value {
	switch a.r.IntN(5) {
	case 0, 1:
		return content.String(advStrings[a.r.IntN(len(advStrings))])
	case 2, 3:
		return advNumbers[a.r.IntN(len(advNumbers))]
	default:
		return content.Bool(a.r.IntN(2) == 0)
	}
}

func (a adversary) message() content.Message {
	attrs := map[string]content.Value{}
	for range a.r.IntN(len(advNames) + 1) {
		attrs[advNames[a.r.IntN(len(advNames))]] = a.value()
	}
	return content.MessageFrom(attrs)
}

func (a adversary) filter() content.Filter {
	f := make(content.Filter, 1+a.r.IntN(3))
	for i := range f {
		c := content.Constraint{Name: advNames[a.r.IntN(len(advNames))], Op: advOps[a.r.IntN(len(advOps))]}
		if c.Op != content.OpExists {
			c.Value = a.value() // mismatched operator and kind included
		}
		f[i] = c
	}
	return f
}

func (a adversary) predicate() content.Predicate {
	p := make(content.Predicate, 1+a.r.IntN(3))
	for i := range p {
		p[i] = a.filter()
	}
	return p
}
