package encoding

import (
	"math"
	"strconv"

	"github.com/dripmesh/drip/internal/content"
)

// The category syntax of doc.go. Categories are hashed into Blooms, so these
// bytes are exchanged between brokers: do not change.
const (
	existenceSymbol = "\u2203" // ∃, bytes E2 88 83
	stringSymbol    = '$'
	numberSymbol    = '#'
	boolSymbol      = '?'
	escapeByte      = '\\'
	equalsByte      = '='
)

// typeSymbol is the category type of a value kind; ints and floats share
// '#' because they compare with each other. ok is false for KindInvalid.
func typeSymbol(k content.Kind) (sym byte, ok bool) {
	switch k {
	case content.KindString:
		return stringSymbol, true
	case content.KindInt, content.KindFloat:
		return numberSymbol, true
	case content.KindBool:
		return boolSymbol, true
	}
	return 0, false
}

// appendName appends name with '\' and '=' escaped by a '\', so that the
// first unescaped '=' of an equality category ends the name.
func appendName(dst []byte, name string) []byte {
	for i := 0; i < len(name); i++ {
		if c := name[i]; c == escapeByte || c == equalsByte {
			dst = append(dst, escapeByte)
		}
		dst = append(dst, name[i])
	}
	return dst
}

// appendExistence appends ∃·type·name.
func appendExistence(dst []byte, sym byte, name string) []byte {
	dst = append(dst, existenceSymbol...)
	dst = append(dst, sym)
	return appendName(dst, name)
}

// appendEquality appends type·name·'='·value. The value is last, so it
// needs no escaping.
func appendEquality(dst []byte, sym byte, name string, v content.Value) []byte {
	dst = append(dst, sym)
	dst = appendName(dst, name)
	dst = append(dst, equalsByte)
	switch v.Kind() {
	case content.KindString:
		dst = append(dst, v.Str()...)
	case content.KindInt, content.KindFloat:
		dst = appendCanonicalNumber(dst, v)
	case content.KindBool:
		dst = strconv.AppendBool(dst, v.Bool())
	}
	return dst
}

// appendCanonicalNumber appends content.CanonicalNumber(v) without
// allocating; a test holds the two equal.
func appendCanonicalNumber(dst []byte, v content.Value) []byte {
	if v.Kind() == content.KindInt {
		return strconv.AppendInt(dst, v.Int(), 10)
	}
	f := v.Float()
	if f == math.Trunc(f) && f >= -0x1p63 && f < 0x1p63 {
		return strconv.AppendInt(dst, int64(f), 10)
	}
	return strconv.AppendFloat(dst, f, 'g', -1, 64)
}

// appendAttribute appends α(a)'s two categories to dst and returns the
// boundary between them.
func appendAttribute(dst []byte, a content.Attribute) (out []byte, split int, ok bool) {
	sym, ok := typeSymbol(a.Value.Kind())
	if !ok {
		return dst, len(dst), false
	}
	dst = appendExistence(dst, sym, a.Name)
	split = len(dst)
	return appendEquality(dst, sym, a.Name, a.Value), split, true
}

// appendConstraint appends γ(c): the equality category of an "="
// constraint, the existence category of its value's type for every other
// operator. ok is false for "exists", which admits any type and so has no
// single category, and for a constraint without a valid value, which no
// message satisfies; leaving such constraints out only weakens the filter,
// so the encoding stays a necessary condition (Carzaniga09 §3, eq. 1).
func appendConstraint(dst []byte, c content.Constraint) ([]byte, bool) {
	sym, ok := typeSymbol(c.Value.Kind())
	if !ok || c.Op == content.OpExists {
		return dst, false
	}
	if c.Op == content.OpEq {
		return appendEquality(dst, sym, c.Name, c.Value), true
	}
	return appendExistence(dst, sym, c.Name), true
}

// Categories returns μ(m) under scheme s in string form: per attribute in
// name order, existence then equality, then (cat-v2) its fine categories.
// It is for tests, debugging and other implementations; EncodeMessage does
// not build strings.
func (s Scheme) Categories(m content.Message) []string {
	var out []string
	var buf []byte
	for _, a := range m.Attributes() {
		var split int
		var ok bool
		buf, split, ok = appendAttribute(buf[:0], a)
		if !ok {
			continue
		}
		out = append(out, string(buf[:split]), string(buf[split:]))
		if s == SchemeCatV2 {
			out = fineMessageCategories(out, a)
		}
	}
	return out
}

// FilterCategories returns the category sets of a filter under scheme s,
// one per Bloom that AppendFilter encodes it to. Under cat-v1 that is one
// set, one category per constraint that has one, in constraint order
// (duplicates kept).
func (s Scheme) FilterCategories(f content.Filter) [][]string {
	if s == SchemeCatV2 {
		return v2FilterPlan(f).expand()
	}
	var out []string
	var buf []byte
	for _, c := range f {
		var ok bool
		if buf, ok = appendConstraint(buf[:0], c); ok {
			out = append(out, string(buf))
		}
	}
	return [][]string{out}
}
