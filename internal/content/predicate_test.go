package content

import (
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var (
	nan    = math.NaN()
	posInf = math.Inf(1)
	negInf = math.Inf(-1)
	negZ   = math.Copysign(0, -1)
)

// absent marks a test message that lacks the constrained attribute.
var absent = Value{}

type evalCase struct {
	name string
	attr Value // value of attribute "x", or absent
	op   Op
	cv   Value // constraint value (zero for exists)
	want bool
}

func (tc evalCase) message() Message {
	attrs := map[string]Value{"other": Int(1)}
	if tc.attr.IsValid() {
		attrs["x"] = tc.attr
	}
	return MessageFrom(attrs)
}

func runEvalCases(t *testing.T, cases []evalCase) {
	t.Helper()
	for _, tc := range cases {
		c := Constraint{Name: "x", Op: tc.op, Value: tc.cv}
		t.Run(fmt.Sprintf("%s/%#v_%s", tc.name, tc.attr, c), func(t *testing.T) {
			m := tc.message()
			assert.Equal(t, tc.want, c.MatchesMessage(m), "MatchesMessage")
			assert.Equal(t, tc.want, Filter{c}.Matches(m), "Filter.Matches")
			assert.Equal(t, tc.want, Predicate{{c}}.Matches(m), "Predicate.Matches")
			if tc.attr.IsValid() {
				assert.Equal(t, tc.want, c.Matches(tc.attr), "Matches")
			}
		})
	}
}

func TestMatchesStrings(t *testing.T) {
	runEvalCases(t, []evalCase{
		{"eq", String("b"), OpEq, String("b"), true},
		{"eq", String("b"), OpEq, String("a"), false},
		{"eq", String(""), OpEq, String(""), true},
		{"ne", String("b"), OpNe, String("a"), true},
		{"ne", String("b"), OpNe, String("b"), false},
		{"lt", String("b"), OpLt, String("c"), true},
		{"lt", String("b"), OpLt, String("b"), false},
		{"le", String("b"), OpLe, String("b"), true},
		{"le", String("b"), OpLe, String("a"), false},
		{"gt", String("b"), OpGt, String("a"), true},
		{"gt", String("b"), OpGt, String("b"), false},
		{"ge", String("b"), OpGe, String("b"), true},
		{"ge", String("b"), OpGe, String("c"), false},
		{"prefix", String("abc"), OpPrefix, String("ab"), true},
		{"prefix", String("abc"), OpPrefix, String("abc"), true},
		{"prefix", String("abc"), OpPrefix, String(""), true},
		{"prefix", String("abc"), OpPrefix, String("bc"), false},
		{"prefix", String("ab"), OpPrefix, String("abc"), false},
		{"suffix", String("abc"), OpSuffix, String("bc"), true},
		{"suffix", String("abc"), OpSuffix, String(""), true},
		{"suffix", String("abc"), OpSuffix, String("ab"), false},
		{"contains", String("politics Italy"), OpContains, String("Italy"), true},
		{"contains", String("abc"), OpContains, String("b"), true},
		{"contains", String("abc"), OpContains, String(""), true},
		{"contains", String("abc"), OpContains, String("x"), false},
		{"contains is case-sensitive", String("Italy"), OpContains, String("italy"), false},
		{"exists", String(""), OpExists, Value{}, true},

		// Bytewise order, not Unicode collation or case folding.
		{"byte order", String("B"), OpLt, String("a"), true},
		{"byte order", String("Z"), OpLt, String("a"), true},
		{"byte order", String("ab"), OpLt, String("abc"), true},
		{"byte order", String(""), OpLt, String("a"), true},
		{"byte order", String("a\x00"), OpGt, String("a"), true},
		{"byte order", String("é"), OpGt, String("z"), true},           // 0xc3 > 'z'
		{"byte order", String("\xff"), OpGt, String("é"), true},        // invalid UTF-8 still orders by byte
		{"byte order", String("\u00ff"), OpLt, String("\u0100"), true}, // c3 bf < c4 80
		{"byte order", String("e\u0301"), OpNe, String("é"), true},     // no normalisation
	})
}

func TestMatchesNumbers(t *testing.T) {
	runEvalCases(t, []evalCase{
		{"int eq", Int(5), OpEq, Int(5), true},
		{"int eq", Int(5), OpEq, Int(4), false},
		{"int ne", Int(5), OpNe, Int(4), true},
		{"int ne", Int(5), OpNe, Int(5), false},
		{"int lt", Int(5), OpLt, Int(6), true},
		{"int lt", Int(5), OpLt, Int(5), false},
		{"int le", Int(5), OpLe, Int(5), true},
		{"int le", Int(5), OpLe, Int(4), false},
		{"int gt", Int(5), OpGt, Int(4), true},
		{"int gt", Int(5), OpGt, Int(5), false},
		{"int ge", Int(5), OpGe, Int(5), true},
		{"int ge", Int(5), OpGe, Int(6), false},
		{"int negative", Int(-1), OpLt, Int(0), true},
		{"int extremes", Int(math.MinInt64), OpLt, Int(math.MaxInt64), true},
		{"int exists", Int(0), OpExists, Value{}, true},

		{"float eq", Float(2.5), OpEq, Float(2.5), true},
		{"float eq", Float(2.5), OpEq, Float(2.25), false},
		{"float ne", Float(2.5), OpNe, Float(2.25), true},
		{"float ne", Float(2.5), OpNe, Float(2.5), false},
		{"float lt", Float(2.5), OpLt, Float(2.75), true},
		{"float lt", Float(2.5), OpLt, Float(2.5), false},
		{"float le", Float(2.5), OpLe, Float(2.5), true},
		{"float le", Float(2.5), OpLe, Float(2.25), false},
		{"float gt", Float(2.5), OpGt, Float(2.25), true},
		{"float gt", Float(2.5), OpGt, Float(2.5), false},
		{"float ge", Float(2.5), OpGe, Float(2.5), true},
		{"float ge", Float(2.5), OpGe, Float(2.75), false},
		{"float exists", Float(0), OpExists, Value{}, true},

		// int and float compare numerically, both ways round.
		{"mixed", Int(3), OpEq, Float(3), true},
		{"mixed", Float(3), OpEq, Int(3), true},
		{"mixed", Int(3), OpNe, Float(3), false},
		{"mixed", Int(2), OpLt, Float(2.5), true},
		{"mixed", Int(3), OpLt, Float(2.5), false},
		{"mixed", Float(2.5), OpGt, Int(2), true},
		{"mixed", Float(2.5), OpLe, Int(2), false},
		{"mixed", Int(3), OpGe, Float(3), true},
		{"mixed", Int(3), OpGt, Float(2.9999999999999996), true},
		{"mixed", Int(-3), OpLt, Float(-2.5), true},
		{"mixed", Int(-2), OpGt, Float(-2.5), true},
		{"mixed", Float(-2.5), OpLt, Int(-2), true},
		{"mixed", Float(-2.5), OpGt, Int(-3), true},
		{"mixed", Float(0.5), OpGt, Int(0), true},
		{"mixed", Float(-0.5), OpLt, Int(0), true},

		// Exact comparison above 2^53, where float64(int) would round.
		{"exact", Int(9007199254740993), OpEq, Float(9007199254740992.0), false},
		{"exact", Int(9007199254740993), OpNe, Float(9007199254740992.0), true},
		{"exact", Int(9007199254740993), OpGt, Float(9007199254740992.0), true},
		{"exact", Float(9007199254740992.0), OpLt, Int(9007199254740993), true},
		{"exact", Float(9007199254740992.0), OpEq, Int(9007199254740992), true},
		{"exact", Int(9007199254740992), OpEq, Float(9007199254740992.0), true},

		// The ±2^63 boundaries: 2^63 is a float but not an int64; -2^63 is both.
		{"2^63", Int(math.MaxInt64), OpLt, Float(0x1p63), true},
		{"2^63", Int(math.MaxInt64), OpEq, Float(0x1p63), false},
		{"2^63", Int(math.MaxInt64), OpNe, Float(0x1p63), true},
		{"2^63", Float(0x1p63), OpGt, Int(math.MaxInt64), true},
		{"2^63", Int(math.MaxInt64), OpGt, Float(9223372036854774784.0), true}, // largest float < 2^63
		{"2^63", Int(9223372036854774784), OpEq, Float(9223372036854774784.0), true},
		{"-2^63", Int(math.MinInt64), OpEq, Float(-0x1p63), true},
		{"-2^63", Float(-0x1p63), OpEq, Int(math.MinInt64), true},
		{"-2^63", Int(math.MinInt64), OpGt, Float(-0x1p63), false},
		{"-2^63", Int(math.MinInt64), OpGe, Float(-0x1p63), true},
		{"-2^63", Int(math.MinInt64), OpGt, Float(math.Nextafter(-0x1p63, negInf)), true},
		{"-2^63", Int(math.MinInt64 + 1), OpGt, Float(-0x1p63), true},
		{"huge", Int(math.MaxInt64), OpLt, Float(math.MaxFloat64), true},
		{"huge", Int(math.MinInt64), OpGt, Float(-math.MaxFloat64), true},

		// Signed zeros are equal.
		{"-0", Float(negZ), OpEq, Int(0), true},
		{"-0", Float(negZ), OpEq, Float(0), true},
		{"-0", Float(negZ), OpLt, Float(0), false},
		{"-0", Int(0), OpEq, Float(negZ), true},
		{"-0", Float(0), OpGe, Float(negZ), true},

		// Infinities order beyond every finite number.
		{"inf", Float(posInf), OpGt, Int(math.MaxInt64), true},
		{"inf", Float(posInf), OpGt, Float(math.MaxFloat64), true},
		{"inf", Float(posInf), OpEq, Float(posInf), true},
		{"inf", Float(negInf), OpLt, Int(math.MinInt64), true},
		{"inf", Float(negInf), OpNe, Int(0), true},
		{"inf", Int(math.MaxInt64), OpLt, Float(posInf), true},
		{"inf", Int(math.MinInt64), OpGt, Float(negInf), true},

		// NaN is unordered: it satisfies != and nothing else but exists.
		{"nan", Float(nan), OpEq, Int(1), false},
		{"nan", Float(nan), OpNe, Int(1), true},
		{"nan", Float(nan), OpNe, Float(1), true},
		{"nan", Float(nan), OpLt, Int(1), false},
		{"nan", Float(nan), OpLe, Float(1), false},
		{"nan", Float(nan), OpGt, Int(1), false},
		{"nan", Float(nan), OpGe, Float(1), false},
		{"nan", Float(nan), OpEq, Float(nan), false},
		{"nan", Float(nan), OpNe, Float(nan), true},
		{"nan", Float(nan), OpExists, Value{}, true},
		{"nan", Int(1), OpNe, Float(nan), true},
		{"nan", Int(1), OpEq, Float(nan), false},
	})
}

func TestMatchesBoolsAndMismatches(t *testing.T) {
	runEvalCases(t, []evalCase{
		{"bool eq", Bool(true), OpEq, Bool(true), true},
		{"bool eq", Bool(true), OpEq, Bool(false), false},
		{"bool eq", Bool(false), OpEq, Bool(false), true},
		{"bool ne", Bool(true), OpNe, Bool(false), true},
		{"bool ne", Bool(true), OpNe, Bool(true), false},
		{"bool exists", Bool(false), OpExists, Value{}, true},
		// Ordering does not apply to booleans (invalid constraints, still evaluated).
		{"bool order", Bool(false), OpLt, Bool(true), false},
		{"bool order", Bool(true), OpGe, Bool(true), false},

		// Type mismatches satisfy nothing, != included.
		{"mismatch", Int(5), OpEq, String("5"), false},
		{"mismatch", Int(5), OpNe, String("5"), false},
		{"mismatch", String("5"), OpEq, Int(5), false},
		{"mismatch", String("5"), OpNe, Int(5), false},
		{"mismatch", String("5"), OpLt, Float(9), false},
		{"mismatch", Bool(true), OpEq, Int(1), false},
		{"mismatch", Bool(true), OpNe, Int(1), false},
		{"mismatch", Int(1), OpEq, Bool(true), false},
		{"mismatch", Float(1), OpNe, Bool(false), false},
		{"mismatch", String("true"), OpEq, Bool(true), false},
		{"mismatch", Bool(true), OpNe, String("true"), false},
		{"mismatch", Int(5), OpPrefix, String("5"), false},
		{"mismatch", Bool(true), OpContains, String("t"), false},
		// String operators with a non-string value are invalid and never match.
		{"invalid", Int(5), OpPrefix, Int(5), false},
		{"invalid", Int(5), OpInvalid, Int(5), false},
		{"invalid", String("a"), OpInvalid, String("a"), false},
	})
}

// A missing attribute satisfies no constraint, not even != or exists.
func TestMatchesMissingAttribute(t *testing.T) {
	values := []Value{String("a"), Int(1), Float(1.5), Bool(true), Float(nan)}
	cases := []evalCase{{"missing", absent, OpExists, Value{}, false}}
	for op := OpEq; op < OpExists; op++ {
		for _, v := range values {
			if op.AppliesTo(v.Kind()) {
				cases = append(cases, evalCase{"missing", absent, op, v, false})
			}
		}
	}
	require.Len(t, cases, 2*5+4*4+3+1)
	runEvalCases(t, cases)

	// The zero Message has no attributes at all.
	for _, c := range []Constraint{{Name: "x", Op: OpExists}, {Name: "x", Op: OpNe, Value: Int(0)}} {
		assert.False(t, c.MatchesMessage(Message{}), "%s", c)
	}
	// An invalid attribute value cannot be in a message, but Matches must
	// still not report it as existing.
	assert.False(t, Constraint{Name: "x", Op: OpExists}.Matches(Value{}))
}

func TestEmptyFilterAndPredicate(t *testing.T) {
	msgs := []Message{{}, MessageFrom(map[string]Value{"a": Int(1)})}
	for _, m := range msgs {
		assert.True(t, Filter{}.Matches(m), "empty filter matches every message")
		assert.True(t, Filter(nil).Matches(m))
		assert.False(t, Predicate{}.Matches(m), "empty predicate matches none")
		assert.False(t, Predicate(nil).Matches(m))
		assert.True(t, Predicate{{}}.Matches(m), "a predicate with an empty filter matches all")
		assert.True(t, Predicate{{{Name: "zz", Op: OpExists}}, {}}.Matches(m))
	}
}

// Carzaniga09 §2.1: a predicate is a disjunction of conjunctions of elementary
// constraints; the paper's example predicate matches its example message.
func TestPaperExample(t *testing.T) {
	news := MessageFrom(map[string]Value{
		"agency":   String("AP"),
		"date":     String("29/08/2008"),
		"title":    String("Italian prime minister resigns"),
		"keywords": String("politics Italy"),
		"priority": Int(-1),
		"url":      String("http:.."),
	})
	p := MustParse(`agency = "AP" && priority = 2 || keywords contains "Italy"`)
	assert.True(t, p.Matches(news))
	assert.False(t, p[0].Matches(news), "priority is -1, not 2")
	assert.True(t, p[1].Matches(news))

	design := MustParse(`agency = "AP" && priority = 2 || keywords contains "Italy" || price > 20.5 && stock prefix "XY"`)
	for _, tc := range []struct {
		attrs map[string]Value
		want  bool
	}{
		{map[string]Value{"agency": String("AP"), "priority": Int(2)}, true},
		{map[string]Value{"agency": String("AP"), "priority": Float(2)}, true},
		{map[string]Value{"agency": String("AP"), "priority": Int(3)}, false},
		{map[string]Value{"agency": String("AP")}, false},
		{map[string]Value{"keywords": String("Italy")}, true},
		{map[string]Value{"price": Int(21), "stock": String("XYZ")}, true},
		{map[string]Value{"price": Float(20.5), "stock": String("XYZ")}, false},
		{map[string]Value{"price": Int(21), "stock": String("AXY")}, false},
		{map[string]Value{"price": String("21"), "stock": String("XY")}, false},
		{map[string]Value{}, false},
	} {
		m := MessageFrom(tc.attrs)
		assert.Equal(t, tc.want, design.Matches(m), "%s", m)
	}
}

// refCompare is an independent reference for numeric comparison: big.Float
// holds every int64 and float64 exactly.
func refCompare(a, b Value) (int, bool) {
	toBig := func(v Value) *big.Float {
		if v.Kind() == KindInt {
			return new(big.Float).SetInt64(v.Int())
		}
		return new(big.Float).SetFloat64(v.Float())
	}
	if (a.Kind() == KindFloat && math.IsNaN(a.Float())) || (b.Kind() == KindFloat && math.IsNaN(b.Float())) {
		return 0, false
	}
	return toBig(a).Cmp(toBig(b)), true
}

// refMatches is the evaluation semantics of doc.go written as plainly as
// possible, over a map rather than a Message.
func refMatches(c Constraint, attrs map[string]Value) bool {
	v, ok := attrs[c.Name]
	if !ok {
		return false
	}
	if c.Op == OpExists {
		return true
	}
	order := func(cmp int) bool {
		switch c.Op {
		case OpEq:
			return cmp == 0
		case OpNe:
			return cmp != 0
		case OpLt:
			return cmp < 0
		case OpLe:
			return cmp <= 0
		case OpGt:
			return cmp > 0
		case OpGe:
			return cmp >= 0
		}
		return false
	}
	switch vk, ck := v.Kind(), c.Value.Kind(); {
	case vk == KindString && ck == KindString:
		switch c.Op {
		case OpPrefix:
			return strings.HasPrefix(v.Str(), c.Value.Str())
		case OpSuffix:
			return strings.HasSuffix(v.Str(), c.Value.Str())
		case OpContains:
			return strings.Contains(v.Str(), c.Value.Str())
		}
		return order(strings.Compare(v.Str(), c.Value.Str()))
	case vk.IsNumber() && ck.IsNumber():
		cmp, ok := refCompare(v, c.Value)
		if !ok {
			return c.Op == OpNe
		}
		return order(cmp)
	case vk == KindBool && ck == KindBool:
		switch c.Op {
		case OpEq:
			return v.Bool() == c.Value.Bool()
		case OpNe:
			return v.Bool() != c.Value.Bool()
		}
	}
	return false
}

// interestingValues is a pool in which collisions (equal numbers of
// different kinds, prefixes, boundaries) are frequent.
func interestingValues() []Value {
	vs := []Value{
		String(""), String("a"), String("ab"), String("abc"), String("b"), String("B"), String("é"), String("\xff"),
		Bool(true), Bool(false),
		Float(nan), Float(posInf), Float(negInf), Float(negZ), Float(0x1p63), Float(-0x1p63),
		Float(9007199254740992), Float(9223372036854774784), Float(math.SmallestNonzeroFloat64),
		Float(math.MaxFloat64), Float(-math.MaxFloat64),
		Int(math.MaxInt64), Int(math.MinInt64), Int(math.MinInt64 + 1), Int(9007199254740993), Int(9007199254740992),
	}
	for i := int64(-3); i <= 3; i++ {
		vs = append(vs, Int(i), Float(float64(i)), Float(float64(i)+0.5))
	}
	return vs
}

// Property: Predicate.Matches agrees with the plain reference on random
// messages and predicates.
func TestMatchesAgainstReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	pool := interestingValues()
	names := []string{"a", "b", "c", "d"}
	pick := func() Value { return pool[rng.IntN(len(pool))] }
	for iter := 0; iter < 20000; iter++ {
		attrs := map[string]Value{}
		for _, n := range names {
			if rng.IntN(3) > 0 {
				attrs[n] = pick()
			}
		}
		m := MessageFrom(attrs)
		var p Predicate
		for range rng.IntN(3) {
			var f Filter
			for range rng.IntN(3) + 1 {
				c := Constraint{Name: names[rng.IntN(len(names))], Op: Op(1 + rng.IntN(int(OpExists)))}
				if c.Op != OpExists {
					c.Value = pick()
				}
				f = append(f, c)
			}
			p = append(p, f)
		}
		want := false
		for _, f := range p {
			all := true
			for _, c := range f {
				all = all && refMatches(c, attrs)
			}
			want = want || all
		}
		require.Equal(t, want, p.Matches(m), "predicate %s on message %s", p, m)
	}
}

