package systems

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/dripmesh/drip/internal/content"
)

// Selector translates p into a JMS message selector (JMS 1.1 §3.8.1.1) for
// an ActiveMQ STOMP subscription. A predicate is a disjunction of
// conjunctions, which maps onto OR of AND:
//
//	=, !=                      name = lit, name <> lit
//	<, <=, >, >= (numbers)     name < 1.5E+00 ...
//	prefix, suffix, contains   name LIKE 'x%' / '%x' / '%x%' ESCAPE '\'
//	exists                     name IS NOT NULL
//
// String literals double their single quotes; LIKE patterns escape %, _
// and \ with \. Over STOMP every property arrives as a string ("42"), and
// ActiveMQ parses STOMP selectors with convert_string_expressions, which
// converts a string property to the type of the literal it is compared
// with. Numbers are therefore written as approximate (double) literals:
// Integer.valueOf("2.5") would fail where Double.valueOf parses both "2"
// and "2.5". ActiveMQ 5.17 rejects an exponent without a fraction (5E+01),
// so the mantissa always has one (5.0E+01). An empty filter (matches
// everything) is 1 = 1; an empty predicate (matches nothing) is 1 = 0.
//
// Where the result disagrees with content.Predicate.Matches (all follow from
// STOMP carrying every attribute as a string; the experiment workloads
// avoid every one of them, since a name always has one type):
//
//   - != on an attribute of another type: drip says false, JMS compares
//     the strings (a string literal) or fails the conversion to FALSE and
//     negates it (a number literal) and says true;
//   - a string attribute that looks like a number ("42") satisfies numeric
//     constraints in JMS, and a number attribute satisfies prefix, suffix
//     and contains on its decimal text;
//   - a string constraint (= '17') is satisfied by the number 17, whose
//     text is the same;
//   - a string attribute "true"/"false" satisfies = TRUE/FALSE;
//   - ints beyond ±2^53 compare through float64 in JMS, exactly in drip.
//
// A missing attribute satisfies nothing in both (SQL's NULL rule), and
// exists is satisfied by any value in both. Strings cannot be ordered
// (JMS allows < only on numbers), and names must be JMS identifiers; both
// are errors.
func Selector(p content.Predicate) (string, error) {
	if len(p) == 0 {
		return "1 = 0", nil
	}
	var sb strings.Builder
	for i, f := range p {
		if i > 0 {
			sb.WriteString(" OR ")
		}
		paren := len(p) > 1 && len(f) > 1
		if paren {
			sb.WriteByte('(')
		}
		if len(f) == 0 {
			sb.WriteString("1 = 1")
		}
		for j, c := range f {
			if j > 0 {
				sb.WriteString(" AND ")
			}
			if err := writeConstraint(&sb, c); err != nil {
				return "", fmt.Errorf("selector: filter %d, constraint %d (%s): %w", i, j, c, err)
			}
		}
		if paren {
			sb.WriteByte(')')
		}
	}
	return sb.String(), nil
}

func writeConstraint(sb *strings.Builder, c content.Constraint) error {
	if err := CheckIdentifier(c.Name); err != nil {
		return err
	}
	sb.WriteString(c.Name)
	v := c.Value
	switch c.Op {
	case content.OpExists:
		sb.WriteString(" IS NOT NULL")
		return nil
	case content.OpPrefix, content.OpSuffix, content.OpContains:
		if v.Kind() != content.KindString {
			return fmt.Errorf("%s needs a string", c.Op)
		}
		sb.WriteString(" LIKE '")
		if c.Op != content.OpPrefix {
			sb.WriteByte('%')
		}
		for _, r := range v.Str() {
			switch r {
			case '%', '_', '\\':
				sb.WriteByte('\\')
				sb.WriteRune(r)
			case '\'':
				sb.WriteString("''")
			default:
				sb.WriteRune(r)
			}
		}
		if c.Op != content.OpSuffix {
			sb.WriteByte('%')
		}
		sb.WriteString(`' ESCAPE '\'`)
		return nil
	}
	op, ok := map[content.Op]string{
		content.OpEq: " = ", content.OpNe: " <> ", content.OpLt: " < ", content.OpLe: " <= ", content.OpGt: " > ", content.OpGe: " >= ",
	}[c.Op]
	if !ok {
		return fmt.Errorf("operator %s has no JMS equivalent", c.Op)
	}
	ordering := c.Op != content.OpEq && c.Op != content.OpNe
	switch v.Kind() {
	case content.KindString:
		if ordering {
			return fmt.Errorf("JMS selectors compare strings with = and <> only")
		}
		sb.WriteString(op)
		sb.WriteString(quoteJMS(v.Str()))
	case content.KindInt, content.KindFloat:
		f := v.Float()
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return fmt.Errorf("value %s has no JMS literal", v.Literal())
		}
		sb.WriteString(op)
		sb.WriteString(jmsNumber(f))
	case content.KindBool:
		if ordering {
			return fmt.Errorf("booleans support = and <> only")
		}
		sb.WriteString(op)
		sb.WriteString(strings.ToUpper(strconv.FormatBool(v.Bool())))
	default:
		return fmt.Errorf("value of kind %s has no JMS literal", v.Kind())
	}
	return nil
}

// jmsNumber writes f as a JMS approximate numeric literal that ActiveMQ
// parses: 5.0E+01, -2.5E+00.
func jmsNumber(f float64) string {
	s := strconv.FormatFloat(f, 'E', -1, 64)
	if mant, exp, ok := strings.Cut(s, "E"); ok && !strings.Contains(mant, ".") {
		s = mant + ".0E" + exp
	}
	return s
}

// quoteJMS writes s as a JMS string literal.
func quoteJMS(s string) string {
	return "'" + strings.ReplaceAll(s, "'", "''") + "'"
}

// jmsReserved are the selector keywords no identifier may be (JMS 1.1
// §3.8.1.1), compared case-insensitively.
var jmsReserved = map[string]bool{
	"NULL": true, "TRUE": true, "FALSE": true, "NOT": true, "AND": true, "OR": true,
	"BETWEEN": true, "LIKE": true, "IN": true, "IS": true, "ESCAPE": true,
}

// CheckIdentifier reports whether name can be a JMS property name in a
// selector and a STOMP header: an ASCII Java identifier that is not a
// selector keyword and does not start with "JMS" (JMS header fields and
// provider properties).
func CheckIdentifier(name string) error {
	if name == "" {
		return fmt.Errorf("empty attribute name")
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		letter := c == '_' || c == '$' || ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z')
		if !letter && (i == 0 || c < '0' || c > '9') {
			return fmt.Errorf("attribute name %q is not a JMS identifier (ASCII letters, digits, _ and $, not starting with a digit)", name)
		}
	}
	if jmsReserved[strings.ToUpper(name)] {
		return fmt.Errorf("attribute name %q is a JMS selector keyword", name)
	}
	if strings.HasPrefix(name, "JMS") {
		return fmt.Errorf("attribute name %q starts with JMS, which JMS reserves", name)
	}
	return nil
}
