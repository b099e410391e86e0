package encoding

import "github.com/dripmesh/drip/internal/content"

// scratchSize holds the categories of typical attributes on the stack; a
// longer one spills to the heap, which costs an allocation but is correct.
const scratchSize = 256

// EncodeMessage returns B_m = β(μ(m)) (Carzaniga09 §3) under p's scheme. It
// panics if p is invalid.
func (p Params) EncodeMessage(m content.Message) Bloom {
	p.mustValidate()
	var b Bloom
	var scratch [scratchSize]byte
	for _, a := range m.Attributes() {
		buf, split, ok := appendAttribute(scratch[:0], a)
		if !ok {
			continue
		}
		p.addCoarse(&b, hashCategory(buf[:split]))
		p.addCoarse(&b, hashCategory(buf[split:]))
		if p.Scheme == SchemeCatV2 {
			p.addFineAttribute(&b, a, scratch[:0])
		}
	}
	return b
}

// AppendFilter appends the Blooms of one filter: β of each of its category
// sets, one for cat-v1 and one or more for cat-v2, whose ranges and
// substrings map to disjunctions (Carzaniga09 §3 allows π to map a
// predicate to several sets). A filter whose constraints are all "exists"
// encodes to the zero Bloom, which every message's Bloom contains: it is
// still a correct necessary condition, only not a selective one. It panics
// if p is invalid.
func (p Params) AppendFilter(dst []Bloom, f content.Filter) []Bloom {
	p.mustValidate()
	if p.Scheme == SchemeCatV1 {
		var b Bloom
		var scratch [scratchSize]byte
		for _, c := range f {
			if buf, ok := appendConstraint(scratch[:0], c); ok {
				p.add(&b, buf)
			}
		}
		return append(dst, b)
	}
	plan := v2FilterPlan(f)
	base := p.bloomOf(plan.base)
	sets := []Bloom{base}
	for _, g := range plan.groups {
		next := make([]Bloom, 0, len(sets)*len(g))
		for _, b := range sets {
			for _, alt := range g {
				next = append(next, b.Or(p.bloomOf(alt)))
			}
		}
		sets = next
	}
	return append(dst, sets...)
}

// bloomOf is β of categories in string form.
func (p Params) bloomOf(cats []string) Bloom {
	var b Bloom
	for _, c := range cats {
		p.add(&b, []byte(c))
	}
	return b
}

// EncodePredicate returns π's encoding of a predicate: the Blooms of its
// filters in filter order (AppendFilter), not deduplicated (Advertise does
// that across a broker's whole set). It panics if p is invalid.
func (p Params) EncodePredicate(pred content.Predicate) []Bloom {
	out := make([]Bloom, 0, len(pred))
	for _, f := range pred {
		out = p.AppendFilter(out, f)
	}
	return out
}

// addFineAttribute adds the fine categories of one attribute (cat-v2). It
// computes what fineMessageCategories lists, without building strings: the
// hash of class·name·'=' once per class, then each payload on top of it.
func (p Params) addFineAttribute(b *Bloom, a content.Attribute, scratch []byte) {
	name := appendName(scratch, a.Name)
	head := func(class byte) uint64 {
		return fnvByte(fnvAdd(fnvByte(fnvOffset64, class), name), equalsByte)
	}
	switch a.Value.Kind() {
	case content.KindString:
		s := a.Value.Str()
		if s == "" {
			return
		}
		p.addFine(b, fnvByte(head(classFirst), s[0]))
		p.addFine(b, fnvByte(head(classLast), s[len(s)-1]))
		hb, hp := head(classByte), head(classPair)
		var seen [4]uint64 // bytes already added
		w1, w2, long := gramWindows(s)
		for _, w := range [2]string{w1, w2} {
			for i := 0; i < len(w); i++ {
				c := w[i]
				if seen[c>>6]&(1<<(c&63)) == 0 {
					seen[c>>6] |= 1 << (c & 63)
					p.addFine(b, fnvByte(hb, c))
				}
				// Repeated pairs set the same bits again: cheaper than
				// remembering them.
				if i+1 < len(w) {
					p.addFine(b, fnvByte(fnvByte(hp, c), w[i+1]))
				}
			}
		}
		if long {
			p.addFine(b, head(classLong))
		}
	case content.KindInt, content.KindFloat:
		k, ok := numKey(a.Value)
		if !ok {
			return
		}
		h := head(classNode)
		for l := 1; l <= keyBits; l++ {
			p.addFine(b, fnvNode(h, keyNode(k, l)))
		}
	}
}
