package content

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestValueAccessors(t *testing.T) {
	for _, tc := range []struct {
		v     Value
		kind  Kind
		str   string
		i     int64
		f     float64
		b     bool
		valid bool
	}{
		{Value{}, KindInvalid, "", 0, 0, false, false},
		{String("hi"), KindString, "hi", 0, 0, false, true},
		{String(""), KindString, "", 0, 0, false, true},
		{Int(-7), KindInt, "", -7, -7, false, true},
		{Int(math.MaxInt64), KindInt, "", math.MaxInt64, 0x1p63, false, true}, // Float rounds
		{Float(2.5), KindFloat, "", 0, 2.5, false, true},
		{Bool(true), KindBool, "", 0, 0, true, true},
		{Bool(false), KindBool, "", 0, 0, false, true},
	} {
		assert.Equal(t, tc.kind, tc.v.Kind(), "%#v", tc.v)
		assert.Equal(t, tc.valid, tc.v.IsValid(), "%#v", tc.v)
		assert.Equal(t, tc.str, tc.v.Str(), "%#v", tc.v)
		assert.Equal(t, tc.i, tc.v.Int(), "%#v", tc.v)
		assert.Equal(t, tc.f, tc.v.Float(), "%#v", tc.v)
		assert.Equal(t, tc.b, tc.v.Bool(), "%#v", tc.v)
	}
	assert.True(t, math.Signbit(Float(negZ).Float()), "Float keeps the sign of zero")
	assert.True(t, math.IsNaN(Float(nan).Float()))
}

func TestValueEqualIsIdentity(t *testing.T) {
	assert.True(t, Int(3).Equal(Int(3)))
	assert.False(t, Int(3).Equal(Float(3)), "Equal is not the = operator")
	assert.False(t, Float(0).Equal(Float(negZ)), "different bits")
	assert.True(t, Float(nan).Equal(Float(nan)), "same NaN bits")
	assert.True(t, String("a").Equal(String("a")))
	assert.False(t, String("1").Equal(Int(1)))
	assert.False(t, Bool(false).Equal(Int(0)))
	assert.False(t, Bool(false).Equal(Value{}))
	assert.True(t, Value{}.Equal(Value{}))
}

func TestValueLiteral(t *testing.T) {
	for _, tc := range []struct {
		v    Value
		want string
	}{
		{String(`a "q" \ b`), `"a \"q\" \\ b"`},
		{Int(0), "0"},
		{Int(-42), "-42"},
		{Int(math.MinInt64), "-9223372036854775808"},
		{Int(math.MaxInt64), "9223372036854775807"},
		{Float(3), "3.0"},
		{Float(-3), "-3.0"},
		{Float(negZ), "-0.0"},
		{Float(0), "0.0"},
		{Float(20.5), "20.5"},
		{Float(1e21), "1e+21"},
		{Float(1e20), "1e+20"},
		{Float(123456789), "1.23456789e+08"},
		{Float(1e-7), "1e-07"},
		{Float(0.1), "0.1"},
		{Float(math.SmallestNonzeroFloat64), "5e-324"},
		{Float(math.MaxFloat64), "1.7976931348623157e+308"},
		{Float(nan), "NaN"},
		{Float(posInf), "+Inf"},
		{Float(negInf), "-Inf"},
		{Bool(true), "true"},
		{Bool(false), "false"},
		{Value{}, "<invalid>"},
	} {
		assert.Equal(t, tc.want, tc.v.Literal())
	}
	assert.Equal(t, "float(3.0)", Float(3).GoString())
	assert.Equal(t, `string("x")`, String("x").GoString())
}

// Every finite float's literal parses back to the same bits and kind.
func TestFloatLiteralRoundTrips(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 20000; i++ {
		f := math.Float64frombits(rng.Uint64())
		if math.IsNaN(f) || math.IsInf(f, 0) {
			continue
		}
		p, err := Parse("x = " + Float(f).Literal())
		require.NoError(t, err, "%v", f)
		require.True(t, p[0][0].Value.Equal(Float(f)), "%v parsed as %#v", f, p[0][0].Value)
	}
}

// Carzaniga09 §3: an equality constraint maps to its equality category, so two
// numbers have the same canonical text exactly when they are "=".
func TestCanonicalNumber(t *testing.T) {
	for _, tc := range []struct {
		v    Value
		want string
	}{
		{Int(3), "3"},
		{Float(3), "3"},
		{Float(negZ), "0"},
		{Float(0), "0"},
		{Float(2.5), "2.5"},
		{Int(math.MinInt64), "-9223372036854775808"},
		{Float(-0x1p63), "-9223372036854775808"},
		{Float(0x1p63), "9.223372036854776e+18"},
		{Float(9007199254740992), "9007199254740992"},
		{Int(9007199254740993), "9007199254740993"},
		{Float(1e300), "1e+300"},
		{Float(1e-300), "1e-300"},
		{Float(nan), "NaN"},
		{Float(posInf), "+Inf"},
		{String("3"), ""},
		{Bool(true), ""},
	} {
		assert.Equal(t, tc.want, CanonicalNumber(tc.v), "%#v", tc.v)
	}

	rng := rand.New(rand.NewPCG(5, 6))
	pool := interestingValues()
	randomNumber := func() Value {
		switch rng.IntN(4) {
		case 0:
			return Int(int64(rng.Uint64()))
		case 1:
			return Float(math.Float64frombits(rng.Uint64()))
		case 2:
			return Float(float64(rng.IntN(1000) - 500)) // integral floats collide with ints
		default:
			return pool[rng.IntN(len(pool))]
		}
	}
	for i := 0; i < 50000; i++ {
		a, b := randomNumber(), randomNumber()
		if !a.Kind().IsNumber() || !b.Kind().IsNumber() {
			continue
		}
		cmp, ok := refCompare(a, b)
		if !ok {
			continue // NaN is "=" to nothing; its text is documented
		}
		require.Equal(t, cmp == 0, CanonicalNumber(a) == CanonicalNumber(b), "%#v vs %#v: %q %q", a, b, CanonicalNumber(a), CanonicalNumber(b))
	}
}

func TestCompareNumbersRejectsNonNumbers(t *testing.T) {
	_, ok := CompareNumbers(String("1"), Int(1))
	assert.False(t, ok)
	_, ok = CompareNumbers(Int(1), Float(math.NaN()))
	assert.False(t, ok)
	c, ok := CompareNumbers(Int(9007199254740993), Float(9007199254740992))
	assert.True(t, ok)
	assert.Equal(t, 1, c)
}
