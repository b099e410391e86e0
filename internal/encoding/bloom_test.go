package encoding

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func bloomOf(positions ...int) Bloom {
	var b Bloom
	for _, p := range positions {
		b.Set(p)
	}
	return b
}

func randomBloom(r *rand.Rand, m, bits int) Bloom {
	var b Bloom
	for range bits {
		b.Set(r.IntN(m))
	}
	return b
}

func TestBloomSetOperations(t *testing.T) {
	a := bloomOf(0, 63, 64, 511)
	b := bloomOf(0, 64)
	assert.True(t, a.Has(511))
	assert.False(t, a.Has(510))
	assert.Equal(t, 4, a.PopCount())
	assert.Equal(t, []int{0, 63, 64, 511}, a.AppendPositions(nil))
	assert.Equal(t, "{0 63 64 511}", a.String())
	assert.Equal(t, "{}", Bloom{}.String())

	assert.True(t, b.SubsetOf(a))
	assert.False(t, a.SubsetOf(b))
	assert.True(t, b.Covers(a), "the sparser filter covers the denser one")
	assert.True(t, a.SubsetOf(a))
	assert.True(t, Bloom{}.SubsetOf(b), "the zero Bloom is a subset of everything")
	assert.False(t, bloomOf(511).SubsetOf(bloomOf(0, 1, 2)), "a bit in the last word counts")

	assert.Equal(t, bloomOf(0, 63, 64, 100, 511), a.Or(bloomOf(100, 0)))
	assert.True(t, Bloom{}.IsZero())
	assert.False(t, b.IsZero())
}

func TestBloomCompareOrdersByPopcountThenBits(t *testing.T) {
	sparse, lo, hi := bloomOf(500), bloomOf(1, 2), bloomOf(0, 3)
	assert.Equal(t, -1, sparse.Compare(lo), "fewer bits first")
	assert.Equal(t, 1, hi.Compare(lo), "same popcount: the highest differing bit decides")
	assert.Equal(t, -1, lo.Compare(hi))
	assert.Equal(t, 1, bloomOf(64).Compare(bloomOf(63)), "across words")
	assert.Equal(t, 0, lo.Compare(bloomOf(2, 1)))
}

func TestBloomSubsetOfAgainstPositions(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		a, b := randomBloom(r, 512, r.IntN(6)), randomBloom(r, 512, 60+r.IntN(200))
		want := true
		for _, p := range a.AppendPositions(nil) {
			want = want && b.Has(p)
		}
		require.Equal(t, want, a.SubsetOf(b), "%v ⊆ %v", a, b)
	}
}

func TestParamsValidate(t *testing.T) {
	for _, tc := range []struct {
		p   Params
		err string
	}{
		{Params{M: 8, K: 1}, ""},
		{Params{M: 512, K: 32}, ""},
		{Params{M: 192, K: 7}, ""},
		{Params{M: 0, K: 3}, "M=0 bits, want a multiple of 8 in 8..512"},
		{Params{M: 520, K: 3}, "M=520 bits"},
		{Params{M: 100, K: 3}, "M=100 bits"},
		{Params{M: 256, K: 0}, "K=0 hash positions, want 1..32"},
		{Params{M: 256, K: 33}, "K=33 hash positions"},
		{Params{Scheme: SchemeCatV2, M: 64, K: 1}, ""},
		{Params{Scheme: SchemeCatV2, M: 2048, K: 32}, ""},
		{Params{Scheme: SchemeCatV2, M: 1056, K: 6}, ""},
		{Params{Scheme: SchemeCatV2, M: 2080, K: 6}, "M=2080 bits, want a multiple of 32 in 64..2048 for cat-v2"},
		{Params{Scheme: SchemeCatV2, M: 520, K: 6}, "M=520 bits"},
		{Params{Scheme: SchemeCatV2, M: 32, K: 6}, "M=32 bits"},
		{Params{Scheme: SchemeCatV2, M: 512, K: 0}, "K=0 hash positions"},
		{Params{M: 1024, K: 6}, "M=1024 bits, want a multiple of 8 in 8..512"},
		{Params{Scheme: 7, M: 512, K: 6}, "unknown scheme scheme(7)"},
	} {
		err := tc.p.Validate()
		if tc.err == "" {
			assert.NoError(t, err, "%+v", tc.p)
		} else {
			assert.ErrorContains(t, err, tc.err, "%+v", tc.p)
		}
	}
	require.NoError(t, DefaultParams().Validate())
	require.NoError(t, DefaultParamsV1().Validate())
}

func TestWireFormRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for m := 8; m <= maxBitsV1; m += 8 {
		p := Params{M: m, K: 3}
		for range 20 {
			b := randomBloom(r, m, r.IntN(m))
			data := b.AppendBinary([]byte{0xAA}, p)
			require.Len(t, data, 1+m/8)
			assert.Equal(t, byte(0xAA), data[0], "AppendBinary keeps dst")
			got, err := BloomFromBytes(data[1:], p)
			require.NoError(t, err)
			require.Equal(t, b, got, "M=%d", m)
		}
	}
}

func TestWireFormLayout(t *testing.T) {
	// Bit i is bit i%8 of byte i/8: exchanged between brokers.
	p := Params{M: 72, K: 1}
	got := bloomOf(0, 9, 63, 64, 71).AppendBinary(nil, p)
	assert.Equal(t, []byte{0x01, 0x02, 0, 0, 0, 0, 0, 0x80, 0x81}, got)
}

func TestBloomFromBytesRejects(t *testing.T) {
	p := Params{M: 192, K: 7}
	_, err := BloomFromBytes(make([]byte, 23), p)
	assert.EqualError(t, err, "encoding: Bloom wire form is 23 bytes, want 24 for M=192")
	_, err = BloomFromBytes(make([]byte, 25), p)
	assert.EqualError(t, err, "encoding: Bloom wire form is 25 bytes, want 24 for M=192")
	_, err = BloomFromBytes(nil, Params{M: 7, K: 1})
	assert.ErrorContains(t, err, "M=7 bits")
}

func TestAppendBinaryPanicsOnBitsBeyondM(t *testing.T) {
	assert.PanicsWithValue(t, "encoding: Bloom has bit 200 set, beyond M=192", func() {
		bloomOf(3, 200).AppendBinary(nil, Params{M: 192, K: 7})
	})
}

func FuzzBloomFromBytes(f *testing.F) {
	f.Add([]byte{}, 8)
	f.Add(make([]byte, 24), 192)
	f.Add([]byte{0xff, 0x01, 0x80}, 24)
	f.Fuzz(func(t *testing.T, data []byte, m int) {
		p := Params{M: m, K: 4}
		b, err := BloomFromBytes(data, p)
		if err != nil {
			if p.Validate() == nil {
				require.NotEqual(t, m/8, len(data), "a valid M and length must decode")
			}
			return
		}
		require.NoError(t, p.Validate())
		require.Less(t, b.highest(), m, "decoded a bit beyond M")
		require.Equal(t, data, b.AppendBinary(nil, p), "decode then encode must give the bytes back")
	})
}
