package content

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestQuote(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", `""`},
		{"abc", `"abc"`},
		{`a"b`, `"a\"b"`},
		{`a\b`, `"a\\b"`},
		{"\n\r\t", `"\n\r\t"`},
		{"\x00\x01\x1f\x7f", `"\x00\x01\x1f\x7f"`},
		{"é∑😀", `"é∑😀"`},                     // printable UTF-8 kept
		{"\xff\xc3", `"\xff\xc3"`},           // invalid bytes escaped
		{"a\xc3(", `"a\xc3("`},               // truncated sequence
		{"\xef\xbf\xbd", "\"\xef\xbf\xbd\""}, // a real U+FFFD is kept
		{"\xed\xa0\x80", `"\xed\xa0\x80"`},   // surrogate halves are not UTF-8
		{" !#$~", `" !#$~"`},
		{"\u0080\u009b\u00a0", `"\xc2\x80\xc2\x9b` + "\u00a0\""}, // C1 controls escaped, NBSP kept
	} {
		assert.Equal(t, tc.want, Quote(tc.in), "Quote(%q)", tc.in)
	}
}

// Quote's output parses back to the same bytes, for any bytes.
func TestQuoteRoundTrips(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	for i := 0; i < 5000; i++ {
		b := make([]byte, rng.IntN(12))
		for j := range b {
			b[j] = byte(rng.IntN(256))
		}
		s := string(b)
		p, err := Parse(Quote(s) + " = " + Quote(s))
		if s == "" {
			require.Error(t, err, "empty name")
			continue
		}
		require.NoError(t, err, "%q", s)
		assert.Equal(t, s, p[0][0].Name)
		assert.Equal(t, String(s), p[0][0].Value)
	}
}

func TestFormatName(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"price", "price"},
		{"_x", "_x"},
		{"a.b-c/d_9", "a.b-c/d_9"},
		{"Agency", "Agency"},
		{"", `""`},
		{"9lives", `"9lives"`},
		{".a", `".a"`},
		{"-a", `"-a"`},
		{"a b", `"a b"`},
		{"a=b", `"a=b"`},
		{`a"b`, `"a\"b"`},
		{"é", `"é"`},
		{"a\xff", `"a\xff"`},
		// Keywords are quoted so that canonical text never needs context.
		{"exists", `"exists"`},
		{"prefix", `"prefix"`},
		{"suffix", `"suffix"`},
		{"contains", `"contains"`},
		{"true", `"true"`},
		{"false", `"false"`},
		{"True", "True"},
		{"existsx", "existsx"},
	} {
		assert.Equal(t, tc.want, FormatName(tc.in), "FormatName(%q)", tc.in)
	}
}
