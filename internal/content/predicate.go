package content

import (
	"fmt"
	"math"
	"strings"
)

// Op is a constraint operator (docs/design.md §1).
type Op uint8

// The operators. Their numeric values appear in wire formats: do not change.
const (
	OpInvalid  Op = iota
	OpEq          // =
	OpNe          // !=
	OpLt          // <
	OpLe          // <=
	OpGt          // >
	OpGe          // >=
	OpPrefix      // prefix (strings)
	OpSuffix      // suffix (strings)
	OpContains    // contains (strings)
	OpExists      // exists (any type, no value)
)

var opText = [...]string{
	OpInvalid: "<invalid>", OpEq: "=", OpNe: "!=", OpLt: "<", OpLe: "<=", OpGt: ">", OpGe: ">=",
	OpPrefix: "prefix", OpSuffix: "suffix", OpContains: "contains", OpExists: "exists",
}

func (o Op) String() string {
	if int(o) < len(opText) {
		return opText[o]
	}
	return fmt.Sprintf("Op(%d)", uint8(o))
}

// AppliesTo reports whether o can be used with a constraint value of kind k.
// OpExists takes no value and applies to KindInvalid only.
func (o Op) AppliesTo(k Kind) bool {
	switch o {
	case OpExists:
		return k == KindInvalid
	case OpEq, OpNe:
		return k == KindString || k.IsNumber() || k == KindBool
	case OpLt, OpLe, OpGt, OpGe:
		return k == KindString || k.IsNumber()
	case OpPrefix, OpSuffix, OpContains:
		return k == KindString
	default:
		return false
	}
}

// Constraint is an elementary condition on one attribute. For OpExists,
// Value is the zero Value.
type Constraint struct {
	Name  string
	Op    Op
	Value Value
}

// Validate reports whether c is well formed: a non-empty name, an operator
// that applies to the value's kind, and a finite value if it is a float.
// Non-finite floats are refused because they have no literal: every valid
// predicate must survive Parse(p.String()).
func (c Constraint) Validate() error {
	if c.Name == "" {
		return fmt.Errorf("constraint %s: empty attribute name", c)
	}
	if !c.Op.AppliesTo(c.Value.Kind()) {
		if c.Op == OpExists {
			return fmt.Errorf("constraint %s: exists takes no value", c)
		}
		return fmt.Errorf("constraint %s: operator %s does not apply to %s values", c, c.Op, c.Value.Kind())
	}
	if c.Value.Kind() == KindFloat {
		if f := c.Value.Float(); math.IsNaN(f) || math.IsInf(f, 0) {
			return fmt.Errorf("constraint %s: float value must be finite", c)
		}
	}
	return nil
}

// Matches evaluates c on one attribute value with the semantics in the
// package documentation.
func (c Constraint) Matches(v Value) bool {
	if c.Op == OpExists {
		return v.IsValid()
	}
	cv := c.Value
	switch {
	case cv.kind == KindString && v.kind == KindString:
		return matchString(c.Op, v.str, cv.str)
	case cv.kind.IsNumber() && v.kind.IsNumber():
		cmp, ok := compareNumbers(v, cv)
		if !ok {
			return c.Op == OpNe
		}
		return matchOrder(c.Op, cmp)
	case cv.kind == KindBool && v.kind == KindBool:
		switch c.Op {
		case OpEq:
			return v.bits == cv.bits
		case OpNe:
			return v.bits != cv.bits
		}
	}
	return false
}

// MatchesMessage evaluates c on the message's attribute of that name.
func (c Constraint) MatchesMessage(m Message) bool {
	v, ok := m.Get(c.Name)
	return ok && c.Matches(v)
}

func matchString(op Op, v, c string) bool {
	switch op {
	case OpPrefix:
		return strings.HasPrefix(v, c)
	case OpSuffix:
		return strings.HasSuffix(v, c)
	case OpContains:
		return strings.Contains(v, c)
	default:
		return matchOrder(op, strings.Compare(v, c))
	}
}

func matchOrder(op Op, cmp int) bool {
	switch op {
	case OpEq:
		return cmp == 0
	case OpNe:
		return cmp != 0
	case OpLt:
		return cmp < 0
	case OpLe:
		return cmp <= 0
	case OpGt:
		return cmp > 0
	case OpGe:
		return cmp >= 0
	}
	return false
}

// String renders c in the predicate language.
func (c Constraint) String() string {
	name := FormatName(c.Name)
	if c.Op == OpExists {
		return name + " exists"
	}
	return name + " " + c.Op.String() + " " + c.Value.Literal()
}

// Filter is a conjunction of constraints.
type Filter []Constraint

// Matches reports whether m satisfies every constraint of f.
func (f Filter) Matches(m Message) bool {
	for _, c := range f {
		if !c.MatchesMessage(m) {
			return false
		}
	}
	return true
}

// String renders f in the predicate language.
func (f Filter) String() string {
	parts := make([]string, len(f))
	for i, c := range f {
		parts[i] = c.String()
	}
	return strings.Join(parts, " && ")
}

// Predicate is a disjunction of filters.
type Predicate []Filter

// Matches reports whether some filter of p matches m.
func (p Predicate) Matches(m Message) bool {
	for _, f := range p {
		if f.Matches(m) {
			return true
		}
	}
	return false
}

// String renders p in the canonical text syntax: Parse(p.String()) returns
// a predicate equal to p, and printing that again gives the same text.
func (p Predicate) String() string {
	parts := make([]string, len(p))
	for i, f := range p {
		parts[i] = f.String()
	}
	return strings.Join(parts, " || ")
}

// Validate checks every constraint of p and that p and its filters are not
// empty.
func (p Predicate) Validate() error {
	if len(p) == 0 {
		return fmt.Errorf("predicate has no filters")
	}
	for i, f := range p {
		if len(f) == 0 {
			return fmt.Errorf("filter %d has no constraints", i+1)
		}
		for _, c := range f {
			if err := c.Validate(); err != nil {
				return fmt.Errorf("filter %d: %w", i+1, err)
			}
		}
	}
	return nil
}