func TestConstraintValidate(t *testing.T) {
	for _, tc := range []struct {
		c       Constraint
		wantErr string // "" for valid
	}{
		{Constraint{"x", OpEq, String("a")}, ""},
		{Constraint{"x", OpEq, Int(1)}, ""},
		{Constraint{"x", OpEq, Float(1)}, ""},
		{Constraint{"x", OpEq, Bool(true)}, ""},
		{Constraint{"x", OpNe, Bool(false)}, ""},
		{Constraint{"x", OpLt, String("a")}, ""},
		{Constraint{"x", OpGe, Float(-0.5)}, ""},
		{Constraint{"x", OpPrefix, String("")}, ""},
		{Constraint{"x", OpSuffix, String("a")}, ""},
		{Constraint{"x", OpContains, String("a")}, ""},
		{Constraint{"x", OpExists, Value{}}, ""},
		{Constraint{"", OpEq, Int(1)}, "empty attribute name"},
		{Constraint{"x", OpExists, Int(1)}, "exists takes no value"},
		{Constraint{"x", OpEq, Value{}}, "operator = does not apply to invalid values"},
		{Constraint{"x", OpLt, Bool(true)}, "operator < does not apply to bool values"},
		{Constraint{"x", OpPrefix, Int(3)}, "operator prefix does not apply to int values"},
		{Constraint{"x", OpContains, Float(3)}, "operator contains does not apply to float values"},
		{Constraint{"x", OpInvalid, Int(3)}, "does not apply"},
		{Constraint{"x", Op(200), Int(3)}, "Op(200)"},
		{Constraint{"x", OpEq, Float(nan)}, "must be finite"},
		{Constraint{"x", OpLt, Float(posInf)}, "must be finite"},
		{Constraint{"x", OpGt, Float(negInf)}, "must be finite"},
	} {
		err := tc.c.Validate()
		if tc.wantErr == "" {
			assert.NoError(t, err, "%s", tc.c)
		} else if assert.Error(t, err, "%s", tc.c) {
			assert.Contains(t, err.Error(), tc.wantErr)
		}
	}
}

