package encoding

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/dripmesh/drip/internal/content"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Carzaniga09 §3: the worked example of the categorization.
func TestCategoriesPaperExample(t *testing.T) {
	m := content.MessageFrom(map[string]content.Value{
		"stock": content.String("XYZ"), "price": content.Int(50), "quantity": content.Int(100),
	})
	assert.Equal(t, []string{
		"∃#price", "#price=50",
		"∃#quantity", "#quantity=100",
		"∃$stock", "$stock=XYZ",
	}, SchemeCatV1.Categories(m))

	p := content.MustParse(`stock = "XYZ" && price > 20`)
	assert.Equal(t, [][]string{{"$stock=XYZ", "∃#price"}}, SchemeCatV1.FilterCategories(p[0]))
}

func TestConstraintCategories(t *testing.T) {
	for _, tc := range []struct {
		text string
		want []string
	}{
		{`x = 3`, []string{"#x=3"}},
		{`x = 3.0`, []string{"#x=3"}}, // ints and floats share '#' and the canonical number
		{`x = 2.5`, []string{"#x=2.5"}},
		{`x = -0.0`, []string{"#x=0"}},
		{`x = 1e300`, []string{"#x=1e+300"}},
		{`x != 3`, []string{"∃#x"}},
		{`x < 3`, []string{"∃#x"}},
		{`x >= 3.5`, []string{"∃#x"}},
		{`s = "a b"`, []string{"$s=a b"}},
		{`s = ""`, []string{"$s="}},
		{`s < "m"`, []string{"∃$s"}},
		{`s prefix "ab"`, []string{"∃$s"}},
		{`s suffix "ab"`, []string{"∃$s"}},
		{`s contains "ab"`, []string{"∃$s"}},
		{`b = true`, []string{"?b=true"}},
		{`b = false`, []string{"?b=false"}},
		{`b != true`, []string{"∃?b"}},
		{`x exists`, nil}, // any type: no single category
		{`"a=b" = "c"`, []string{`$a\=b=c`}},
		{`"a\\" = "=c"`, []string{`$a\\==c`}},
		{`"a=" exists && "a=" = 1`, []string{`#a\==1`}},
	} {
		p := content.MustParse(tc.text)
		assert.Equal(t, [][]string{tc.want}, SchemeCatV1.FilterCategories(p[0]), tc.text)
	}
}

