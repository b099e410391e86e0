package netem

import (
	"encoding/binary"
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestU32Keys(t *testing.T) {
	// The keys `tc filter add ... u32 match ip dst P` / `match ip6 dst P`
	// install (as `tc filter show` prints them: "match 0a000001/ffffffff at 16").
	tests := []struct {
		prefix string
		want   []u32Key
	}{
		{"10.0.0.1/32", []u32Key{{0xffffffff, 0x0a000001, 16}}},
		{"10.1.2.3/16", []u32Key{{0xffff0000, 0x0a010000, 16}}},
		{"fd00::2/128", []u32Key{{0xffffffff, 0xfd000000, 24}, {0xffffffff, 0, 28}, {0xffffffff, 0, 32}, {0xffffffff, 2, 36}}},
		{"2001:db8:8000::/33", []u32Key{{0xffffffff, 0x20010db8, 24}, {0x80000000, 0x80000000, 28}}},
	}
	for _, tt := range tests {
		p := netip.MustParsePrefix(tt.prefix)
		assert.Equal(t, tt.want, u32Keys(p), tt.prefix)
		back, ok := prefixFromKeys(p.Addr().Is6(), tt.want)
		require.True(t, ok, tt.prefix)
		assert.Equal(t, p.Masked(), back, tt.prefix)
	}
}

func TestPrefixFromKeysRejects(t *testing.T) {
	full := u32Key{Mask: 0xffffffff, Val: 0x0a000001, Off: 16}
	tests := map[string]struct {
		v6   bool
		keys []u32Key
	}{
		"no keys":               {false, nil},
		"source address":        {false, []u32Key{{0xffffffff, 0x0a000001, 12}}},
		"non-contiguous mask":   {false, []u32Key{{0xff00ff00, 0x0a000000, 16}}},
		"bits outside mask":     {false, []u32Key{{0xffff0000, 0x0a000001, 16}}},
		"zero mask":             {false, []u32Key{{0, 0, 16}}},
		"two keys for IPv4":     {false, []u32Key{full, {0xffffffff, 0, 20}}},
		"IPv6 at IPv4 offset":   {true, []u32Key{full}},
		"partial word not last": {true, []u32Key{{0xffff0000, 0xfd000000, 24}, {0xffffffff, 0, 28}}},
		"gap":                   {true, []u32Key{{0xffffffff, 0xfd000000, 24}, {0xffffffff, 0, 32}}},
	}
	for name, tt := range tests {
		_, ok := prefixFromKeys(tt.v6, tt.keys)
		assert.False(t, ok, name)
	}
}

// TestU32RoundTrip: every prefix survives keys and back, on random seeded
// prefixes of both families.
func TestU32RoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(32, 32))
	for range 2000 {
		var raw [16]byte
		binary.BigEndian.PutUint64(raw[:8], rng.Uint64())
		binary.BigEndian.PutUint64(raw[8:], rng.Uint64())
		a := netip.AddrFrom16(raw)
		if rng.IntN(2) == 0 {
			a = netip.AddrFrom4([4]byte(raw[:4]))
		}
		p := netip.PrefixFrom(a, 1+rng.IntN(a.BitLen())).Masked()
		back, ok := prefixFromKeys(a.Is6(), u32Keys(p))
		require.True(t, ok, p)
		require.Equal(t, p, back)
	}
}

// FuzzPrefixFromKeys: whatever the kernel hands back, reading it never
// panics, and anything accepted is exactly what u32Keys would install.
func FuzzPrefixFromKeys(f *testing.F) {
	f.Add(false, []byte{0xff, 0xff, 0xff, 0xff, 0x0a, 0, 0, 1, 0, 0, 0, 16})
	f.Add(true, []byte{0xff, 0xff, 0xff, 0xff, 0xfd, 0, 0, 0, 0, 0, 0, 24, 0xff, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 28})
	f.Fuzz(func(t *testing.T, v6 bool, data []byte) {
		var keys []u32Key
		for len(data) >= 12 {
			keys = append(keys, u32Key{
				Mask: binary.BigEndian.Uint32(data), Val: binary.BigEndian.Uint32(data[4:]), Off: int32(binary.BigEndian.Uint32(data[8:])),
			})
			data = data[12:]
		}
		p, ok := prefixFromKeys(v6, keys)
		if !ok {
			return
		}
		require.Equal(t, v6, p.Addr().Is6())
		require.Equal(t, keys, u32Keys(p))
	})
}
