package match

import (
	"slices"
	"strings"

	"github.com/dripmesh/drip/internal/content"
)

// none marks an absent constraint in the fixed slots of attrIndex.
const none int32 = -1

// attrIndex holds the distinct constraints on one attribute name, each
// linked into a structure that finds the ones a value satisfies without
// testing the others one by one. Kinds are kept apart so that a type
// mismatch satisfies nothing, "!=" included (content's doc.go).
//
// Constraints of the broad operators (see onDemand) are linked only while
// they are some filter's access constraint; the others are checked on
// demand against cur.
type attrIndex struct {
	size   int   // distinct constraints on this name, so the name can be dropped when 0
	exists int32 // the "exists" constraint, or none

	// The current message's value of this name, valid when curGen is the
	// index's gen: what on-demand constraints are checked against.
	cur    content.Value
	curGen uint32

	// Strings.
	strEq       map[string]int32
	strNe       []int32          // every string "!=" constraint...
	strNeByVal  map[string]int32 // ...and the one to skip for a given value
	strOrd      [4][]strThreshold
	strPrefix   *byteTrie // nil when empty, as the tries are large
	strSuffix   *byteTrie // operands reversed
	strContains *substrIndex

	// Numbers, int and float together, keyed and ordered by num.
	numEq      map[num]int32
	numNe      []int32
	numNeByVal map[num]int32 // NaN operands are absent: no value is equal to them
	numOrd     [4][]numThreshold

	// Booleans, indexed by the bit.
	boolEq, boolNe [2]int32
}

// The ordering operators, as indices into strOrd and numOrd.
const (
	ordLt = iota
	ordLe
	ordGt
	ordGe
)

func ordIndex(op content.Op) int {
	switch op {
	case content.OpLt:
		return ordLt
	case content.OpLe:
		return ordLe
	case content.OpGt:
		return ordGt
	default:
		return ordGe
	}
}

type strThreshold struct {
	s string
	c int32
}

type numThreshold struct {
	n num
	c int32
}

func (t strThreshold) id() int32 { return t.c }
func (t numThreshold) id() int32 { return t.c }

// substrIndex finds the contains constraints a string satisfies in one of
// two ways, whichever is cheaper for the value at hand: walking the trie of
// operands from each position of the value (good for the short values of
// most attributes, whatever the number of operands), or scanning the
// operands with strings.Contains (good for a long text and few operands,
// such as Gorton03's message bodies).
type substrIndex struct {
	trie *byteTrie
	all  []strThreshold
}

func newAttrIndex() *attrIndex {
	return &attrIndex{exists: none, boolEq: [2]int32{none, none}, boolNe: [2]int32{none, none}}
}

func boolBit(b bool) int {
	if b {
		return 1
	}
	return 0
}

// onDemand reports whether constraints with operator op are checked on
// demand rather than enumerated when satisfied. A value satisfies about half
// of the orderings on its name and nearly all of the "!=" and exists
// constraints, so enumerating them would cost in proportion to how many are
// installed, for constraints that mostly only confirm a filter reached
// through a selective one.
func onDemand(op content.Op) bool {
	switch op {
	case content.OpNe, content.OpLt, content.OpLe, content.OpGt, content.OpGe, content.OpExists:
		return true
	}
	return false
}

// add counts constraint c (validated and interned as id) on this name and
// links it unless it is checked on demand.
func (a *attrIndex) add(c content.Constraint, id int32) {
	a.size++
	if !onDemand(c.Op) {
		a.link(c, id)
	}
}

// drop undoes add; an on-demand constraint must have been unlinked.
func (a *attrIndex) drop(c content.Constraint, id int32) {
	a.size--
	if !onDemand(c.Op) {
		a.unlink(c, id)
	}
}

// link makes constraint c findable from the values that satisfy it.
func (a *attrIndex) link(c content.Constraint, id int32) {
	v := c.Value
	switch {
	case c.Op == content.OpExists:
		a.exists = id
	case v.Kind() == content.KindString:
		a.linkString(c.Op, v.Str(), id)
	case v.Kind() == content.KindBool:
		if c.Op == content.OpEq {
			a.boolEq[boolBit(v.Bool())] = id
		} else {
			a.boolNe[boolBit(v.Bool())] = id
		}
	default:
		a.linkNumber(c.Op, toNum(v), id)
	}
}

