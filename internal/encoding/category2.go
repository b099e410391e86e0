package encoding

import (
	"slices"
	"strconv"

	"github.com/dripmesh/drip/internal/content"
)

// The fine categories of cat-v2 (doc.go). Each is a class byte, the
// escaped name, '=' and a payload; the class bytes differ from the first
// byte of every existence and equality category, so the two kinds never
// share a string, and isFine can tell which part of the Bloom a category
// hashes into. Exchanged between brokers: do not change.
const (
	classNode  = 'r' // numeric trie node: level in decimal, '/', prefix in lowercase hex
	classFirst = 'p' // the first byte of a string
	classLast  = 's' // the last byte of a string
	classByte  = 'u' // a byte the string contains
	classPair  = 'b' // two consecutive bytes of the string
	classLong  = 'l' // the string is longer than gramLimit; empty payload
)

// The bounds of cat-v2. Changing any of them changes which categories a
// broker builds: exchanged between brokers in effect, do not change.
const (
	// gramLimit: a string of up to this many bytes inserts every byte and
	// pair it contains; a longer one only those of its first and last
	// gramWindow bytes, and the long category. Without the bound a 64 KiB
	// value would fill the Bloom and cost 64 Ki hashes.
	gramLimit  = 24
	gramWindow = 12
	// constraintPairs: a string constraint requires at most this many of
	// the pairs it implies (evenly spaced); each is K more bits, and eight
	// already make a filter far more specific than the Bloom can tell.
	constraintPairs = 8
	// loneRangeNodes bounds the nodes a range in a one-constraint filter
	// maps to, each one Bloom of the advertisement; loneAncestors of each
	// node's ancestors join it, implied categories that add bits.
	loneRangeNodes = 16
	loneAncestors  = 2
	// rangeNodes bounds the nodes of each range in a filter of several
	// constraints, whose other constraints already make it selective.
	rangeNodes = 2
	// maxDisjuncts bounds the Blooms one filter encodes to.
	maxDisjuncts = 16
)

// isFine reports whether a category is one of cat-v2's fine categories.
func isFine(c []byte) bool {
	if len(c) == 0 {
		return false
	}
	switch c[0] {
	case classNode, classFirst, classLast, classByte, classPair, classLong:
		return true
	}
	return false
}

// appendFineHead appends class·name·'=', the part of a fine category that
// all categories of one class and attribute share.
func appendFineHead(dst []byte, class byte, name string) []byte {
	dst = append(dst, class)
	dst = appendName(dst, name)
	return append(dst, equalsByte)
}

// appendNodePayload appends a trie node's payload: level, '/', prefix.
func appendNodePayload(dst []byte, n node) []byte {
	dst = strconv.AppendUint(dst, uint64(n.level), 10)
	dst = append(dst, '/')
	return strconv.AppendUint(dst, uint64(n.prefix), 16)
}

// fnvNode continues h with a trie node's payload as appendNodePayload
// writes it, without writing it: every numeric attribute of every message
// hashes keyBits of them.
func fnvNode(h uint64, n node) uint64 {
	if n.level >= 10 {
		h = fnvByte(h, '0'+n.level/10)
	}
	h = fnvByte(fnvByte(h, '0'+n.level%10), '/')
	shift := 12 // a prefix is 16 bits: at most four hex digits
	for shift > 0 && n.prefix>>shift == 0 {
		shift -= 4
	}
	for ; shift >= 0; shift -= 4 {
		h = fnvByte(h, hexDigits[n.prefix>>shift&0xf])
	}
	return h
}

const hexDigits = "0123456789abcdef"

// gramWindows returns the parts of a string whose bytes and pairs it
// inserts, and whether it is long.
func gramWindows(s string) (head, tail string, long bool) {
	if len(s) <= gramLimit {
		return s, "", false
	}
	return s[:gramWindow], s[len(s)-gramWindow:], true
}

