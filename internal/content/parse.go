package content

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Limits bound what Parse accepts, so that a client cannot make a broker
// hold or evaluate an unbounded predicate. A zero field means "no limit".
type Limits struct {
	MaxFilters     int // filters per predicate
	MaxConstraints int // constraints per filter
	MaxString      int // bytes of a string value, after unescaping
	MaxName        int // bytes of an attribute name
	MaxText        int // bytes of the whole predicate text
}

// DefaultLimits are generous for people and small enough that one predicate
// cannot exhaust a broker. A string value may be as long as one a message
// carries by default (64 KiB, wire.DefaultMessageLimits), so that a
// predicate can name any value a message can hold; drip broker and drip
// local then share one default (internal/cli tests that they agree).
func DefaultLimits() Limits {
	return Limits{MaxFilters: 1024, MaxConstraints: 64, MaxString: 64 << 10, MaxName: 256, MaxText: 1 << 20}
}

// ParseError is a malformed or over-limit predicate: Offset is the byte
// offset in the input where the problem was found, 0 <= Offset <= len(input)
// (len(input) when the input ended too early).
type ParseError struct {
	Offset int
	Msg    string
}

func (e *ParseError) Error() string { return fmt.Sprintf("predicate: at byte %d: %s", e.Offset, e.Msg) }

// Parse parses a predicate with DefaultLimits.
//
// Grammar (docs/design.md §1; whitespace is free between tokens):
//
//	predicate  = filter { "||" filter }
//	filter     = constraint { "&&" constraint }
//	constraint = name op value | name "exists"
//	name       = identifier | string
//	op         = "=" | "!=" | "<" | "<=" | ">" | ">=" | "prefix" | "suffix" | "contains"
//	value      = string | int | float | "true" | "false"
//
// Strings are double-quoted with \" \\ \n \r \t and \xHH escapes; a number
// without '.' or exponent is an int64, otherwise a float64 (finite only;
// values too small for float64 round to zero as strconv.ParseFloat does).
func Parse(text string) (Predicate, error) { return ParseWithLimits(text, DefaultLimits()) }

// MustParse is Parse for literals in tests and examples; it panics on error.
func MustParse(text string) Predicate {
	p, err := Parse(text)
	if err != nil {
		panic(err)
	}
	return p
}

// ParseWithLimits parses a predicate and enforces l.
func ParseWithLimits(text string, l Limits) (Predicate, error) {
	if l.MaxText > 0 && len(text) > l.MaxText {
		return nil, &ParseError{Offset: l.MaxText, Msg: fmt.Sprintf("predicate text is %d bytes, over the limit of %d", len(text), l.MaxText)}
	}
	p := parser{src: text, lim: l}
	pred, err := p.predicate()
	if err != nil {
		return nil, err
	}
	return pred, nil
}

type parser struct {
	src string
	pos int
	lim Limits
}

func (p *parser) errf(off int, format string, args ...any) error {
	return &ParseError{Offset: off, Msg: fmt.Sprintf(format, args...)}
}

