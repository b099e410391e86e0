package lab

import "net/netip"

// ipv4Dst returns the destination address of an IPv4 packet, and false
// for anything else the kernel may write into a TUN (IPv6, truncated or
// malformed headers), which the daemon drops.
func ipv4Dst(pkt []byte) (netip.Addr, bool) {
	if len(pkt) < 20 || pkt[0]>>4 != 4 {
		return netip.Addr{}, false
	}
	ihl := int(pkt[0]&0x0f) * 4
	total := int(pkt[2])<<8 | int(pkt[3])
	if ihl < 20 || total < ihl || total > len(pkt) {
		return netip.Addr{}, false
	}
	return netip.AddrFrom4([4]byte(pkt[16:20])), true
}