func TestPredicateValidate(t *testing.T) {
	ok := Constraint{"x", OpExists, Value{}}
	bad := Constraint{"x", OpLt, Bool(true)}
	require.NoError(t, Predicate{{ok}, {ok, ok}}.Validate())
	for _, tc := range []struct {
		p       Predicate
		wantErr string
	}{
		{nil, "no filters"},
		{Predicate{}, "no filters"},
		{Predicate{{ok}, {}}, "filter 2 has no constraints"},
		{Predicate{{ok}, {ok, bad}}, "filter 2: constraint x < true: operator < does not apply to bool values"},
	} {
		err := tc.p.Validate()
		if assert.Error(t, err, "%#v", tc.p) {
			assert.Contains(t, err.Error(), tc.wantErr)
		}
	}
}

func TestOpAndKindStrings(t *testing.T) {
	want := map[Op]string{
		OpInvalid: "<invalid>", OpEq: "=", OpNe: "!=", OpLt: "<", OpLe: "<=", OpGt: ">", OpGe: ">=",
		OpPrefix: "prefix", OpSuffix: "suffix", OpContains: "contains", OpExists: "exists", Op(11): "Op(11)",
	}
	for op, s := range want {
		assert.Equal(t, s, op.String())
	}
	for k, s := range map[Kind]string{KindInvalid: "invalid", KindString: "string", KindInt: "int", KindFloat: "float", KindBool: "bool", Kind(9): "invalid"} {
		assert.Equal(t, s, k.String())
	}
}

