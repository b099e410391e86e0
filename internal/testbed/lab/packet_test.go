package lab

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/net/ipv4"
)

func ipv4Packet(dst string, payload int) []byte {
	total := 20 + payload
	p := make([]byte, total)
	p[0] = 0x45
	p[2], p[3] = byte(total>>8), byte(total)
	p[8], p[9] = 64, 17
	copy(p[12:16], netip.MustParseAddr("10.77.0.1").AsSlice())
	copy(p[16:20], netip.MustParseAddr(dst).AsSlice())
	return p
}

func TestIPv4Dst(t *testing.T) {
	a, ok := ipv4Dst(ipv4Packet("10.77.0.3", 8))
	require.True(t, ok)
	assert.Equal(t, "10.77.0.3", a.String())

	withOptions := ipv4Packet("10.77.1.1", 12)
	withOptions[0] = 0x46 // 24-byte header
	a, ok = ipv4Dst(withOptions)
	require.True(t, ok)
	assert.Equal(t, "10.77.1.1", a.String())

	ipv6 := make([]byte, 60)
	ipv6[0] = 0x60
	short := ipv4Packet("10.77.0.3", 8)
	short[3] = 100 // longer than the packet
	badIHL := ipv4Packet("10.77.0.3", 8)
	badIHL[0] = 0x44
	for name, p := range map[string][]byte{"ipv6": ipv6, "empty": nil, "truncated": make([]byte, 19), "total > len": short, "ihl < 5": badIHL} {
		_, ok := ipv4Dst(p)
		assert.False(t, ok, name)
	}
}

// ipv4Dst agrees with golang.org/x/net/ipv4's header parser on whatever
// bytes a TUN may hand over.
func FuzzIPv4Dst(f *testing.F) {
	f.Add(ipv4Packet("10.77.0.3", 8))
	f.Add([]byte{0x46, 0, 0, 24, 0, 0, 0, 0, 64, 6, 0, 0, 10, 77, 0, 1, 10, 77, 0, 2, 1, 1, 1, 1})
	f.Add(make([]byte, 40))
	f.Fuzz(func(t *testing.T, b []byte) {
		dst, ok := ipv4Dst(b)
		h, err := ipv4.ParseHeader(b)
		inBounds := err == nil && h.Version == 4 && h.Len >= 20 && h.TotalLen >= h.Len && h.TotalLen <= len(b)
		if ok != inBounds {
			t.Fatalf("ipv4Dst ok=%v, x/net header %+v err %v", ok, h, err)
		}
		if ok && !h.Dst.Equal(dst.AsSlice()) {
			t.Fatalf("dst %s, x/net says %s", dst, h.Dst)
		}
	})
}