// fineMessageCategories appends the fine categories of one attribute, in
// string form: the reference that encodeMessageV2 must agree with.
func fineMessageCategories(out []string, a content.Attribute) []string {
	cat := func(class byte, payload ...byte) string {
		return string(append(appendFineHead(nil, class, a.Name), payload...))
	}
	switch a.Value.Kind() {
	case content.KindString:
		s := a.Value.Str()
		if s == "" {
			return out
		}
		out = append(out, cat(classFirst, s[0]), cat(classLast, s[len(s)-1]))
		head, tail, long := gramWindows(s)
		seen := map[string]bool{}
		for _, w := range []string{head, tail} {
			for i := 0; i < len(w); i++ {
				for _, c := range []string{cat(classByte, w[i]), pairCat(cat, w, i)} {
					if c != "" && !seen[c] {
						seen[c] = true
						out = append(out, c)
					}
				}
			}
		}
		if long {
			out = append(out, cat(classLong))
		}
	case content.KindInt, content.KindFloat:
		if k, ok := numKey(a.Value); ok {
			for l := 1; l <= keyBits; l++ {
				out = append(out, cat(classNode, appendNodePayload(nil, keyNode(k, l))...))
			}
		}
	}
	return out
}

func pairCat(cat func(byte, ...byte) string, w string, i int) string {
	if i+1 >= len(w) {
		return ""
	}
	return cat(classPair, w[i], w[i+1])
}

// filterPlan is a filter's categorization under cat-v2 before expansion:
// every Bloom of the filter has the base categories and one alternative
// of each group. A group is a disjunction that no single category
// implies: the nodes that cover a range, or "these pairs, or the string
// is long".
type filterPlan struct {
	base   []string
	groups [][][]string
	// contains marks the groups of contains constraints, which can be
	// dropped (weakened to true) to bound the expansion.
	contains []bool
}

// v2FilterPlan categorizes a filter under cat-v2 (doc.go). Every category a
// constraint contributes, in the base or in each alternative of its group,
// is one that every value satisfying the constraint inserts; a range is
// intersected with the other ranges on its attribute first, so that
// x > 5 && x < 10 covers [5, 10] rather than two half-lines.
func v2FilterPlan(f content.Filter) filterPlan {
	var p filterPlan
	// A filter on one attribute (x = 3, or 5 < x < 10) spends more on
	// precision: nothing else in it is selective.
	lone := len(f) > 0
	for _, c := range f {
		lone = lone && c.Name == f[0].Name
	}
	type interval struct{ lo, hi uint16 }
	ranges := map[string]*interval{}
	var rangeNames []string
	for _, c := range f {
		sym, ok := typeSymbol(c.Value.Kind())
		if !ok || c.Op == content.OpExists {
			continue
		}
		// The coarse categories: cat-v1's γ, plus the existence category
		// of an equality in a filter on one attribute (it adds K bits to a
		// filter that would have only K).
		if c.Op == content.OpEq {
			p.base = append(p.base, string(appendEquality(nil, sym, c.Name, c.Value)))
			if lone {
				p.base = append(p.base, string(appendExistence(nil, sym, c.Name)))
			}
			continue
		}
		p.base = append(p.base, string(appendExistence(nil, sym, c.Name)))
		cat := func(class byte, payload ...byte) string {
			return string(append(appendFineHead(nil, class, c.Name), payload...))
		}
		v := c.Value
		switch {
		case v.Kind() == content.KindBool && c.Op == content.OpNe:
			// A bool that is not b is !b: an equality.
			p.base = append(p.base, string(appendEquality(nil, sym, c.Name, content.Bool(!v.Bool()))))
		case v.Kind() == content.KindString:
			s := v.Str()
			switch c.Op {
			case content.OpPrefix:
				if s != "" {
					p.base = append(p.base, cat(classFirst, s[0]))
					p.base = appendPairs(p.base, cat, s[:min(len(s), gramWindow)])
				}
			case content.OpSuffix:
				if s != "" {
					p.base = append(p.base, cat(classLast, s[len(s)-1]))
					p.base = appendPairs(p.base, cat, s[max(0, len(s)-gramWindow):])
				}
			case content.OpContains:
				switch {
				case s == "":
				case len(s) > gramLimit:
					// Only a long string can contain it.
					p.base = append(p.base, cat(classLong))
				default:
					var grams []string
					if len(s) == 1 {
						grams = []string{cat(classByte, s[0])}
					} else {
						grams = appendPairs(nil, cat, s)
					}
					p.groups = append(p.groups, [][]string{grams, {cat(classLong)}})
					p.contains = append(p.contains, true)
				}
			}
		case v.Kind().IsNumber():
			k, ok := numKey(v)
			if !ok {
				break // NaN: nothing is ordered against it
			}
			r := ranges[c.Name]
			if r == nil {
				r = &interval{0, keyMax}
				ranges[c.Name] = r
				rangeNames = append(rangeNames, c.Name)
			}
			// A strict bound at the edge of its bucket excludes the bucket.
			switch c.Op {
			case content.OpLt:
				if startsBucket(v) {
					k--
				}
				r.hi = min(r.hi, k)
			case content.OpLe:
				r.hi = min(r.hi, k)
			case content.OpGt:
				if ord, _ := content.CompareNumbers(v, content.Int(0)); ord < 0 && startsBucket(negate(v)) {
					k++
				}
				r.lo = max(r.lo, k)
			case content.OpGe:
				r.lo = max(r.lo, k)
			}
		}
	}
	limit, ancestors := rangeNodes, 0
	if lone {
		limit, ancestors = loneRangeNodes, loneAncestors
	}
	var rangeGroups [][][]string
	for _, name := range rangeNames {
		r := ranges[name]
		var alts [][]string
		if r.lo > r.hi {
			// Unsatisfiable: any encoding is a necessary condition.
			rangeGroups = append(rangeGroups, nil)
			continue
		}
		for _, n := range coverRange(r.lo, r.hi, limit) {
			var alt []string
			for a := 0; a <= ancestors && n.level > 0; a++ {
				alt = append(alt, string(appendNodePayload(appendFineHead(nil, classNode, name), n)))
				n = n.parent()
			}
			alts = append(alts, alt)
		}
		rangeGroups = append(rangeGroups, alts)
	}
	// Bound the expansion: ranges to one node each, then contains groups
	// dropped from the last, until the product fits.
	if expansion(p.groups, rangeGroups) > maxDisjuncts {
		for i, name := range rangeNames {
			r := ranges[name]
			if r.lo > r.hi {
				continue
			}
			rangeGroups[i] = nil
			for _, n := range coverRange(r.lo, r.hi, 1) {
				rangeGroups[i] = [][]string{{string(appendNodePayload(appendFineHead(nil, classNode, name), n))}}
			}
		}
	}
	for i := len(p.groups) - 1; i >= 0 && expansion(p.groups, rangeGroups) > maxDisjuncts; i-- {
		if p.contains[i] {
			p.groups = slices.Delete(p.groups, i, i+1)
			p.contains = slices.Delete(p.contains, i, i+1)
		}
	}
	for _, g := range rangeGroups {
		switch len(g) {
		case 0:
		case 1:
			p.base = append(p.base, g[0]...)
		default:
			p.groups = append(p.groups, g)
			p.contains = append(p.contains, false)
		}
	}
	return p
}

