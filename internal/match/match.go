package match

import (
	"slices"
	"strings"

	"github.com/dripmesh/drip/internal/content"
)

// Match appends to dst the subscribers whose predicate m satisfies, each
// exactly once and in no particular order, and returns the extended slice.
// Once the index's scratch space has grown to the largest message seen, it
// allocates only if dst must grow.
//
// It works in two phases. First every distinct linked constraint that m
// satisfies is found once, through the per-name structures, and stamped;
// those that are some filter's access constraint are collected. Then only
// the filters reached through a satisfied access constraint are checked, by
// looking up the stamps of their other constraints or, for the broad ones
// checked on demand, evaluating them on the message's value. A filter whose
// access constraint fails costs nothing, whatever its size; nor does one
// whose numeric ordering fails, where filters of one access constraint
// share the ordered attribute (boundGroup).
func (x *Index) Match(m content.Message, dst []SubscriberID) []SubscriberID {
	if len(x.subs) == 0 {
		return dst
	}
	x.gen++
	if x.gen == 0 {
		// Once every 2^32 messages: old stamps could now collide.
		for i := range x.state {
			x.state[i].seen = 0
		}
		for i := range x.subState {
			x.subState[i].reported = 0
		}
		x.gen = 1
	}
	x.hits = x.hits[:0]
	for _, a := range m.Attributes() {
		if ai := x.names[a.Name]; ai != nil {
			x.satisfy(ai, a.Value)
		}
	}
	for _, c := range x.hits {
		al := &x.access[c]
		for _, fi := range al.plain {
			dst = x.check(fi, dst)
		}
		for _, g := range al.bounds {
			lo, hi := g.holding(x.gen)
			for _, fi := range g.filters[lo:hi] {
				dst = x.check(fi, dst)
			}
		}
	}
	return dst
}

// check appends the owners of filter fi not yet reported for the current
// message if the message passes the filter's checks.
func (x *Index) check(fi int32, dst []SubscriberID) []SubscriberID {
	f := &x.filters[fi]
	if !x.allHold(f.rest) {
		return dst
	}
	for _, o := range f.owners {
		if sub := &x.subState[o.slot]; sub.reported != x.gen {
			sub.reported = x.gen
			dst = append(dst, sub.id)
		}
	}
	return dst
}

// allHold reports whether the current message passes every check.
func (x *Index) allHold(checks []check) bool {
	for i := range checks {
		k := &checks[i]
		if k.attr == nil {
			if x.state[k.c].seen != x.gen {
				return false
			}
			continue
		}
		// Matches(v) looks only at the operator and the operand.
		if k.attr.curGen != x.gen || !(content.Constraint{Op: k.op, Value: k.value}).Matches(k.attr.cur) {
			return false
		}
	}
	return true
}

// hit records that the current message satisfies constraint c. A message
// has each name once and every structure of attrIndex yields a constraint
// at most once per value, so c is hit at most once per message.
func (x *Index) hit(c int32) {
	st := &x.state[c]
	st.seen = x.gen
	if st.accessOf > 0 {
		x.hits = append(x.hits, c)
	}
}

// satisfy hits every linked constraint of a that value v satisfies, and
// records v for the on-demand ones.
func (x *Index) satisfy(a *attrIndex, v content.Value) {
	a.cur, a.curGen = v, x.gen
	if a.exists != none {
		x.hit(a.exists)
	}
	switch v.Kind() {
	case content.KindString:
		x.satisfyString(a, v.Str())
	case content.KindInt, content.KindFloat:
		x.satisfyNumber(a, toNum(v))
	case content.KindBool:
		b := boolBit(v.Bool())
		if c := a.boolEq[b]; c != none {
			x.hit(c)
		}
		if c := a.boolNe[1-b]; c != none {
			x.hit(c)
		}
	}
}