func TestMessageCategoriesPerKind(t *testing.T) {
	m := content.MessageFrom(map[string]content.Value{
		"f": content.Float(3), "g": content.Float(math.NaN()), "b": content.Bool(true),
		`n=\`: content.String("v=w"),
	})
	assert.Equal(t, []string{
		"∃?b", "?b=true",
		"∃#f", "#f=3",
		"∃#g", "#g=NaN",
		`∃$n\=\\`, `$n\=\\=v=w`,
	}, SchemeCatV1.Categories(m))
}

// category is the tuple a category string stands for.
type category struct {
	existence bool
	sym       byte
	name      string
	value     string // canonical text of the value; "" for existence
}

// parseCategory inverts the category syntax of doc.go. That it is a
// function of the string alone is what makes the syntax unambiguous.
func parseCategory(t *testing.T, s string) category {
	t.Helper()
	var c category
	if rest, ok := strings.CutPrefix(s, existenceSymbol); ok {
		c.existence, s = true, rest
	}
	require.NotEmpty(t, s)
	c.sym, s = s[0], s[1:]
	require.Contains(t, []byte{stringSymbol, numberSymbol, boolSymbol}, c.sym)
	var name strings.Builder
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case escapeByte:
			require.Less(t, i+1, len(s), "dangling escape in %q", s)
			i++
			name.WriteByte(s[i])
		case equalsByte:
			require.False(t, c.existence, "unescaped '=' in an existence category %q", s)
			c.name, c.value = name.String(), s[i+1:]
			return c
		default:
			name.WriteByte(s[i])
		}
	}
	require.True(t, c.existence, "equality category %q without '='", s)
	c.name = name.String()
	return c
}

// The escaping is unambiguous: distinct (kind, type, name, value) tuples
// never share a category string, on names and values built from the bytes
// that matter ('=', '\', the ∃ bytes, type symbols).
func TestCategoriesAreUnambiguous(t *testing.T) {
	alphabet := []string{"=", `\`, "a", "∃", "$", "#", "?", "\xe2", "\x88"}
	r := rand.New(rand.NewPCG(5, 6))
	word := func() string {
		var b strings.Builder
		for range r.IntN(5) {
			b.WriteString(alphabet[r.IntN(len(alphabet))])
		}
		return b.String()
	}
	values := func() content.Value {
		switch r.IntN(4) {
		case 0:
			return content.String(word())
		case 1:
			return content.Int(int64(r.IntN(5)) - 2)
		case 2:
			return content.Float([]float64{0.5, 1, -2, math.NaN(), math.Inf(1)}[r.IntN(5)])
		default:
			return content.Bool(r.IntN(2) == 0)
		}
	}
	seen := map[string]category{}
	for range 20000 {
		name, v := word(), values()
		sym, _ := typeSymbol(v.Kind())
		want := []category{
			{existence: true, sym: sym, name: name},
			{sym: sym, name: name, value: valueText(v)},
		}
		got := []string{
			string(appendExistence(nil, sym, name)),
			string(appendEquality(nil, sym, name, v)),
		}
		for i, s := range got {
			require.Equal(t, want[i], parseCategory(t, s), "category %q", s)
			if prev, ok := seen[s]; ok {
				require.Equal(t, prev, want[i], "two tuples share category %q", s)
			}
			seen[s] = want[i]
		}
	}
}

func valueText(v content.Value) string {
	switch v.Kind() {
	case content.KindString:
		return v.Str()
	case content.KindBool:
		return fmt.Sprint(v.Bool())
	default:
		return content.CanonicalNumber(v)
	}
}

// The hot path formats numbers itself to avoid allocating; it must agree
// with content.CanonicalNumber, which defines the wire text.
func TestAppendCanonicalNumberMatchesContent(t *testing.T) {
	special := []content.Value{
		content.Int(0), content.Int(math.MaxInt64), content.Int(math.MinInt64), content.Int(-1),
		content.Float(0), content.Float(math.Copysign(0, -1)), content.Float(0.1), content.Float(-2.5),
		content.Float(1 << 53), content.Float(1<<53 + 2), content.Float(0x1p63), content.Float(-0x1p63),
		content.Float(math.MaxFloat64), content.Float(math.SmallestNonzeroFloat64),
		content.Float(math.NaN()), content.Float(math.Inf(1)), content.Float(math.Inf(-1)),
	}
	for _, v := range special {
		assert.Equal(t, content.CanonicalNumber(v), string(appendCanonicalNumber(nil, v)), "%#v", v)
	}
	r := rand.New(rand.NewPCG(7, 8))
	for range 10000 {
		for _, v := range []content.Value{
			content.Int(int64(r.Uint64())),
			content.Float(math.Float64frombits(r.Uint64())),
			content.Float(float64(r.IntN(1000)) / 4),
		} {
			require.Equal(t, content.CanonicalNumber(v), string(appendCanonicalNumber(nil, v)), "%#v", v)
		}
	}
}

func FuzzAppendCanonicalNumber(f *testing.F) {
	f.Add(uint64(0), false)
	f.Add(math.Float64bits(3.0), true)
	f.Fuzz(func(t *testing.T, bits uint64, isFloat bool) {
		v := content.Int(int64(bits))
		if isFloat {
			v = content.Float(math.Float64frombits(bits))
		}
		require.Equal(t, content.CanonicalNumber(v), string(appendCanonicalNumber(nil, v)))
	})
}