func (a *attrIndex) linkString(op content.Op, s string, id int32) {
	switch op {
	case content.OpEq:
		if a.strEq == nil {
			a.strEq = make(map[string]int32)
		}
		a.strEq[s] = id
	case content.OpNe:
		if a.strNeByVal == nil {
			a.strNeByVal = make(map[string]int32)
		}
		a.strNe = append(a.strNe, id)
		a.strNeByVal[s] = id
	case content.OpPrefix:
		if a.strPrefix == nil {
			a.strPrefix = newTrie()
		}
		a.strPrefix.insert(s, false, id)
	case content.OpSuffix:
		if a.strSuffix == nil {
			a.strSuffix = newTrie()
		}
		a.strSuffix.insert(s, true, id)
	case content.OpContains:
		if a.strContains == nil {
			a.strContains = &substrIndex{trie: newTrie()}
		}
		a.strContains.trie.insert(s, false, id)
		a.strContains.all = append(a.strContains.all, strThreshold{s, id})
	default:
		o := &a.strOrd[ordIndex(op)]
		i, _ := slices.BinarySearchFunc(*o, s, cmpStrThreshold)
		*o = slices.Insert(*o, i, strThreshold{s, id})
	}
}

func (a *attrIndex) linkNumber(op content.Op, n num, id int32) {
	switch {
	case op == content.OpNe:
		if a.numNeByVal == nil {
			a.numNeByVal = make(map[num]int32)
		}
		a.numNe = append(a.numNe, id)
		if n.kind != numNaN {
			a.numNeByVal[n] = id
		}
	case n.kind == numNaN:
		// "=" and orderings with a NaN operand are satisfied by nothing:
		// they are counted in size but reachable from no value.
	case op == content.OpEq:
		if a.numEq == nil {
			a.numEq = make(map[num]int32)
		}
		a.numEq[n] = id
	default:
		o := &a.numOrd[ordIndex(op)]
		i, _ := slices.BinarySearchFunc(*o, n, cmpNumThreshold)
		*o = slices.Insert(*o, i, numThreshold{n, id})
	}
}

// unlink undoes link.
func (a *attrIndex) unlink(c content.Constraint, id int32) {
	v := c.Value
	switch {
	case c.Op == content.OpExists:
		a.exists = none
	case v.Kind() == content.KindString:
		a.unlinkString(c.Op, v.Str(), id)
	case v.Kind() == content.KindBool:
		if c.Op == content.OpEq {
			a.boolEq[boolBit(v.Bool())] = none
		} else {
			a.boolNe[boolBit(v.Bool())] = none
		}
	default:
		a.unlinkNumber(c.Op, toNum(v), id)
	}
}

func (a *attrIndex) unlinkString(op content.Op, s string, id int32) {
	switch op {
	case content.OpEq:
		delete(a.strEq, s)
	case content.OpNe:
		a.strNe = deleteID(a.strNe, id)
		delete(a.strNeByVal, s)
	case content.OpPrefix:
		if a.strPrefix.remove(s, false) {
			a.strPrefix = nil
		}
	case content.OpSuffix:
		if a.strSuffix.remove(s, true) {
			a.strSuffix = nil
		}
	case content.OpContains:
		x := a.strContains
		i := slices.IndexFunc(x.all, func(t strThreshold) bool { return t.c == id })
		x.all = slices.Delete(x.all, i, i+1)
		if x.trie.remove(s, false) {
			a.strContains = nil
		}
	default:
		o := &a.strOrd[ordIndex(op)]
		i, _ := slices.BinarySearchFunc(*o, s, cmpStrThreshold)
		*o = slices.Delete(*o, i, i+1)
	}
}

func (a *attrIndex) unlinkNumber(op content.Op, n num, id int32) {
	switch {
	case op == content.OpNe:
		a.numNe = deleteID(a.numNe, id)
		if n.kind != numNaN {
			delete(a.numNeByVal, n)
		}
	case n.kind == numNaN:
	case op == content.OpEq:
		delete(a.numEq, n)
	default:
		o := &a.numOrd[ordIndex(op)]
		i, _ := slices.BinarySearchFunc(*o, n, cmpNumThreshold)
		*o = slices.Delete(*o, i, i+1)
	}
}

func deleteID(ids []int32, id int32) []int32 {
	i := slices.Index(ids, id)
	return slices.Delete(ids, i, i+1)
}

func cmpStrThreshold(t strThreshold, s string) int { return strings.Compare(t.s, s) }
func cmpNumThreshold(t numThreshold, n num) int    { return cmpNum(t.n, n) }
