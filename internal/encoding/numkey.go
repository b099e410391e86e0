package encoding

import (
	"math"
	"math/bits"

	"github.com/dripmesh/drip/internal/content"
)

// The numeric order key of cat-v2 (doc.go, "Fine categories"). A number
// maps to a 14-bit key: a sign bit, a 7-bit exponent clamped to [-64, 63],
// and the 6 mantissa bits after the leading one, truncated. The key is a
// monotone, non-decreasing function of the number's exact value, for
// int64 and float64 alike: a ≤ b implies key(a) ≤ key(b) whatever their
// kinds, because both are computed exactly (ints from their bits, never
// through float64) and truncation and clamping are monotone. A range
// constraint therefore maps to an interval of keys, and a trie over the
// key's bits turns that interval into a few nodes. Buckets are 1/64 of an
// octave: ints are exact up to 64, and every value within 1.6% of its
// magnitude. Exchanged between brokers: do not change.
const (
	keyMantBits = 6
	keyExpBits  = 7
	keyBits     = 1 + keyExpBits + keyMantBits // 14 trie levels
	keyExpBias  = 64                           // exponents -64..63
	keyMax      = 1<<keyBits - 1
	// codeBits is the magnitude part of the key: exponent and mantissa.
	codeBits = keyExpBits + keyMantBits
	codeMax  = 1<<codeBits - 1
)

// numKey returns the order key of a number, and false for NaN, which
// satisfies no order constraint and so needs no key, and for non-numbers.
func numKey(v content.Value) (uint16, bool) {
	var neg bool
	var code uint32
	switch v.Kind() {
	case content.KindInt:
		i := v.Int()
		neg = i < 0
		mag := uint64(i)
		if neg {
			mag = -mag // two's complement: MinInt64 gives 2^63
		}
		code = magnitudeCode(mag)
	case content.KindFloat:
		f := v.Float()
		if math.IsNaN(f) {
			return 0, false
		}
		neg = f < 0
		code = floatCode(math.Abs(f))
	default:
		return 0, false
	}
	if neg {
		// Mirror: a larger magnitude is a smaller number. 0 is positive,
		// so every negative key is below every non-negative one.
		return uint16(^code & codeMax), true
	}
	return uint16(1<<codeBits | code), true
}

// magnitudeCode is the exponent and mantissa code of an integer magnitude.
func magnitudeCode(mag uint64) uint32 {
	if mag == 0 {
		return 0
	}
	e := bits.Len64(mag) - 1 // 0..63: never clamped
	mant := (mag << (63 - e)) >> (63 - keyMantBits) & (1<<keyMantBits - 1)
	return uint32(e+keyExpBias)<<keyMantBits | uint32(mant)
}

// floatCode is the exponent and mantissa code of a non-negative float
// (possibly +Inf).
func floatCode(a float64) uint32 {
	if a == 0 {
		return 0
	}
	b := math.Float64bits(a)
	e := int(b>>52&0x7ff) - 1023 // subnormals (-1023) are below -64 anyway
	switch {
	case e < -keyExpBias:
		// Below 2^-64: the same bucket as 0, which keeps the order.
		return 0
	case e >= keyExpBias:
		// 2^64 and beyond, +Inf included: the top bucket.
		return codeMax
	}
	mant := b >> (52 - keyMantBits) & (1<<keyMantBits - 1)
	return uint32(e+keyExpBias)<<keyMantBits | uint32(mant)
}

// startsBucket reports whether v ≥ 0 is the least number with its key,
// so that x < v excludes v's whole bucket; -v then is the greatest number
// of its (mirrored) bucket, and x > -v excludes it. Every int in [0, 127]
// starts its bucket, which makes "<" exact on small ints.
func startsBucket(v content.Value) bool {
	switch v.Kind() {
	case content.KindInt:
		i := v.Int()
		if i < 0 {
			return false
		}
		e := bits.Len64(uint64(i)) - 1
		return e <= keyMantBits || uint64(i)&(1<<(e-keyMantBits)-1) == 0
	case content.KindFloat:
		f := v.Float()
		if f == 0 {
			return true
		}
		if !(f > 0) {
			return false // negative or NaN
		}
		b := math.Float64bits(f)
		e := int(b>>52&0x7ff) - 1023
		// Code 0 is 0's bucket, whose least value is 0 itself.
		return e >= -keyExpBias && e < keyExpBias && b&(1<<(52-keyMantBits)-1) == 0 && floatCode(f) != 0
	}
	return false
}

// negate returns -v for a number, and false when -v is not one (MinInt64
// has no int negation, so it becomes the float 2^63, which is exact).
func negate(v content.Value) content.Value {
	if v.Kind() == content.KindInt {
		if i := v.Int(); i != math.MinInt64 {
			return content.Int(-i)
		}
		return content.Float(0x1p63)
	}
	return content.Float(-v.Float())
}

// node is one node of the key trie: the keys whose top level bits are
// prefix. Level 0 is the root, every key.
type node struct {
	level  uint8
	prefix uint16
}

// keyNode is the level-l node that holds key k.
func keyNode(k uint16, l int) node { return node{uint8(l), k >> (keyBits - l)} }

// parent is the node one level up; the root's parent is the root.
func (n node) parent() node {
	if n.level == 0 {
		return n
	}
	return node{n.level - 1, n.prefix >> 1}
}

// coverKeys appends to dst the fewest trie nodes at levels ≤ depth whose
// union holds [lo, hi] (inclusive, lo ≤ hi): the aligned dyadic blocks of
// [lo, hi] at depth, where a block at depth that holds keys outside the
// interval is included whole. The result contains the root alone if the
// cover is the whole key space.
func coverKeys(dst []node, lo, hi uint16, depth int) []node {
	shift := keyBits - depth
	a, b := uint32(lo)>>shift, uint32(hi)>>shift
	for a <= b {
		// The largest aligned block starting at a that ends by b.
		j := bits.TrailingZeros32(a)
		if a == 0 || j > depth {
			j = depth
		}
		for a+(1<<j)-1 > b {
			j--
		}
		dst = append(dst, node{uint8(depth - j), uint16(a >> j)})
		a += 1 << j
	}
	return dst
}

// coverRange returns the cover of [lo, hi] with at most limit nodes, as
// fine as that allows: the deepest depth whose cover fits. It returns nil
// when only the root fits, which says nothing beyond existence.
func coverRange(lo, hi uint16, limit int) []node {
	var buf [2 * keyBits]node
	for depth := keyBits; depth > 0; depth-- {
		c := coverKeys(buf[:0], lo, hi, depth)
		if len(c) <= limit {
			if len(c) == 1 && c[0].level == 0 {
				return nil
			}
			return append([]node(nil), c...)
		}
	}
	return nil
}
