package match

import (
	"cmp"
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

// cmpNum orders two non-NaN nums exactly, with content's own comparison so
// the index and content.Predicate.Matches cannot disagree.
func cmpNum(a, b num) int {
	// Same-kind numbers compare directly: the common case, and the one the
	// sorted bound groups compare in their binary searches.
	switch {
	case a.kind == numInt && b.kind == numInt:
		return cmp.Compare(a.i, b.i)
	case a.kind == numFloat && b.kind == numFloat:
		return cmp.Compare(a.f, b.f)
	}
	c, _ := content.CompareNumbers(a.value(), b.value())
	return c
}

// value turns a non-NaN num back into a Value.
func (n num) value() content.Value {
	if n.kind == numInt {
		return content.Int(n.i)
	}
	return content.Float(n.f)
}
