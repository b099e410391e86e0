package content

import (
	"cmp"
	"fmt"
	"math"
	"strconv"
)

// Kind is the type of an attribute or constraint value.
type Kind uint8

// The value kinds. Their numeric values appear in wire formats: do not change.
const (
	KindInvalid Kind = iota
	KindString
	KindInt
	KindFloat
	KindBool
)

func (k Kind) String() string {
	switch k {
	case KindString:
		return "string"
	case KindInt:
		return "int"
	case KindFloat:
		return "float"
	case KindBool:
		return "bool"
	default:
		return "invalid"
	}
}

// IsNumber reports whether k is int or float, the two kinds that compare with
// each other.
func (k Kind) IsNumber() bool { return k == KindInt || k == KindFloat }

// Value is a typed attribute value. The zero Value is invalid. Values are
// small and compared by value; the string is shared, not copied.
type Value struct {
	kind Kind
	bits uint64 // int64, float64 bits, or 0/1 for bool
	str  string
}

// String returns a string Value.
func String(s string) Value { return Value{kind: KindString, str: s} }

// Int returns an int64 Value.
func Int(i int64) Value { return Value{kind: KindInt, bits: uint64(i)} }

// Float returns a float64 Value.
func Float(f float64) Value { return Value{kind: KindFloat, bits: math.Float64bits(f)} }

// Bool returns a bool Value.
func Bool(b bool) Value {
	v := Value{kind: KindBool}
	if b {
		v.bits = 1
	}
	return v
}

// Kind returns the value's kind.
func (v Value) Kind() Kind { return v.kind }

// IsValid reports whether v was built by one of the constructors.
func (v Value) IsValid() bool { return v.kind != KindInvalid }

// Str returns the string of a string Value and "" otherwise.
func (v Value) Str() string { return v.str }

// Int returns the int64 of an int Value and 0 otherwise.
func (v Value) Int() int64 {
	if v.kind != KindInt {
		return 0
	}
	return int64(v.bits)
}

// Float returns the float64 of a float Value, the int converted for an int
// Value (possibly rounded), and 0 otherwise.
func (v Value) Float() float64 {
	switch v.kind {
	case KindFloat:
		return math.Float64frombits(v.bits)
	case KindInt:
		return float64(int64(v.bits))
	default:
		return 0
	}
}

// Bool returns the bool of a bool Value and false otherwise.
func (v Value) Bool() bool { return v.kind == KindBool && v.bits == 1 }

// Equal reports whether v and w are the same value of the same kind. It is
// identity, not the "=" operator: Int(3) and Float(3) are not Equal. NaN
// floats with the same bits are Equal.
func (v Value) Equal(w Value) bool { return v == w }

// Literal returns v in the predicate language's syntax: strings quoted and
// escaped, floats always with a '.' or exponent so they parse back as
// floats, ints in decimal, booleans as true/false. Non-finite floats have no
// literal and print as NaN, +Inf or -Inf, which the parser rejects.
func (v Value) Literal() string {
	switch v.kind {
	case KindString:
		return Quote(v.str)
	case KindInt:
		return strconv.FormatInt(int64(v.bits), 10)
	case KindFloat:
		return floatLiteral(math.Float64frombits(v.bits))
	case KindBool:
		if v.bits == 1 {
			return "true"
		}
		return "false"
	default:
		return "<invalid>"
	}
}

// GoString makes test failures readable.
func (v Value) GoString() string { return fmt.Sprintf("%s(%s)", v.kind, v.Literal()) }

func floatLiteral(f float64) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "+Inf"
	case math.IsInf(f, -1):
		return "-Inf"
	}
	s := strconv.FormatFloat(f, 'g', -1, 64)
	for i := 0; i < len(s); i++ {
		if s[i] == '.' || s[i] == 'e' {
			return s
		}
	}
	return s + ".0"
}

// CompareNumbers orders two numbers exactly, across int64 and float64 (an
// int is never rounded through float64). ok is false when either is NaN,
// which is unordered, or is not a number.
func CompareNumbers(a, b Value) (c int, ok bool) {
	if !a.kind.IsNumber() || !b.kind.IsNumber() {
		return 0, false
	}
	return compareNumbers(a, b)
}

// compareNumbers is CompareNumbers for values known to be numbers.
func compareNumbers(a, b Value) (c int, ok bool) {
	switch {
	case a.kind == KindInt && b.kind == KindInt:
		return cmp.Compare(int64(a.bits), int64(b.bits)), true
	case a.kind == KindFloat && b.kind == KindFloat:
		x, y := math.Float64frombits(a.bits), math.Float64frombits(b.bits)
		if math.IsNaN(x) || math.IsNaN(y) {
			return 0, false
		}
		return cmp.Compare(x, y), true
	case a.kind == KindInt:
		return cmpIntFloat(int64(a.bits), math.Float64frombits(b.bits))
	default:
		c, ok := cmpIntFloat(int64(b.bits), math.Float64frombits(a.bits))
		return -c, ok
	}
}

// cmpIntFloat compares an int64 with a float64 without converting the int to
// float64, which would round above 2^53.
func cmpIntFloat(i int64, f float64) (int, bool) {
	switch {
	case math.IsNaN(f):
		return 0, false
	case f >= 0x1p63:
		return -1, true
	case f < -0x1p63:
		return 1, true
	}
	t := math.Trunc(f) // exactly representable as int64 here
	if c := cmp.Compare(i, int64(t)); c != 0 {
		return c, true
	}
	// Integer parts are equal: the fraction decides.
	return cmp.Compare(0, f-t), true
}

// CanonicalNumber returns the decimal text of a number such that two numbers
// that are "=" have the same text and two that are not have different texts:
// integral floats within int64 range print as the int would, and -0.0 as 0.
// NaN, which is "=" to nothing, prints as "NaN"; that only costs a Bloom
// false positive, which exact matching removes. It is what
// encoding's equality categories are built from, so it is a wire contract
// between brokers: do not change.
func CanonicalNumber(v Value) string {
	switch v.kind {
	case KindInt:
		return strconv.FormatInt(int64(v.bits), 10)
	case KindFloat:
		f := math.Float64frombits(v.bits)
		if f == math.Trunc(f) && f >= -0x1p63 && f < 0x1p63 {
			return strconv.FormatInt(int64(f), 10)
		}
		return strconv.FormatFloat(f, 'g', -1, 64)
	default:
		return ""
	}
}
