package content

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// FuzzParse checks the parser's contract on arbitrary bytes: it never
// panics; what it accepts is valid and survives the canonical printer; what
// it refuses is a *ParseError pointing inside the input.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		`agency = "AP" && priority = 2 || keywords contains "Italy" || price > 20.5 && stock prefix "XY"`,
		`a=1&&b<=-2||c exists`,
		`exists exists && prefix prefix "p" && true = false`,
		`"odd \"name\"" != "x\ty\n\x00\xff"`,
		`s = "é日本\\"`,
		`n = -9223372036854775808 || n = 9223372036854775807`,
		`n = 9223372036854775808`,
		`f = 1e21 || f = 3.0 || f = -0.0 || f = 5e-324 || f = 1.7976931348623157e308`,
		`f = 1e999`,
		`f = 1e-400`,
		`f = .5 && f = 5. && f = +1 && f = 1E+5`,
		`b = true || b != false`,
		`a = "abc`,
		`a = "\q"`,
		`a = "\x4`,
		`a = b`,
		`a prefix 3`,
		`x < true`,
		`a = 1 &&`,
		`|| a = 1`,
		`a = 1 | b`,
		`a = 1_000`,
		`a = 1e+`,
		`a = +Inf`,
		`"" = 1`,
		"\t\n a \r= 1 ",
		"",
		"s = \"\xff\x80\"",
		`a.b/c-d_9 >= 1.5e-3`,
		`x exists || y exists && z exists`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		p, err := Parse(in)
		if err != nil {
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("Parse(%q) returned %T, not *ParseError: %v", in, err, err)
			}
			if pe.Offset < 0 || pe.Offset > len(in) {
				t.Fatalf("Parse(%q): offset %d outside [0, %d]: %v", in, pe.Offset, len(in), err)
			}
			if p != nil {
				t.Fatalf("Parse(%q) returned both %v and an error", in, p)
			}
			return
		}
		if err := p.Validate(); err != nil {
			t.Fatalf("Parse(%q) returned an invalid predicate: %v", in, err)
		}
		text := p.String()
		q, err := Parse(text)
		if err != nil {
			t.Fatalf("canonical text %q of %q does not parse: %v", text, in, err)
		}
		if diff := cmp.Diff(p, q, valueCmp); diff != "" {
			t.Fatalf("Parse(%q) mismatch (-first +reparsed):\n%s", text, diff)
		}
		if again := q.String(); again != text {
			t.Fatalf("String is not a fixed point: %q then %q", text, again)
		}
	})
}
