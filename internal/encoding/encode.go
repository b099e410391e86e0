package encoding

import "github.com/dripmesh/drip/internal/content"

// scratchSize holds the categories of typical attributes on the stack; a
// longer one spills to the heap, which costs an allocation but is correct.
const scratchSize = 256

// EncodeMessage returns B_m = β(μ(m)) (Carzaniga09 §3). It panics if p is
// invalid.
func (p Params) EncodeMessage(m content.Message) Bloom {
	p.mustValidate()
	var b Bloom
	var scratch [scratchSize]byte
	for _, a := range m.Attributes() {
		buf, split, ok := appendAttribute(scratch[:0], a)
		if !ok {
			continue
		}
		p.add(&b, buf[:split])
		p.add(&b, buf[split:])
	}
	return b
}

// EncodeFilter returns the Bloom of one filter, β of the union of its
// constraints' categories. A filter whose constraints are all "exists"
// encodes to the zero Bloom, which every message's Bloom contains: it is
// still a correct necessary condition, only not a selective one. It panics
// if p is invalid.
func (p Params) EncodeFilter(f content.Filter) Bloom {
	p.mustValidate()
	var b Bloom
	var scratch [scratchSize]byte
	for _, c := range f {
		if buf, ok := appendConstraint(scratch[:0], c); ok {
			p.add(&b, buf)
		}
	}
	return b
}

// EncodePredicate returns π's encoding of a predicate: one Bloom per
// filter, in filter order and not deduplicated (Advertise does that across
// a broker's whole set). It panics if p is invalid.
func (p Params) EncodePredicate(pred content.Predicate) []Bloom {
	out := make([]Bloom, len(pred))
	for i, f := range pred {
		out[i] = p.EncodeFilter(f)
	}
	return out
}
