package encoding

import (
	"bytes"
	"encoding/hex"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSchemeNames(t *testing.T) {
	for _, s := range Schemes() {
		got, err := ParseScheme(s.String())
		require.NoError(t, err)
		assert.Equal(t, s, got)
	}
	// Brokers older than the scheme field send none: they are cat-v1.
	got, err := ParseScheme("")
	require.NoError(t, err)
	assert.Equal(t, SchemeCatV1, got)
	_, err = ParseScheme("cat-v3")
	assert.EqualError(t, err, `unknown Bloom scheme "cat-v3", want cat-v1 or cat-v2`)
	// The names are exchanged between brokers.
	assert.Equal(t, "cat-v1", SchemeCatV1.String())
	assert.Equal(t, "cat-v2", SchemeCatV2.String())
	assert.Equal(t, "scheme(9)", Scheme(9).String())
	assert.Equal(t, "cat-v2 M=2048 K=6", DefaultParams().String())
	for _, s := range Schemes() {
		assert.Equal(t, s, s.DefaultParams().Scheme)
		assert.NoError(t, s.DefaultParams().Validate())
	}
	assert.Equal(t, DefaultParamsV1(), SchemeCatV1.DefaultParams())
	assert.Error(t, Scheme(9).DefaultParams().Validate())
}

func TestFiltersWireFormRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(41, 42))
	for _, p := range []Params{{M: 8, K: 1}, DefaultParamsV1(), {Scheme: SchemeCatV2, M: 64, K: 2}, {Scheme: SchemeCatV2, M: 1056, K: 4}, DefaultParams()} {
		for range 200 {
			filters := make([]Bloom, r.IntN(6))
			for i := range filters {
				filters[i] = randomBloom(r, p.M, []int{0, 1, 12, 40, p.M}[r.IntN(5)])
			}
			filters = append(filters, bloomOf(0), bloomOf(p.M-1))
			data := p.AppendFilters([]byte{0xAA}, filters)
			require.Equal(t, byte(0xAA), data[0], "AppendFilters keeps dst")
			require.Len(t, data, 1+p.FiltersSize(filters))
			got, err := p.ParseFilters(data[1:])
			require.NoError(t, err, "%v", p)
			require.Equal(t, filters, got, "%v", p)
		}
	}
	assert.Empty(t, DefaultParams().AppendFilters(nil, nil))
	got, err := DefaultParams().ParseFilters(nil)
	require.NoError(t, err)
	assert.Empty(t, got)
}

// The wire forms are exchanged between brokers: do not change.
func TestFiltersWireFormLayout(t *testing.T) {
	// cat-v1: the dense forms, concatenated.
	v1 := Params{M: 16, K: 1}
	assert.Equal(t, []byte{0x01, 0x80, 0x00, 0x02}, v1.AppendFilters(nil, []Bloom{bloomOf(0, 15), bloomOf(9)}))
	// cat-v2: count, then gaps: {0, 15} is 2, 0, 14; {} is 0; {300} is 1, 300
	// as a uvarint (ac 02).
	v2 := DefaultParams()
	assert.Equal(t, []byte{2, 0, 14, 0, 1, 0xac, 0x02}, v2.AppendFilters(nil, []Bloom{bloomOf(0, 15), {}, bloomOf(300)}))
}

func TestParseFiltersRejects(t *testing.T) {
	v2 := Params{Scheme: SchemeCatV2, M: 64, K: 2}
	for _, tc := range []struct {
		p    Params
		data string
		want string
	}{
		{DefaultParamsV1(), "00", "1 filter bytes is not a multiple of 64"},
		{Params{M: 7, K: 1}, "", "encoding: M=7 bits, want a multiple of 8 in 8..512"},
		{v2, "02 00", "filter 0: position 1 truncated or overlong"},
		{v2, "01 00 80", "filter 1: truncated or overlong position count"},
		{v2, "41", "filter 0: 65 positions, more than M=64"},
		{v2, "01 40", "filter 0: position 0 is beyond M=64"},
		{v2, "02 3f 00", "filter 0: position 1 is beyond M=64"},
		{v2, "01 ffffffffffffffffff01", "filter 0: position 0 is beyond M=64"}, // 2^64-1
		{v2, "01 ffffffffffffffffffff01", "filter 0: position 0 truncated or overlong"},
	} {
		data, err := hex.DecodeString(stripSpaces(tc.data))
		require.NoError(t, err)
		_, err = tc.p.ParseFilters(data)
		assert.EqualError(t, err, tc.want, "%v %s", tc.p, tc.data)
	}
}

func stripSpaces(s string) string { return string(bytes.ReplaceAll([]byte(s), []byte(" "), nil)) }

func TestAppendFiltersPanicsOnBitsBeyondM(t *testing.T) {
	assert.PanicsWithValue(t, "encoding: Bloom has bit 70 set, beyond M=64", func() {
		Params{Scheme: SchemeCatV2, M: 64, K: 1}.AppendFilters(nil, []Bloom{bloomOf(3, 70)})
	})
}

// Advertisements come from peers: whatever the bytes, ParseFilters either
// fails or returns Blooms within M that encode back to an equivalent form.
func FuzzParseFilters(f *testing.F) {
	p := DefaultParams()
	f.Add(p.AppendFilters(nil, []Bloom{bloomOf(0, 15), {}, bloomOf(300, 2047)}), uint8(1), 2048)
	f.Add([]byte{0x41}, uint8(1), 64)
	f.Add(make([]byte, 64), uint8(0), 512)
	f.Fuzz(func(t *testing.T, data []byte, scheme uint8, m int) {
		p := Params{Scheme: Scheme(scheme), M: m, K: 3}
		filters, err := p.ParseFilters(data)
		if err != nil {
			return
		}
		require.NoError(t, p.Validate())
		for _, b := range filters {
			require.Less(t, b.highest(), p.M, "decoded a bit beyond M")
		}
		again, err := p.ParseFilters(p.AppendFilters(nil, filters))
		require.NoError(t, err)
		require.Equal(t, filters, again)
	})
}

// TestCountFiltersCountsWhatParseFiltersParses: the first pass that sizes
// ParseFilters' result counts its filters, for well-formed lists of every
// size.
func TestCountFiltersCountsWhatParseFiltersParses(t *testing.T) {
	r := rand.New(rand.NewPCG(8, 8))
	p := DefaultParams()
	for n := range 50 {
		var filters []Bloom
		for range n {
			filters = append(filters, randomBloom(r, p.M, r.IntN(40)))
		}
		data := p.AppendFilters(nil, filters)
		assert.Equal(t, n, countFilters(data))
		got, err := p.ParseFilters(data)
		require.NoError(t, err)
		assert.Len(t, got, n)
		assert.Equal(t, n, cap(got), "sized once")
	}
}
