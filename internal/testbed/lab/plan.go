package lab

import (
	"fmt"
	"net"
	"net/netip"
	"regexp"

	"github.com/dripmesh/drip/internal/topology"
)

// DefaultPrefix is the private range lab sites are numbered from. The
// addresses exist only inside the lab's namespaces, so two labs may use
// the same prefix at once.
var DefaultPrefix = netip.MustParsePrefix("10.77.0.0/16")

// DefaultName is the lab name when none is given.
const DefaultName = "drip"

// NamespacePrefix starts the name of every network namespace a lab
// creates; Down finds leftovers by it.
const NamespacePrefix = "drip-lab-"

var (
	labNameRE  = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,31}$`)
	siteNameRE = regexp.MustCompile(`^[A-Za-z0-9_-][A-Za-z0-9_.-]{0,63}$`)
)

// ValidateName reports whether name can name a lab. Dots are excluded
// because they separate the lab from the site in namespace names, which is
// what keeps lab "a" from matching lab "a-b"'s leftovers.
func ValidateName(name string) error {
	if !labNameRE.MatchString(name) {
		return fmt.Errorf("lab name %q: want 1-32 characters of a-z, 0-9 and '-', starting with a letter or digit", name)
	}
	return nil
}

// NamespaceName is the network namespace of site in lab.
func NamespaceName(lab, site string) string { return NamespacePrefix + lab + "." + site }

// namespacePrefixOf is what every namespace of lab starts with.
func namespacePrefixOf(lab string) string { return NamespacePrefix + lab + "." }

// PlanAddr is the i-th site's default address in prefix: hosts .1 to .254
// of each /24 in turn, so addresses read naturally (10.77.0.1 is site 0)
// and none is a /24's network or broadcast address.
func PlanAddr(prefix netip.Prefix, i int) (netip.Addr, error) {
	if !prefix.Addr().Is4() {
		return netip.Addr{}, fmt.Errorf("lab prefix %s: only IPv4 prefixes are supported", prefix)
	}
	if i < 0 {
		return netip.Addr{}, fmt.Errorf("site index %d is negative", i)
	}
	base := prefix.Masked().Addr().As4()
	off := uint32(i/254)<<8 | uint32(i%254+1)
	v := uint32(base[0])<<24 | uint32(base[1])<<16 | uint32(base[2])<<8 | uint32(base[3])
	v += off
	a := netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
	hostBits := 32 - prefix.Bits()
	if hostBits < 32 && off >= 1<<hostBits-1 || !prefix.Contains(a) {
		return netip.Addr{}, fmt.Errorf("lab prefix %s has no room for site %d", prefix, i)
	}
	return a, nil
}

// Addresses assigns each broker of t (in order) its lab address. A broker
// whose peer, client or metrics address names an IP keeps that IP, which
// must lie in prefix; a broker without addresses gets PlanAddr. That way a
// file written by Generate, and one written by hand, both say where every
// broker listens.
func Addresses(t *topology.Topology, prefix netip.Prefix) ([]netip.Addr, error) {
	if !prefix.Addr().Is4() {
		return nil, fmt.Errorf("lab prefix %s: only IPv4 prefixes are supported", prefix)
	}
	out := make([]netip.Addr, len(t.Brokers))
	owner := map[netip.Addr]string{}
	for i, b := range t.Brokers {
		if !siteNameRE.MatchString(b.Name) {
			return nil, fmt.Errorf("broker %q: a lab site name needs 1-64 characters of A-Z, a-z, 0-9, '_', '-' and '.', not starting with '.'", b.Name)
		}
		a, err := brokerIP(b)
		if err != nil {
			return nil, err
		}
		if !a.IsValid() {
			if a, err = PlanAddr(prefix, i); err != nil {
				return nil, err
			}
		} else if !prefix.Contains(a) {
			return nil, fmt.Errorf("broker %q: address %s is outside the lab prefix %s (generate the file with `driplab lab gen`, or leave the broker's addresses empty)", b.Name, a, prefix)
		}
		if other, dup := owner[a]; dup {
			return nil, fmt.Errorf("brokers %q and %q both have lab address %s", other, b.Name, a)
		}
		owner[a] = b.Name
		out[i] = a
	}
	return out, nil
}

// brokerIP is the one IP a broker's addresses name, or the zero Addr when
// they name none (empty, or an unspecified host like ":7000").
func brokerIP(b topology.Broker) (netip.Addr, error) {
	var ip netip.Addr
	for _, hp := range []struct{ what, addr string }{{"peer", b.Peer}, {"client", b.Client}, {"metrics", b.Metrics}} {
		if hp.addr == "" {
			continue
		}
		host, _, err := net.SplitHostPort(hp.addr)
		if err != nil {
			return netip.Addr{}, fmt.Errorf("broker %q: %s address %q: %w", b.Name, hp.what, hp.addr, err)
		}
		if host == "" {
			continue
		}
		a, err := netip.ParseAddr(host)
		if err != nil {
			return netip.Addr{}, fmt.Errorf("broker %q: %s address %q: the lab needs an IP, not a host name", b.Name, hp.what, hp.addr)
		}
		a = a.Unmap()
		if a.IsUnspecified() {
			continue
		}
		if ip.IsValid() && ip != a {
			return netip.Addr{}, fmt.Errorf("broker %q: addresses name both %s and %s; a lab site has one IP", b.Name, ip, a)
		}
		ip = a
	}
	return ip, nil
}
