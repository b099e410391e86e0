package netem

import (
	"encoding/binary"
	"net/netip"
)

// u32Key is one 32-bit match of a u32 selector: (packet word at Off from
// the network header) & Mask == Val, in host order.
type u32Key struct {
	Mask, Val uint32
	Off       int32
}

// Destination address offsets in the IPv4 and IPv6 headers.
const (
	ipv4DstOff = 16
	ipv6DstOff = 24
)

// u32Keys is the selector matching destination prefix p, as `tc filter
// ... u32 match ip dst P` writes it: one key per 32-bit word the mask
// touches.
func u32Keys(p netip.Prefix) []u32Key {
	p = p.Masked()
	raw := p.Addr().AsSlice()
	off := int32(ipv4DstOff)
	if p.Addr().Is6() {
		off = ipv6DstOff
	}
	var keys []u32Key
	for w := 0; w*32 < p.Bits(); w++ {
		bits := min(p.Bits()-w*32, 32)
		mask := ^uint32(0) << (32 - bits)
		keys = append(keys, u32Key{Mask: mask, Val: binary.BigEndian.Uint32(raw[4*w:]) & mask, Off: off + int32(4*w)})
	}
	return keys
}

// prefixFromKeys reads back the destination prefix of a selector made by
// u32Keys. It reports false for any selector u32Keys could not have made
// (other offsets, a non-contiguous mask, bits outside the mask), so a
// filter drip did not install is never mistaken for one it did.
func prefixFromKeys(v6 bool, keys []u32Key) (netip.Prefix, bool) {
	size, off := 4, int32(ipv4DstOff)
	if v6 {
		size, off = 16, ipv6DstOff
	}
	if len(keys) == 0 || len(keys) > size/4 {
		return netip.Prefix{}, false
	}
	raw := make([]byte, size)
	bits := 0
	for i, k := range keys {
		if k.Off != off+int32(4*i) || k.Val&^k.Mask != 0 {
			return netip.Prefix{}, false
		}
		ones := leadingOnes(k.Mask)
		if ones == 0 || k.Mask != ^uint32(0)<<(32-ones) || (ones < 32 && i != len(keys)-1) {
			return netip.Prefix{}, false
		}
		binary.BigEndian.PutUint32(raw[4*i:], k.Val)
		bits += ones
	}
	addr, _ := netip.AddrFromSlice(raw)
	return netip.PrefixFrom(addr, bits), true
}

func leadingOnes(m uint32) int {
	n := 0
	for m&(1<<31) != 0 {
		n++
		m <<= 1
	}
	return n
}
