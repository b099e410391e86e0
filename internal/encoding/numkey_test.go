package encoding

import (
	"cmp"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/dripmesh/drip/internal/content"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestNumKeyValues(t *testing.T) {
	pos := func(e, mant int) uint16 { return uint16(1<<codeBits | (e+keyExpBias)<<keyMantBits | mant) }
	neg := func(e, mant int) uint16 { return uint16(^((e+keyExpBias)<<keyMantBits | mant) & codeMax) }
	for _, tc := range []struct {
		v    content.Value
		want uint16
	}{
		{content.Int(0), 1 << codeBits},
		{content.Float(0), 1 << codeBits},
		{content.Float(math.Copysign(0, -1)), 1 << codeBits},
		{content.Float(0x1p-70), 1 << codeBits}, // below 2^-64: with 0
		{content.Float(-0x1p-70), codeMax},      // just below 0
		{content.Int(1), pos(0, 0)},
		{content.Float(1), pos(0, 0)},
		{content.Int(-1), neg(0, 0)},
		{content.Int(5), pos(2, 0b010000)},
		{content.Float(5.5), pos(2, 0b011000)},
		{content.Int(100), pos(6, 0b100100)},
		{content.Int(127), pos(6, 0b111111)},
		{content.Int(math.MaxInt64), pos(62, 0b111111)},
		{content.Int(math.MinInt64), neg(63, 0)},
		{content.Float(-0x1p63), neg(63, 0)},
		{content.Float(0x1p64), keyMax},
		{content.Float(math.Inf(1)), keyMax},
		{content.Float(math.Inf(-1)), 0},
		{content.Float(math.MaxFloat64), keyMax},
		{content.Float(0x1p-64), pos(-64, 0)},
	} {
		got, ok := numKey(tc.v)
		require.True(t, ok, "%#v", tc.v)
		assert.Equal(t, tc.want, got, "%#v: got %014b, want %014b", tc.v, got, tc.want)
	}
	for _, v := range []content.Value{content.Float(math.NaN()), content.String("1"), content.Bool(true), {}} {
		_, ok := numKey(v)
		assert.False(t, ok, "%#v has no key", v)
	}
}

// edgeNumbers are the values where an order key goes wrong first: around
// 0, ±2^53 (where float64 stops holding every int), ±2^63, bucket
// boundaries, and the extremes of both kinds.
func edgeNumbers() []content.Value {
	var out []content.Value
	for _, f := range []float64{0, math.Copysign(0, -1), 0.5, 1, 1.015625, 1.0156249, 2, 3, 64, 65, 100, 1e9, 0x1p53, 0x1p53 + 2,
		0x1p63, 0x1p64, 0x1p-64, 0x1p-65, 5e-324, math.MaxFloat64, math.Inf(1)} {
		out = append(out, content.Float(f), content.Float(-f))
	}
	for _, i := range []int64{0, 1, 2, 63, 64, 65, 100, 1<<53 - 1, 1 << 53, 1<<53 + 1, math.MaxInt64 - 1, math.MaxInt64} {
		out = append(out, content.Int(i), content.Int(-i))
	}
	return append(out, content.Int(math.MinInt64))
}

func randomNumber(r *rand.Rand) content.Value {
	switch r.IntN(6) {
	case 0:
		return content.Int(int64(r.Uint64()))
	case 1:
		return content.Int(r.Int64N(300) - 150)
	case 2:
		return content.Float(math.Float64frombits(r.Uint64()))
	case 3:
		return content.Float(float64(r.IntN(4000)-2000) / 16)
	case 4:
		// An int and a float that differ by a little around 2^53 and 2^63.
		base := []float64{0x1p53, 0x1p62, 0x1p63}[r.IntN(3)]
		if r.IntN(2) == 0 {
			return content.Int(int64(base/2) + r.Int64N(5) - 2)
		}
		return content.Float(base/2 + float64(r.IntN(5)-2))
	default:
		e := edgeNumbers()
		return e[r.IntN(len(e))]
	}
}

// The key is monotone in the exact value, across kinds: a < b ⇒ key(a) ≤
// key(b), a = b ⇒ key(a) = key(b). A range then covers every value it
// admits (no false negatives).
func TestNumKeyIsMonotone(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	check := func(a, b content.Value) {
		c, ok := content.CompareNumbers(a, b)
		ka, oka := numKey(a)
		kb, okb := numKey(b)
		if !ok {
			require.False(t, oka && okb, "%#v and %#v are unordered but both have keys", a, b)
			return
		}
		require.True(t, oka && okb)
		switch {
		case c < 0:
			require.LessOrEqual(t, ka, kb, "%#v < %#v", a, b)
		case c == 0:
			require.Equal(t, ka, kb, "%#v = %#v", a, b)
		default:
			require.GreaterOrEqual(t, ka, kb, "%#v > %#v", a, b)
		}
	}
	edges := edgeNumbers()
	for _, a := range edges {
		for _, b := range edges {
			check(a, b)
		}
	}
	for range 200000 {
		check(randomNumber(r), randomNumber(r))
	}
	// And it does separate: values in different 1/64-octave buckets get
	// different keys.
	ka, _ := numKey(content.Int(64))
	kb, _ := numKey(content.Int(65))
	assert.Less(t, ka, kb)
}