// expansion is the number of Blooms the groups expand to, saturated at
// maxDisjuncts+1: only whether it fits matters, and the exact product of a
// client's 64 two-way groups (2^64) wraps an int to 0, which would pass the
// bound and expand without end.
func expansion(groups ...[][][]string) int {
	const over = maxDisjuncts + 1
	n := 1
	for _, gs := range groups {
		for _, g := range gs {
			if len(g) == 0 {
				continue
			}
			if len(g) >= over {
				return over
			}
			n = min(n*len(g), over)
		}
	}
	return n
}

// appendPairs appends the pair categories of s, at most constraintPairs of
// them, evenly spaced.
func appendPairs(dst []string, cat func(byte, ...byte) string, s string) []string {
	n := len(s) - 1
	if n <= 0 {
		return dst
	}
	take := min(n, constraintPairs)
	for j := range take {
		i := j
		if take < n {
			i = j * (n - 1) / (take - 1)
		}
		dst = append(dst, cat(classPair, s[i], s[i+1]))
	}
	return dst
}

// expand returns the plan's category sets, one per Bloom: the base with
// one alternative of each group, groups varying fastest from the last.
func (p filterPlan) expand() [][]string {
	out := [][]string{p.base}
	for _, g := range p.groups {
		next := make([][]string, 0, len(out)*len(g))
		for _, set := range out {
			for _, alt := range g {
				next = append(next, append(slices.Clip(set), alt...))
			}
		}
		out = next
	}
	return out
}