// The wire values of Op and Kind are exchanged between brokers.
func TestWireNumbersAreStable(t *testing.T) {
	assert.Equal(t, []uint8{0, 1, 2, 3, 4}, []uint8{uint8(KindInvalid), uint8(KindString), uint8(KindInt), uint8(KindFloat), uint8(KindBool)})
	assert.Equal(t, []uint8{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, []uint8{
		uint8(OpInvalid), uint8(OpEq), uint8(OpNe), uint8(OpLt), uint8(OpLe), uint8(OpGt), uint8(OpGe),
		uint8(OpPrefix), uint8(OpSuffix), uint8(OpContains), uint8(OpExists),
	})
}

func TestOpAppliesTo(t *testing.T) {
	kinds := []Kind{KindInvalid, KindString, KindInt, KindFloat, KindBool}
	want := map[Op][]bool{ // indexed like kinds
		OpInvalid:  {false, false, false, false, false},
		OpEq:       {false, true, true, true, true},
		OpNe:       {false, true, true, true, true},
		OpLt:       {false, true, true, true, false},
		OpLe:       {false, true, true, true, false},
		OpGt:       {false, true, true, true, false},
		OpGe:       {false, true, true, true, false},
		OpPrefix:   {false, true, false, false, false},
		OpSuffix:   {false, true, false, false, false},
		OpContains: {false, true, false, false, false},
		OpExists:   {true, false, false, false, false},
	}
	for op, row := range want {
		for i, k := range kinds {
			assert.Equal(t, row[i], op.AppliesTo(k), "%s on %s", op, k)
		}
	}
}