func FuzzNumKey(f *testing.F) {
	f.Add(uint64(0), false, uint64(1), true)
	f.Add(math.Float64bits(0x1p53), true, uint64(1<<53+1), false)
	f.Fuzz(func(t *testing.T, x uint64, xf bool, y uint64, yf bool) {
		val := func(bits uint64, isFloat bool) content.Value {
			if isFloat {
				return content.Float(math.Float64frombits(bits))
			}
			return content.Int(int64(bits))
		}
		a, b := val(x, xf), val(y, yf)
		c, ok := content.CompareNumbers(a, b)
		ka, oka := numKey(a)
		kb, okb := numKey(b)
		if !ok || !oka || !okb {
			return
		}
		require.LessOrEqual(t, ka, uint16(keyMax))
		if c <= 0 {
			require.LessOrEqual(t, ka, kb, "%#v <= %#v", a, b)
		}
		if c >= 0 {
			require.GreaterOrEqual(t, ka, kb, "%#v >= %#v", a, b)
		}
	})
}

// nodeKeys is the interval of keys a node holds.
func nodeKeys(n node) (lo, hi uint32) {
	shift := keyBits - int(n.level)
	return uint32(n.prefix) << shift, uint32(n.prefix)<<shift | (1<<shift - 1)
}

// covers reports whether nodes hold every key of [lo, hi], and whether
// they are disjoint; it returns the number of keys they hold.
func covers(nodes []node, lo, hi uint16) (all, disjoint bool, total int) {
	type span struct{ a, b uint32 }
	spans := make([]span, len(nodes))
	for i, n := range nodes {
		a, b := nodeKeys(n)
		spans[i] = span{a, b}
		total += int(b - a + 1)
	}
	slices.SortFunc(spans, func(x, y span) int { return cmp.Compare(x.a, y.a) })
	disjoint = true
	next := uint32(lo) // the lowest key of [lo, hi] not yet held
	for i, s := range spans {
		if i > 0 && s.a <= spans[i-1].b {
			disjoint = false
		}
		if s.a <= next && s.b >= next {
			next = s.b + 1
		}
	}
	return next > uint32(hi), disjoint, total
}

// coverKeys against a reference: the nodes are disjoint, hold all of [lo,
// hi], and exactly [lo, hi] at full depth; coverRange keeps to its limit.
func TestCoverKeys(t *testing.T) {
	r := rand.New(rand.NewPCG(23, 24))
	for range 20000 {
		lo, hi := uint16(r.IntN(keyMax+1)), uint16(r.IntN(keyMax+1))
		if r.IntN(4) == 0 {
			lo = 0
		}
		if r.IntN(4) == 0 {
			hi = keyMax
		}
		if lo > hi {
			lo, hi = hi, lo
		}
		depth := 1 + r.IntN(keyBits)
		c := coverKeys(nil, lo, hi, depth)
		require.LessOrEqual(t, len(c), 2*depth)
		for _, n := range c {
			require.LessOrEqual(t, int(n.level), depth)
		}
		all, disjoint, total := covers(c, lo, hi)
		require.True(t, all, "[%d, %d] at depth %d: %v", lo, hi, depth, c)
		require.True(t, disjoint, "[%d, %d] at depth %d: %v", lo, hi, depth, c)
		if depth == keyBits {
			require.Equal(t, int(hi-lo)+1, total, "at full depth the cover is exact")
		}
		limit := 1 + r.IntN(16)
		if cr := coverRange(lo, hi, limit); cr != nil {
			require.LessOrEqual(t, len(cr), limit)
			all, _, _ := covers(cr, lo, hi)
			require.True(t, all, "coverRange(%d, %d, %d) = %v", lo, hi, limit, cr)
		}
	}
	assert.Nil(t, coverRange(0, keyMax, 16), "the whole key space says nothing")
	assert.Equal(t, []node{{1, 0}, {14, 1 << 13}}, coverRange(0, 1<<13, 16), "x <= 0: the negatives and the bucket of 0")
}

// startsBucket is what lets a strict range leave out its bound's bucket: if
// it holds for v, every number below v has a smaller key, and (v ≠ 0) every
// number above -v a larger one than -v.
func TestStartsBucket(t *testing.T) {
	r := rand.New(rand.NewPCG(25, 26))
	starts := 0
	for _, v := range append(edgeNumbers(), content.Int(37), content.Float(1.5), content.Int(10000), content.Int(10048)) {
		if !startsBucket(v) {
			continue
		}
		starts++
		kv, _ := numKey(v)
		kn, _ := numKey(negate(v))
		for range 20000 {
			w := randomNumber(r)
			if r.IntN(2) == 0 {
				// Near v, where it matters.
				w = content.Float(v.Float() * (1 + (r.Float64()-0.5)/16))
			}
			kw, ok := numKey(w)
			if !ok {
				continue
			}
			if c, _ := content.CompareNumbers(w, v); c < 0 {
				require.Less(t, kw, kv, "%#v < %#v", w, v)
			}
			if c, _ := content.CompareNumbers(w, negate(v)); c > 0 && v.Float() != 0 {
				require.Greater(t, kw, kn, "%#v > %#v", w, negate(v))
			}
		}
	}
	assert.Greater(t, starts, 20)
	assert.True(t, startsBucket(content.Int(100)), "every int below 128")
	assert.False(t, startsBucket(content.Int(10001)))
	assert.False(t, startsBucket(content.Float(1.01)))
	assert.False(t, startsBucket(content.Float(-2)), "negative numbers end buckets")
	assert.False(t, startsBucket(content.Float(math.NaN())))
	assert.False(t, startsBucket(content.Float(0x1p70)), "clamped")
	assert.Equal(t, content.Float(0x1p63), negate(content.Int(math.MinInt64)))
}