func (x *Index) satisfyString(a *attrIndex, s string) {
	if c, ok := a.strEq[s]; ok {
		x.hit(c)
	}
	if len(a.strNe) > 0 {
		skip, ok := a.strNeByVal[s]
		if !ok {
			skip = none
		}
		x.hitAllBut(a.strNe, skip)
	}
	for op, list := range a.strOrd {
		if len(list) == 0 {
			continue
		}
		// lo: first threshold >= s; hi: first threshold > s.
		lo, eq := slices.BinarySearchFunc(list, s, cmpStrThreshold)
		hi := lo
		if eq {
			hi++
		}
		hitRange(x, list, op, lo, hi)
	}
	if a.strPrefix != nil {
		x.hitAffixes(a.strPrefix, s, false)
	}
	if a.strSuffix != nil {
		x.hitAffixes(a.strSuffix, s, true)
	}
	if a.strContains != nil {
		x.hitSubstrings(a.strContains, s)
	}
}

// scanBytesPerOperand: scanning the contains operands beats walking the
// trie from every position once the value is longer than this many bytes per
// operand (strings.Contains skims long texts fast; a walk visits every
// position). Only speed depends on it.
const scanBytesPerOperand = 8

func (x *Index) hitSubstrings(ix *substrIndex, s string) {
	if len(s) > scanBytesPerOperand*len(ix.all) {
		for _, t := range ix.all {
			if strings.Contains(s, t.s) {
				x.hit(t.c)
			}
		}
		return
	}
	t := ix.trie
	if c := t.nodes[0].c; c != none {
		x.hit(c) // the empty operand, contained in every string
	}
	for i := range len(s) {
		for j, n := i, int32(0); j < len(s); j++ {
			if n = t.child(n, s[j]); n == 0 {
				break
			}
			// An operand can occur more than once; hitting it again would
			// repeat phase 2's work for its filters.
			if c := t.nodes[n].c; c != none && x.state[c].seen != x.gen {
				x.hit(c)
			}
		}
	}
}

func (x *Index) satisfyNumber(a *attrIndex, n num) {
	if n.kind == numNaN {
		// NaN is unordered and equal to nothing: only "!=" holds, for every
		// operand, NaN operands included.
		x.hitAllBut(a.numNe, none)
		return
	}
	if c, ok := a.numEq[n]; ok {
		x.hit(c)
	}
	if len(a.numNe) > 0 {
		skip, ok := a.numNeByVal[n]
		if !ok {
			skip = none
		}
		x.hitAllBut(a.numNe, skip)
	}
	for op, list := range a.numOrd {
		if len(list) == 0 {
			continue
		}
		lo, eq := slices.BinarySearchFunc(list, n, cmpNumThreshold)
		hi := lo
		if eq {
			hi++
		}
		hitRange(x, list, op, lo, hi)
	}
}

func (x *Index) hitAllBut(ids []int32, skip int32) {
	for _, c := range ids {
		if c != skip {
			x.hit(c)
		}
	}
}

// hitRange hits the ordering constraints of one operator that the value
// satisfies, given the bounds of the thresholds equal to it in the sorted
// list: x < t holds for t > v, x <= t for t >= v, x > t for t < v and
// x >= t for t <= v.
func hitRange[T interface{ id() int32 }](x *Index, list []T, op, lo, hi int) {
	switch op {
	case ordLt:
		list = list[hi:]
	case ordLe:
		list = list[lo:]
	case ordGt:
		list = list[:lo]
	case ordGe:
		list = list[:hi]
	}
	for _, t := range list {
		x.hit(t.id())
	}
}

// hitAffixes walks trie t along s, from its start or (rev) from its end,
// hitting every operand met: the prefixes (suffixes) of s among the operands.
func (x *Index) hitAffixes(t *byteTrie, s string, rev bool) {
	n := int32(0)
	for i := 0; ; i++ {
		if c := t.nodes[n].c; c != none {
			x.hit(c)
		}
		if i == len(s) {
			return
		}
		if n = t.child(n, keyByte(s, i, rev)); n == 0 {
			return
		}
	}
}
