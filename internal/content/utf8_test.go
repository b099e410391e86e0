package content

import (
	"math/rand/v2"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMatchable(t *testing.T) {
	tests := []struct {
		op   Op
		s    string
		want bool
	}{
		{OpEq, "é", true},
		{OpEq, "\xff", false},
		{OpEq, "\xc3", false},
		{OpNe, "\xff", true},
		{OpLt, "\xff", true},
		{OpPrefix, "\xc3", true},              // of "é"
		{OpPrefix, "a\xe2\x82", true},         // of "a€"
		{OpPrefix, "\xe0\x80", false},         // an overlong encoding's start
		{OpPrefix, "\xed\xa0", false},         // a surrogate's start
		{OpPrefix, "\xf4\x90", false},         // beyond U+10FFFF
		{OpPrefix, "\xa9", false},             // a continuation byte first
		{OpPrefix, "\xc3x", false},            // a cut rune, then more
		{OpSuffix, "\xa9", true},              // of "é"
		{OpSuffix, "\x82\xac", true},          // of "€"
		{OpSuffix, "\xc3", false},             // a lead byte last
		{OpSuffix, "\x80\x80\x80\x80", false}, // more than a rune's tail
		{OpContains, "\xa9x\xc3", true},       // "éxé" holds it
		{OpContains, "\xff", false},
		{OpContains, "a\xffb", false},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, Matchable(tt.op, tt.s), "%s %q", tt.op, tt.s)
	}
}

// TestMatchableNeverRejectsAPieceOfAMessage: any byte-cut prefix, suffix
// or substring of a valid string is matchable with its operator, so the
// parser never refuses a predicate that some message satisfies.
func TestMatchableNeverRejectsAPieceOfAMessage(t *testing.T) {
	runes := []rune{'a', 'é', '€', '𝄞', 0x7ff, 0x800, 0xffff, 0x10000, 0x10ffff, 0xd7ff, 0xe000}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		var b []byte
		for range 1 + rng.IntN(4) {
			b = utf8.AppendRune(b, runes[rng.IntN(len(runes))])
		}
		m := string(b)
		require.True(t, utf8.ValidString(m))
		i := rng.IntN(len(m) + 1)
		j := i + rng.IntN(len(m)-i+1)
		require.True(t, Matchable(OpEq, m), "= %q", m)
		require.True(t, Matchable(OpPrefix, m[:i]), "prefix %q of %q", m[:i], m)
		require.True(t, Matchable(OpSuffix, m[i:]), "suffix %q of %q", m[i:], m)
		require.True(t, Matchable(OpContains, m[i:j]), "contains %q of %q", m[i:j], m)
	}
}

func TestCheckMatchable(t *testing.T) {
	p := MustParse(`a = 1 || s = "ok" && t = "\xff"`)
	err := CheckMatchable(p)
	require.Error(t, err)
	assert.Equal(t, `no message can satisfy t = "\xff": message strings are valid UTF-8 and "\xff" is not`, err.Error())
	for _, ok := range []string{`s prefix "\xc3"`, `s suffix "\xa9"`, `s != "\xff"`, `s < "\xff"`, `s = "\xc3\xa9"`, `"\xff" exists`} {
		assert.NoError(t, CheckMatchable(MustParse(ok)), ok)
	}
}
