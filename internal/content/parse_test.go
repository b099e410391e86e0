package content

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// valueCmp compares Values by identity, so a test cannot mistake Int(3) for
// Float(3) or -0.0 for 0.0.
var valueCmp = cmp.Comparer(Value.Equal)

func cons(name string, op Op, v Value) Constraint { return Constraint{Name: name, Op: op, Value: v} }
func ex(name string) Constraint                   { return Constraint{Name: name, Op: OpExists} }

func TestParseValid(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Predicate
	}{
		{ // docs/design.md §1, with && binding tighter than ||
			`agency = "AP" && priority = 2 || keywords contains "Italy" || price > 20.5 && stock prefix "XY"`,
			Predicate{
				{cons("agency", OpEq, String("AP")), cons("priority", OpEq, Int(2))},
				{cons("keywords", OpContains, String("Italy"))},
				{cons("price", OpGt, Float(20.5)), cons("stock", OpPrefix, String("XY"))},
			},
		},
		{`a=1||b=2&&c=3||d=4`, Predicate{{cons("a", OpEq, Int(1))}, {cons("b", OpEq, Int(2)), cons("c", OpEq, Int(3))}, {cons("d", OpEq, Int(4))}}},
		{"\t a \n=\r\n 1 \t", Predicate{{cons("a", OpEq, Int(1))}}},
		{" a=1 &&\nb=2\n||\tc=3 ", Predicate{{cons("a", OpEq, Int(1)), cons("b", OpEq, Int(2))}, {cons("c", OpEq, Int(3))}}},
		{`a = 1 && a != 1 && a < 1 && a <= 1 && a > 1 && a >= 1`, Predicate{{
			cons("a", OpEq, Int(1)), cons("a", OpNe, Int(1)), cons("a", OpLt, Int(1)),
			cons("a", OpLe, Int(1)), cons("a", OpGt, Int(1)), cons("a", OpGe, Int(1)),
		}}},
		{`a<=1&&a>=-1&&a!=-1.5&&a<"x"&&a>"y"`, Predicate{{
			cons("a", OpLe, Int(1)), cons("a", OpGe, Int(-1)), cons("a", OpNe, Float(-1.5)),
			cons("a", OpLt, String("x")), cons("a", OpGt, String("y")),
		}}},
		{`s prefix "p" && s suffix"q" && s contains ""`, Predicate{{
			cons("s", OpPrefix, String("p")), cons("s", OpSuffix, String("q")), cons("s", OpContains, String("")),
		}}},
		{`x exists && y exists || z exists`, Predicate{{ex("x"), ex("y")}, {ex("z")}}},

		// Names: identifiers, quoted strings, and keywords where a name is expected.
		{`a.b/c-d_9 = 1`, Predicate{{cons("a.b/c-d_9", OpEq, Int(1))}}},
		{`_ exists`, Predicate{{ex("_")}}},
		{`"odd name" = 1`, Predicate{{cons("odd name", OpEq, Int(1))}}},
		{`"a\"b" exists`, Predicate{{ex(`a"b`)}}},
		{`"\xff\x00" exists`, Predicate{{ex("\xff\x00")}}},
		{`exists exists`, Predicate{{ex("exists")}}},
		{`"exists" exists`, Predicate{{ex("exists")}}},
		{`prefix prefix "p"`, Predicate{{cons("prefix", OpPrefix, String("p"))}}},
		{`suffix suffix "s"`, Predicate{{cons("suffix", OpSuffix, String("s"))}}},
		{`contains contains "c"`, Predicate{{cons("contains", OpContains, String("c"))}}},
		{`true = true && false != false`, Predicate{{cons("true", OpEq, Bool(true)), cons("false", OpNe, Bool(false))}}},
		{`existsx = 1`, Predicate{{cons("existsx", OpEq, Int(1))}}},

		// Strings and escapes.
		{`s = "a\"b\\c\n\r\t"`, Predicate{{cons("s", OpEq, String("a\"b\\c\n\r\t"))}}},
		{`s = "\x41\x6a\x6A\xff\x00"`, Predicate{{cons("s", OpEq, String("Ajj\xff\x00"))}}},
		{"s = \"raw \xff\x01\n bytes\"", Predicate{{cons("s", OpEq, String("raw \xff\x01\n bytes"))}}},
		{`s = "é || && \" = "`, Predicate{{cons("s", OpEq, String(`é || && " = `))}}},
		{`s = ""`, Predicate{{cons("s", OpEq, String(""))}}},

		// Numbers: no '.' or exponent means int64.
		{`n = -5`, Predicate{{cons("n", OpEq, Int(-5))}}},
		{`n = +5`, Predicate{{cons("n", OpEq, Int(5))}}},
		{`n = 007`, Predicate{{cons("n", OpEq, Int(7))}}},
		{`n = -0`, Predicate{{cons("n", OpEq, Int(0))}}},
		{`n = 9223372036854775807`, Predicate{{cons("n", OpEq, Int(math.MaxInt64))}}},
		{`n = -9223372036854775808`, Predicate{{cons("n", OpEq, Int(math.MinInt64))}}},
		{`f = 3.0`, Predicate{{cons("f", OpEq, Float(3))}}},
		{`f = 1e5`, Predicate{{cons("f", OpEq, Float(1e5))}}},
		{`f = 1.5e3`, Predicate{{cons("f", OpEq, Float(1500))}}},
		{`f = 1E-3`, Predicate{{cons("f", OpEq, Float(0.001))}}},
		{`f = -2.5e+10`, Predicate{{cons("f", OpEq, Float(-2.5e10))}}},
		{`f = .5`, Predicate{{cons("f", OpEq, Float(0.5))}}},
		{`f = 5.`, Predicate{{cons("f", OpEq, Float(5))}}},
		{`f = -0.0`, Predicate{{cons("f", OpEq, Float(negZ))}}},
		{`f = 1e-400`, Predicate{{cons("f", OpEq, Float(0))}}}, // underflow rounds to zero
		{`f = 9223372036854775808.0`, Predicate{{cons("f", OpEq, Float(0x1p63))}}},
		{`f = 1.7976931348623157e308`, Predicate{{cons("f", OpEq, Float(math.MaxFloat64))}}},
		{`f = 5e-324`, Predicate{{cons("f", OpEq, Float(math.SmallestNonzeroFloat64))}}},

		{`b = true && b != false`, Predicate{{cons("b", OpEq, Bool(true)), cons("b", OpNe, Bool(false))}}},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := Parse(tc.in)
			require.NoError(t, err)
			if diff := cmp.Diff(tc.want, got, valueCmp); diff != "" {
				t.Fatalf("Parse(%q) mismatch (-want +got):\n%s", tc.in, diff)
			}
			require.NoError(t, got.Validate())
		})
	}
}

