package client

import (
	"math"
	"slices"
)

// Kind is the type of a Field's value.
type Kind uint8

// The kinds of values.
const (
	KindString Kind = iota + 1
	KindInt
	KindFloat
	KindBool
)

// Field is one attribute of a message with its value typed, so that
// neither publishing nor receiving it boxes the value, as an Attrs map
// does.
type Field struct {
	Name string
	kind Kind
	s    string
	bits uint64 // an int64, a float64's bits, or a bool
}

// Kind is the type of the field's value.
func (f Field) Kind() Kind { return f.kind }

// Str is the value of a KindString field ("" for another kind).
func (f Field) Str() string { return f.s }

// Int is the value of a KindInt field (0 for another kind).
func (f Field) Int() int64 {
	if f.kind != KindInt {
		return 0
	}
	return int64(f.bits)
}

// Float is the value of a KindFloat field (0 for another kind).
func (f Field) Float() float64 {
	if f.kind != KindFloat {
		return 0
	}
	return math.Float64frombits(f.bits)
}

// Bool is the value of a KindBool field (false for another kind).
func (f Field) Bool() bool { return f.kind == KindBool && f.bits != 0 }

// Value is the field's value as an Attrs map holds it: string, int64,
// float64 or bool.
func (f Field) Value() any {
	switch f.kind {
	case KindString:
		return f.s
	case KindInt:
		return int64(f.bits)
	case KindFloat:
		return math.Float64frombits(f.bits)
	case KindBool:
		return f.bits != 0
	}
	return nil
}

// Fields are a message's attributes as a list, each name once, in any
// order: the way to publish without a map per message and, with
// WithFields, to receive without one. They travel sorted by name, so a
// subscriber's Fields come in that order; more than 32 given out of order
// travel as given (brokers sort them for themselves). Build them with Str, Int, Float and
// Bool, and Reset them for the next message: they keep their space, so a
// publisher that reuses them allocates nothing per message.
type Fields []Field

// Reset empties the list and keeps its space.
func (fs *Fields) Reset() { *fs = (*fs)[:0] }

// Str adds a string attribute.
func (fs *Fields) Str(name, v string) *Fields {
	*fs = append(*fs, Field{Name: name, kind: KindString, s: v})
	return fs
}

// Int adds an integer attribute.
func (fs *Fields) Int(name string, v int64) *Fields {
	*fs = append(*fs, Field{Name: name, kind: KindInt, bits: uint64(v)})
	return fs
}

// Float adds a floating-point attribute.
func (fs *Fields) Float(name string, v float64) *Fields {
	*fs = append(*fs, Field{Name: name, kind: KindFloat, bits: math.Float64bits(v)})
	return fs
}

// Bool adds a boolean attribute.
func (fs *Fields) Bool(name string, v bool) *Fields {
	var b uint64
	if v {
		b = 1
	}
	*fs = append(*fs, Field{Name: name, kind: KindBool, bits: b})
	return fs
}

// Get returns the field of the given name.
func (fs Fields) Get(name string) (Field, bool) {
	for _, f := range fs {
		if f.Name == name {
			return f, true
		}
	}
	return Field{}, false
}

// Attrs returns the fields as a map.
func (fs Fields) Attrs() Attrs {
	a := make(Attrs, len(fs))
	for _, f := range fs {
		a[f.Name] = f.Value()
	}
	return a
}

// Clone returns a copy that shares no space with fs.
func (fs Fields) Clone() Fields { return slices.Clone(fs) }