func (p *parser) skipSpace() {
	for p.pos < len(p.src) {
		switch p.src[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

// describe names what sits at the current position for error messages.
func (p *parser) describe() string {
	if p.pos >= len(p.src) {
		return "end of input"
	}
	c := p.src[p.pos]
	if c < 0x20 || c >= 0x7f {
		return fmt.Sprintf("byte 0x%02x", c)
	}
	return fmt.Sprintf("%q", string(c))
}

func (p *parser) predicate() (Predicate, error) {
	var pred Predicate
	for {
		p.skipSpace()
		start := p.pos
		f, err := p.filter()
		if err != nil {
			return nil, err
		}
		if p.lim.MaxFilters > 0 && len(pred) == p.lim.MaxFilters {
			return nil, p.errf(start, "more than %d filters (|| terms) in one predicate", p.lim.MaxFilters)
		}
		pred = append(pred, f)
		p.skipSpace()
		if p.pos >= len(p.src) {
			return pred, nil
		}
		if !strings.HasPrefix(p.src[p.pos:], "||") {
			return nil, p.errf(p.pos, "expected \"&&\", \"||\" or end of input, found %s", p.describe())
		}
		p.pos += 2
	}
}

func (p *parser) filter() (Filter, error) {
	var f Filter
	for {
		p.skipSpace()
		start := p.pos
		c, err := p.constraint()
		if err != nil {
			return nil, err
		}
		if p.lim.MaxConstraints > 0 && len(f) == p.lim.MaxConstraints {
			return nil, p.errf(start, "more than %d constraints (&& terms) in one filter", p.lim.MaxConstraints)
		}
		f = append(f, c)
		p.skipSpace()
		if !strings.HasPrefix(p.src[p.pos:], "&&") {
			return f, nil
		}
		p.pos += 2
	}
}

func (p *parser) constraint() (Constraint, error) {
	p.skipSpace()
	nameAt := p.pos
	name, err := p.name()
	if err != nil {
		return Constraint{}, err
	}
	if p.lim.MaxName > 0 && len(name) > p.lim.MaxName {
		return Constraint{}, p.errf(nameAt, "attribute name is %d bytes, over the limit of %d", len(name), p.lim.MaxName)
	}
	if name == "" {
		return Constraint{}, p.errf(nameAt, "empty attribute name")
	}
	p.skipSpace()
	opAt := p.pos
	op, err := p.op()
	if err != nil {
		return Constraint{}, err
	}
	c := Constraint{Name: name, Op: op}
	if op == OpExists {
		return c, nil
	}
	p.skipSpace()
	valAt := p.pos
	if c.Value, err = p.value(); err != nil {
		return Constraint{}, err
	}
	if !op.AppliesTo(c.Value.Kind()) {
		return Constraint{}, p.errf(opAt, "operator %s does not apply to the %s value at byte %d", op, c.Value.Kind(), valAt)
	}
	return c, nil
}

func (p *parser) name() (string, error) {
	if p.pos >= len(p.src) {
		return "", p.errf(p.pos, "expected an attribute name, found end of input")
	}
	if p.src[p.pos] == '"' {
		return p.str()
	}
	if !isIdentStart(p.src[p.pos]) {
		return "", p.errf(p.pos, "expected an attribute name (identifier or quoted string), found %s", p.describe())
	}
	return p.ident(), nil
}

func (p *parser) ident() string {
	start := p.pos
	p.pos++
	for p.pos < len(p.src) && isIdentPart(p.src[p.pos]) {
		p.pos++
	}
	return p.src[start:p.pos]
}

func (p *parser) op() (Op, error) {
	rest := p.src[p.pos:]
	for _, o := range []struct {
		text string
		op   Op
	}{{"!=", OpNe}, {"<=", OpLe}, {">=", OpGe}, {"=", OpEq}, {"<", OpLt}, {">", OpGt}} {
		if strings.HasPrefix(rest, o.text) {
			p.pos += len(o.text)
			return o.op, nil
		}
	}
	if p.pos < len(p.src) && isIdentStart(p.src[p.pos]) {
		at := p.pos
		switch word := p.ident(); word {
		case "prefix":
			return OpPrefix, nil
		case "suffix":
			return OpSuffix, nil
		case "contains":
			return OpContains, nil
		case "exists":
			return OpExists, nil
		default:
			p.pos = at
		}
	}
	return OpInvalid, p.errf(p.pos, "expected an operator (= != < <= > >= prefix suffix contains exists), found %s", p.describe())
}

func (p *parser) value() (Value, error) {
	if p.pos >= len(p.src) {
		return Value{}, p.errf(p.pos, "expected a value, found end of input")
	}
	c := p.src[p.pos]
	switch {
	case c == '"':
		at := p.pos
		s, err := p.str()
		if err != nil {
			return Value{}, err
		}
		if p.lim.MaxString > 0 && len(s) > p.lim.MaxString {
			return Value{}, p.errf(at, "string value is %d bytes, over the limit of %d", len(s), p.lim.MaxString)
		}
		return String(s), nil
	case c == '-' || c == '+' || c == '.' || (c >= '0' && c <= '9'):
		return p.number()
	case isIdentStart(c):
		at := p.pos
		switch w := p.ident(); w {
		case "true":
			return Bool(true), nil
		case "false":
			return Bool(false), nil
		default:
			p.pos = at
			return Value{}, p.errf(at, "expected a value (string, number, true or false), found identifier %q; quote strings", w)
		}
	default:
		return Value{}, p.errf(p.pos, "expected a value (string, number, true or false), found %s", p.describe())
	}
}

func (p *parser) number() (Value, error) {
	start := p.pos
	isFloat := false
	if p.src[p.pos] == '-' || p.src[p.pos] == '+' {
		p.pos++
	}
	digits := 0
	for p.pos < len(p.src) {
		c := p.src[p.pos]
		switch {
		case c >= '0' && c <= '9':
			digits++
		case c == '.':
			isFloat = true
		case c == 'e' || c == 'E':
			isFloat = true
			if p.pos+1 < len(p.src) && (p.src[p.pos+1] == '-' || p.src[p.pos+1] == '+') {
				p.pos++
			}
		case c == '_':
			return Value{}, p.errf(p.pos, "digit separators '_' are not allowed in numbers")
		default:
			goto done
		}
		p.pos++
	}
done:
	text := p.src[start:p.pos]
	if digits == 0 {
		return Value{}, p.errf(start, "expected a number, found %q", text)
	}
	if !isFloat {
		i, err := strconv.ParseInt(text, 10, 64)
		if err != nil {
			return Value{}, p.errf(start, "integer %s does not fit in int64", text)
		}
		return Int(i), nil
	}
	f, err := strconv.ParseFloat(text, 64)
	if err != nil || math.IsInf(f, 0) {
		return Value{}, p.errf(start, "malformed or out-of-range float %q", text)
	}
	return Float(f), nil
}

// str parses a double-quoted string starting at p.pos.
func (p *parser) str() (string, error) {
	start := p.pos
	p.pos++ // opening quote
	var b strings.Builder
	for p.pos < len(p.src) {
		c := p.src[p.pos]
		switch c {
		case '"':
			p.pos++
			return b.String(), nil
		case '\\':
			if p.pos+1 >= len(p.src) {
				return "", p.errf(p.pos, "unterminated escape at end of input")
			}
			switch e := p.src[p.pos+1]; e {
			case '"', '\\':
				b.WriteByte(e)
			case 'n':
				b.WriteByte('\n')
			case 'r':
				b.WriteByte('\r')
			case 't':
				b.WriteByte('\t')
			case 'x':
				if p.pos+3 >= len(p.src) || unhex(p.src[p.pos+2]) < 0 || unhex(p.src[p.pos+3]) < 0 {
					return "", p.errf(p.pos, `expected two hex digits after \x`)
				}
				b.WriteByte(byte(unhex(p.src[p.pos+2])<<4 | unhex(p.src[p.pos+3])))
				p.pos += 2
			default:
				p.pos++ // describe the byte after the backslash
				return "", p.errf(p.pos-1, `unknown escape: backslash followed by %s (use \" \\ \n \r \t or \xHH)`, p.describe())
			}
			p.pos += 2
		default:
			b.WriteByte(c)
			p.pos++
		}
	}
	return "", p.errf(start, "unterminated string (no closing '\"')")
}

func unhex(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'a' && c <= 'f':
		return int(c-'a') + 10
	case c >= 'A' && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}
