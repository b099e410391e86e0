package content

import (
	"fmt"
	"unicode/utf8"
)

// Matchable reports whether some message could satisfy op against the
// string s. Message strings are valid UTF-8 (clients and brokers refuse
// others), so a string operand that is not — written with \xHH escapes —
// can never equal one, and can be a prefix, suffix or substring of one
// only if its invalid bytes are a rune cut at that end: "\xc3" is a prefix
// of "é" ("\xc3\xa9"), "\xa9" a suffix, "\xff" part of nothing. Orderings
// compare bytes and stay satisfiable either way.
func Matchable(op Op, s string) bool {
	if utf8.ValidString(s) {
		return true
	}
	switch op {
	case OpEq:
		return false
	case OpPrefix:
		return validThenCut(s)
	case OpSuffix:
		return utf8.ValidString(trimContinuation(s))
	case OpContains:
		return validThenCut(trimContinuation(s))
	}
	return true
}

// trimContinuation drops up to three leading continuation bytes: the end
// of a rune whose start lies before the string. Any one to three of them
// end some valid rune (a lead byte of the right length before them).
func trimContinuation(s string) string {
	for i := 0; i < 3 && len(s) > 0 && s[0]&0xc0 == 0x80; i++ {
		s = s[1:]
	}
	return s
}

// validThenCut reports whether s is valid UTF-8 followed by the start of
// a rune that the string cuts off.
func validThenCut(s string) bool {
	for cut := 0; cut <= 3 && cut <= len(s); cut++ {
		if utf8.ValidString(s[:len(s)-cut]) && runeStart(s[len(s)-cut:]) {
			return true
		}
	}
	return false
}

// runeStart reports whether t (at most three bytes) is the beginning of a
// valid UTF-8 encoding of one rune, cut before its end; "" is.
func runeStart(t string) bool {
	if t == "" {
		return true
	}
	n := 0
	switch b := t[0]; {
	case b >= 0xc2 && b <= 0xdf:
		n = 2
	case b >= 0xe0 && b <= 0xef:
		n = 3
	case b >= 0xf0 && b <= 0xf4:
		n = 4
	}
	if len(t) >= n {
		return false
	}
	// Complete it with the smallest continuation the lead byte allows
	// and let the decoder judge.
	b := []byte(t)
	for len(b) < n {
		next := byte(0x80)
		if len(b) == 1 {
			switch t[0] {
			case 0xe0:
				next = 0xa0
			case 0xf0:
				next = 0x90
			}
		}
		b = append(b, next)
	}
	r, size := utf8.DecodeRune(b)
	return r != utf8.RuneError && size == n
}

// CheckMatchable returns an error naming the first constraint of p that no
// message can satisfy because of its string (Matchable), or nil. A
// predicate with one is almost certainly a mistake — \xHH escapes where
// the text meant a character — and subscribing it would silently never
// deliver, so brokers and clients refuse it.
func CheckMatchable(p Predicate) error {
	for _, f := range p {
		for _, c := range f {
			if c.Value.Kind() == KindString && !Matchable(c.Op, c.Value.Str()) {
				return fmt.Errorf("no message can satisfy %s: message strings are valid UTF-8 and %s is not", c, Quote(c.Value.Str()))
			}
		}
	}
	return nil
}