type parseErrCase struct {
	in      string
	offset  int
	wantMsg string
}

func checkParseErrors(t *testing.T, l Limits, cases []parseErrCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.in, func(t *testing.T) {
			p, err := ParseWithLimits(tc.in, l)
			require.Error(t, err, "parsed as %s", p)
			assert.Nil(t, p)
			var pe *ParseError
			require.True(t, errors.As(err, &pe), "%T is not a *ParseError", err)
			assert.Equal(t, tc.offset, pe.Offset, "offset; message: %s", pe.Msg)
			assert.Contains(t, pe.Msg, tc.wantMsg)
			assert.True(t, strings.HasPrefix(err.Error(), "predicate: at byte "), err.Error())
		})
	}
}

func TestParseErrors(t *testing.T) {
	checkParseErrors(t, DefaultLimits(), []parseErrCase{
		{``, 0, "expected an attribute name, found end of input"},
		{"  \n", 3, "expected an attribute name, found end of input"},
		{`1a = 1`, 0, `expected an attribute name (identifier or quoted string), found "1"`},
		{`é = 1`, 0, "found byte 0xc3"},
		{`"" = 1`, 0, "empty attribute name"},

		// Strings.
		{`a = "abc`, 4, "unterminated string"},
		{`"abc = 1`, 0, "unterminated string"},
		{`a = "a\q"`, 6, `unknown escape: backslash followed by "q"`},
		{`a = "a\'"`, 6, `unknown escape`},
		{"a = \"\\\xff\"", 5, "unknown escape: backslash followed by byte 0xff"},
		{`a = "\`, 5, "unterminated escape"},
		{`a = "\x4"`, 5, `expected two hex digits after \x`},
		{`a = "\x4`, 5, `expected two hex digits after \x`},
		{`a = "\xg0"`, 5, `expected two hex digits after \x`},
		{`a = "\u0041"`, 5, "unknown escape"},
		{`a = "x"y`, 7, `expected "&&", "||" or end of input, found "y"`},
		{`a = "x" "y"`, 8, `expected "&&", "||" or end of input`},
		{`a = 'x'`, 4, `expected a value (string, number, true or false), found "'"`},

		// Operators.
		{`a 1`, 2, "expected an operator (= != < <= > >= prefix suffix contains exists), found \"1\""},
		{`a`, 1, "expected an operator"},
		{`a ! = 1`, 2, "expected an operator"},
		{`a prefixx "b"`, 2, "expected an operator"},
		{`a PREFIX "b"`, 2, "expected an operator"},
		{`a b = 1`, 2, "expected an operator"},
		{`a exists 3`, 9, `expected "&&", "||" or end of input, found "3"`},

		// Values.
		{`a =`, 3, "expected a value, found end of input"},
		{`a = `, 4, "expected a value, found end of input"},
		{`a = && b = 1`, 4, `expected a value (string, number, true or false), found "&"`},
		{`a == 1`, 3, `expected a value (string, number, true or false), found "="`},
		{`a = b`, 4, `found identifier "b"; quote strings`},
		{`a = True`, 4, `found identifier "True"`},
		{`a = true1`, 4, `found identifier "true1"`},
		{`a = NaN`, 4, `found identifier "NaN"`},
		{`a = +Inf`, 4, `expected a number, found "+"`},
		{`a = -`, 4, `expected a number, found "-"`},
		{`a = .`, 4, `expected a number, found "."`},
		{`a = --1`, 4, `expected a number, found "-"`},
		{`a = 9223372036854775808`, 4, "integer 9223372036854775808 does not fit in int64"},
		{`a = -9223372036854775809`, 4, "does not fit in int64"},
		{`a = 99999999999999999999999`, 4, "does not fit in int64"},
		{`a = 1e999`, 4, `malformed or out-of-range float "1e999"`},
		{`a = -1e999`, 4, "out-of-range float"},
		{`a = 1.7976931348623159e308`, 4, "out-of-range float"},
		{`a = 1e`, 4, `malformed or out-of-range float "1e"`},
		{`a = 1e+`, 4, "malformed"},
		{`a = 1.2.3`, 4, "malformed"},
		{`a = 1_000`, 5, "digit separators"},
		{`a = 1-2`, 5, `expected "&&", "||" or end of input, found "-"`},
		{`a = 0x10`, 5, `found "x"`},

		// Operators that do not apply to the value's kind.
		{`x prefix 3`, 2, "operator prefix does not apply to the int value at byte 9"},
		{`x suffix false`, 2, "operator suffix does not apply to the bool value at byte 9"},
		{`x contains 1.5`, 2, "operator contains does not apply to the float value at byte 11"},
		{`x < true`, 2, "operator < does not apply to the bool value at byte 4"},
		{`x >= false`, 2, "operator >= does not apply to the bool value"},
		{`a = 1 && x<=true`, 10, "operator <= does not apply to the bool value at byte 12"},

		// Connectives.
		{`a = 1 &&`, 8, "expected an attribute name, found end of input"},
		{`a = 1 && `, 9, "expected an attribute name, found end of input"},
		{`a = 1 ||`, 8, "expected an attribute name, found end of input"},
		{`|| a = 1`, 0, `expected an attribute name (identifier or quoted string), found "|"`},
		{`&& a = 1`, 0, `found "&"`},
		{`a = 1 && || b = 1`, 9, `found "|"`},
		{`a = 1 &&& b = 1`, 8, `found "&"`},
		{`a = 1 ||| b = 1`, 8, `found "|"`},
		{`a = 1 | b = 2`, 6, `expected "&&", "||" or end of input, found "|"`},
		{`a = 1 & b = 2`, 6, `found "&"`},
		{`a = 1 b = 2`, 6, `found "b"`},
		{`a = 1 and b = 2`, 6, `found "a"`},
		{`(a = 1)`, 0, `found "("`},
	})
}

func TestParseLimits(t *testing.T) {
	t.Run("filters", func(t *testing.T) {
		l := Limits{MaxFilters: 2}
		_, err := ParseWithLimits(`a exists || b exists`, l)
		require.NoError(t, err)
		checkParseErrors(t, l, []parseErrCase{
			{`a exists || b exists || c exists`, 24, "more than 2 filters (|| terms) in one predicate"},
		})
	})
	t.Run("constraints", func(t *testing.T) {
		l := Limits{MaxConstraints: 2}
		_, err := ParseWithLimits(`a exists && b exists || c exists && d exists`, l)
		require.NoError(t, err)
		checkParseErrors(t, l, []parseErrCase{
			{`a exists && b exists && c exists`, 24, "more than 2 constraints (&& terms) in one filter"},
			{`a exists || a exists && b exists && c exists`, 36, "more than 2 constraints"},
		})
	})
	t.Run("string", func(t *testing.T) {
		l := Limits{MaxString: 3}
		_, err := ParseWithLimits(`a = "abc" && b = "\x41\x42\x43" && "long name" exists`, l)
		require.NoError(t, err, "the limit counts unescaped bytes and not names")
		checkParseErrors(t, l, []parseErrCase{
			{`a = "abcd"`, 4, "string value is 4 bytes, over the limit of 3"},
			{`a = "\x41\x42\x43\x44"`, 4, "string value is 4 bytes"},
			{`a = 1 || a = "ééé"`, 13, "string value is 6 bytes"},
		})
	})
	t.Run("name", func(t *testing.T) {
		l := Limits{MaxName: 3}
		_, err := ParseWithLimits(`abc = "a long string value"`, l)
		require.NoError(t, err, "the limit applies to names only")
		checkParseErrors(t, l, []parseErrCase{
			{`abcd = 1`, 0, "attribute name is 4 bytes, over the limit of 3"},
			{`a = 1 && "a\x00cd" exists`, 9, "attribute name is 4 bytes"},
		})
	})
	t.Run("text", func(t *testing.T) {
		l := Limits{MaxText: 10}
		_, err := ParseWithLimits(`a=1&&b=2  `, l)
		require.NoError(t, err, "exactly at the limit")
		checkParseErrors(t, l, []parseErrCase{
			{`a = 1 && b = 2`, 10, "predicate text is 14 bytes, over the limit of 10"},
			{`garbage that is long`, 10, "over the limit"}, // checked before syntax
		})
	})
	t.Run("zero means unlimited", func(t *testing.T) {
		text := strings.Repeat(`a = "`+strings.Repeat("x", 5000)+`" && `, 100) + "b exists"
		text = strings.Repeat(text+" || ", 3) + text
		p, err := ParseWithLimits(text, Limits{})
		require.NoError(t, err)
		assert.Len(t, p, 4)
		assert.Len(t, p[0], 101)
	})
}

func TestParseDefaultLimits(t *testing.T) {
	d := DefaultLimits()
	join := func(n int, term, sep string) string {
		parts := make([]string, n)
		for i := range parts {
			parts[i] = term
		}
		return strings.Join(parts, sep)
	}
	for _, tc := range []struct {
		name    string
		ok, bad string
		wantMsg string
	}{
		{"filters", join(d.MaxFilters, "a exists", " || "), join(d.MaxFilters+1, "a exists", " || "), "more than 1024 filters"},
		{"constraints", join(d.MaxConstraints, "a exists", " && "), join(d.MaxConstraints+1, "a exists", " && "), "more than 64 constraints"},
		{"string", `a = "` + strings.Repeat("x", d.MaxString) + `"`, `a = "` + strings.Repeat("x", d.MaxString+1) + `"`, "string value is 65537 bytes"},
		{"name", strings.Repeat("n", d.MaxName) + " exists", strings.Repeat("n", d.MaxName+1) + " exists", "attribute name is 257 bytes"},
		{"text", `a = "x"` + strings.Repeat(" ", d.MaxText-7), `a = "x"` + strings.Repeat(" ", d.MaxText-6), "over the limit of 1048576"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(tc.ok)
			require.NoError(t, err)
			_, err = Parse(tc.bad)
			var pe *ParseError
			require.ErrorAs(t, err, &pe)
			assert.Contains(t, pe.Msg, tc.wantMsg)
		})
	}
}

func TestMustParse(t *testing.T) {
	assert.Equal(t, Predicate{{ex("a")}}, MustParse("a exists"))
	assert.PanicsWithError(t, "predicate: at byte 1: expected an operator (= != < <= > >= prefix suffix contains exists), found end of input", func() { MustParse("a") })
}
