package content

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCanonicalText(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{ // docs/design.md §1 is already canonical.
			`agency = "AP" && priority = 2 || keywords contains "Italy" || price > 20.5 && stock prefix "XY"`,
			`agency = "AP" && priority = 2 || keywords contains "Italy" || price > 20.5 && stock prefix "XY"`,
		},
		{"a=1&&b<=-2||\tc   exists", `a = 1 && b <= -2 || c exists`},
		{`"plain" = +7`, `plain = 7`},
		{`exists exists && prefix prefix"x" && true = false`, `"exists" exists && "prefix" prefix "x" && "true" = false`},
		{`"a b" != "c\x22d"`, `"a b" != "c\"d"`},
		{`s = "\x41\x7f\x0a\xc3\xa9\xff"`, `s = "A\x7f\né\xff"`},
		{`f = 3 || f = 3. || f = 3e0 || f = 1e21 || f = 0.000001 || f = -0.0 || f = 1e-400`,
			`f = 3 || f = 3.0 || f = 3.0 || f = 1e+21 || f = 1e-06 || f = -0.0 || f = 0.0`},
		{`b = true || b != false`, `b = true || b != false`},
	} {
		p, err := Parse(tc.in)
		require.NoError(t, err, tc.in)
		assert.Equal(t, tc.want, p.String(), tc.in)
	}
}

// predicateGen draws valid predicates that stress the printer: odd names,
// every operator and kind, arbitrary bytes and floats of every magnitude.
type predicateGen struct{ rng *rand.Rand }

var oddNames = []string{
	"exists", "prefix", "suffix", "contains", "true", "false", "True", "existsx",
	`"`, `\`, `a"b`, `"quoted"`, "a b", " ", "&&", "||", "a&&b", "=", "!=", "<=",
	"9lives", "-x", ".x", "/x", "é", "日本", "\xff", "a\x00b", "\n", "\x7f", "\u0085", "a-b.c/d_e",
}

func (g predicateGen) bytes(maxLen int, alphabet string) string {
	b := make([]byte, g.rng.IntN(maxLen+1))
	for i := range b {
		if alphabet == "" {
			b[i] = byte(g.rng.IntN(256))
		} else {
			b[i] = alphabet[g.rng.IntN(len(alphabet))]
		}
	}
	return string(b)
}

func (g predicateGen) name() string {
	const identStart = "abcxyzABCXYZ_"
	const identPart = identStart + "0123456789.-/"
	switch g.rng.IntN(4) {
	case 0:
		return oddNames[g.rng.IntN(len(oddNames))]
	case 1:
		if s := g.bytes(6, ""); s != "" {
			return s
		}
		return "\x00"
	default:
		return string(identStart[g.rng.IntN(len(identStart))]) + g.bytes(6, identPart)
	}
}

func (g predicateGen) float() float64 {
	var f float64
	switch g.rng.IntN(8) {
	case 0:
		f = math.Float64frombits(g.rng.Uint64()) // every magnitude, denormals included
	case 1:
		f = math.Pow(10, float64(g.rng.IntN(640)-330)) // 1e21, 1e-7, 1e308, 1e-323...
	case 2:
		f = float64(g.rng.IntN(2001) - 1000) // integral: 3.0
	case 3:
		f = math.Ldexp(1, g.rng.IntN(2098)-1074) // powers of two, 2^63 and 2^-1074
	case 4:
		specials := []float64{negZ, 0, 0x1p63, -0x1p63, 0x1p53 + 2, 9223372036854774784, math.MaxFloat64,
			-math.MaxFloat64, math.SmallestNonzeroFloat64, 0.1, 1e21, 1e20, 123456789, 5e-324, 2.5}
		f = specials[g.rng.IntN(len(specials))]
	default:
		f = (g.rng.Float64() - 0.5) * math.Pow(10, float64(g.rng.IntN(40)-20))
	}
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return 1.5
	}
	return f
}

func (g predicateGen) value() Value {
	switch g.rng.IntN(4) {
	case 0:
		if g.rng.IntN(2) == 0 {
			return String(g.bytes(8, ""))
		}
		return String(g.bytes(8, "ab\"\\\n\t é日"))
	case 1:
		ints := []int64{0, 1, -1, math.MaxInt64, math.MinInt64, math.MinInt64 + 1, int64(g.rng.Uint64()), g.rng.Int64N(200) - 100}
		return Int(ints[g.rng.IntN(len(ints))])
	case 2:
		return Float(g.float())
	default:
		return Bool(g.rng.IntN(2) == 0)
	}
}

func (g predicateGen) constraint() Constraint {
	c := Constraint{Name: g.name()}
	if g.rng.IntN(8) == 0 {
		c.Op = OpExists
		return c
	}
	c.Value = g.value()
	for {
		c.Op = Op(1 + g.rng.IntN(int(OpContains)))
		if c.Op.AppliesTo(c.Value.Kind()) {
			return c
		}
	}
}

func (g predicateGen) predicate() Predicate {
	p := make(Predicate, 1+g.rng.IntN(4))
	for i := range p {
		p[i] = make(Filter, 1+g.rng.IntN(4))
		for j := range p[i] {
			p[i][j] = g.constraint()
		}
	}
	return p
}

// Property: for every valid predicate p, Parse(p.String()) is p (by value
// identity, so kinds, -0.0 and every float bit survive) and String() is a
// fixed point.
func TestRoundTripProperty(t *testing.T) {
	g := predicateGen{rand.New(rand.NewPCG(11, 12))}
	seen := map[Kind]int{}
	opsSeen := map[Op]int{}
	for iter := 0; iter < 5000; iter++ {
		p := g.predicate()
		require.NoError(t, p.Validate())
		text := p.String()
		q, err := Parse(text)
		require.NoError(t, err, "%q", text)
		if diff := cmp.Diff(p, q, valueCmp); diff != "" {
			t.Fatalf("Parse(%q) mismatch (-want +got):\n%s", text, diff)
		}
		require.Equal(t, text, q.String(), "not a fixed point")
		for _, f := range p {
			for _, c := range f {
				seen[c.Value.Kind()]++
				opsSeen[c.Op]++
			}
		}
	}
	// The generator must reach every kind and operator.
	assert.Len(t, seen, 5)
	assert.Len(t, opsSeen, int(OpExists))
}

// The same property, checked with go-cmp looking at unexported fields
// directly rather than through Value.Equal.
func TestRoundTripAllowUnexported(t *testing.T) {
	g := predicateGen{rand.New(rand.NewPCG(13, 14))}
	for iter := 0; iter < 500; iter++ {
		p := g.predicate()
		q, err := Parse(p.String())
		require.NoError(t, err)
		require.True(t, cmp.Equal(p, q, cmp.AllowUnexported(Value{})), "%s", p)
	}
}

// The printer keeps names and values apart whatever they contain.
func TestRoundTripOddNames(t *testing.T) {
	for _, name := range oddNames {
		for _, c := range []Constraint{ex(name), cons(name, OpEq, String(name)), cons(name, OpGe, Float(1e21))} {
			p := Predicate{{c, ex("z")}, {c}}
			q, err := Parse(p.String())
			require.NoError(t, err, "%q", p.String())
			assert.Empty(t, cmp.Diff(p, q, valueCmp), "%q", p.String())
			assert.False(t, strings.ContainsAny(p.String(), "\n\r"), "canonical text is one line")
		}
	}
}
