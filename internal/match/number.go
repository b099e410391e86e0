package match

import (
	"math"

	"github.com/dripmesh/drip/internal/content"
)

// numKind says how a num holds its value.
type numKind uint8

const (
	numInt   numKind = iota // i holds the value
	numFloat                // f holds a value that no int64 equals
	numNaN                  // unordered: equal to nothing, not even itself
)

// num is a number normalised so that two numbers are "=" exactly when their
// nums are ==: an integral float within int64 range becomes the int (so
// Float(3) and Int(3) meet in one hash bucket), and NaN keeps no bits. It is
// the allocation-free equivalent of content.CanonicalNumber, usable as a map
// key; TestNumAgreesWithCanonicalNumber holds the two together.
type num struct {
	kind numKind
	i    int64
	f    float64
}

// toNum normalises a number Value; v must be an int or a float.
func toNum(v content.Value) num {
	if v.Kind() == content.KindInt {
		return num{kind: numInt, i: v.Int()}
	}
	f := v.Float()
	switch {
	case math.IsNaN(f):
		return num{kind: numNaN}
	case f == math.Trunc(f) && f >= -0x1p63 && f < 0x1p63:
		return num{kind: numInt, i: int64(f)} // -0.0 becomes 0 here too
	}
	return num{kind: numFloat, f: f}
}

// cmpNum orders two non-NaN nums exactly, as content does: the int is never
// rounded through float64. Normalisation guarantees that an int and a float
// are never equal, so mixed comparisons only decide the side.
func cmpNum(a, b num) int {
	switch {
	case a.kind == numInt && b.kind == numInt:
		return cmpOrdered(a.i, b.i)
	case a.kind == numFloat && b.kind == numFloat:
		return cmpOrdered(a.f, b.f)
	case a.kind == numInt:
		return cmpIntFloat(a.i, b.f)
	default:
		return -cmpIntFloat(b.i, a.f)
	}
}

// cmpIntFloat compares an int with a float that is not integral or lies
// outside int64 range.
func cmpIntFloat(i int64, f float64) int {
	switch {
	case f >= 0x1p63:
		return -1
	case f < -0x1p63:
		return 1
	}
	// f is within range and not integral, so its truncation is an exact
	// int64 and i sits on one side of f: i <= t < f or f < t <= i.
	t := int64(math.Trunc(f))
	if f > 0 {
		if i <= t {
			return -1
		}
		return 1
	}
	if i >= t {
		return 1
	}
	return -1
}

func cmpOrdered[T int64 | float64 | string](a, b T) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
