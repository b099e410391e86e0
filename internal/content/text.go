package content

import (
	"strings"
	"unicode/utf8"
)

const hexDigits = "0123456789abcdef"

// Quote returns s as a predicate-language string literal: double-quoted,
// with '"' and '\' escaped, \n \r \t for those controls, and \xHH for the
// bytes of other C0 and C1 control characters, DEL and bytes that are not
// valid UTF-8. The literal of any byte string parses back to the same bytes.
// Other UTF-8 is kept as is; the escaped set is fixed rather than taken from
// unicode.IsPrint so that canonical text does not change with Go's Unicode
// tables.
func Quote(s string) string {
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteByte('"')
	for i := 0; i < len(s); {
		c := s[i]
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			if (r == utf8.RuneError && size == 1) || (r >= 0x80 && r <= 0x9f) {
				for _, c := range []byte(s[i : i+size]) {
					b.WriteString(`\x`)
					b.WriteByte(hexDigits[c>>4])
					b.WriteByte(hexDigits[c&15])
				}
			} else {
				b.WriteString(s[i : i+size])
			}
			i += size
			continue
		}
		switch c {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		default:
			if c < 0x20 || c == 0x7f {
				b.WriteString(`\x`)
				b.WriteByte(hexDigits[c>>4])
				b.WriteByte(hexDigits[c&15])
			} else {
				b.WriteByte(c)
			}
		}
		i++
	}
	b.WriteByte('"')
	return b.String()
}

// keywords cannot be bare attribute names in canonical output, so that a
// reader never has to guess; the parser accepts them bare only where a name
// is expected.
var keywords = map[string]bool{
	"prefix": true, "suffix": true, "contains": true, "exists": true,
	"true": true, "false": true,
}

// FormatName returns name bare when it is an identifier (a letter or '_'
// followed by letters, digits, '_', '.', '-' or '/') and not a keyword, and
// quoted otherwise.
func FormatName(name string) string {
	if isIdent(name) && !keywords[name] {
		return name
	}
	return Quote(name)
}

func isIdent(s string) bool {
	if s == "" || !isIdentStart(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		if !isIdentPart(s[i]) {
			return false
		}
	}
	return true
}

func isIdentStart(c byte) bool {
	return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
}

func isIdentPart(c byte) bool {
	return isIdentStart(c) || (c >= '0' && c <= '9') || c == '.' || c == '-' || c == '/'
}
