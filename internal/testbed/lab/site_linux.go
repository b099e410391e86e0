package lab

import (
	"fmt"
	"net"
	"net/netip"
	"os"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// createSite creates a site's namespace with loopback up and a TUN device
// holding addr and a route to the whole lab prefix, and returns the TUN.
func createSite(nsName string, addr netip.Addr, prefix netip.Prefix) (*os.File, error) {
	var (
		tun *os.File
		ns  = netns.None()
	)
	err := onThread(func() error {
		var err error
		ns, err = netns.NewNamed(nsName)
		return err
	}, func() error {
		var err error
		if tun, err = openTUN(tunName); err != nil {
			return err
		}
		// No IPv6 on the TUN: the kernel's router solicitations would only
		// be noise for the daemon. Best effort: IPv6 may be absent.
		_ = os.WriteFile("/proc/sys/net/ipv6/conf/"+tunName+"/disable_ipv6", []byte("1"), 0)
		return nil
	})
	defer ns.Close()
	if err != nil {
		if tun != nil {
			tun.Close()
		}
		return nil, fmt.Errorf("create network namespace %s: %w", nsName, err)
	}
	if err := configureSite(ns, addr, prefix); err != nil {
		tun.Close()
		return nil, fmt.Errorf("network namespace %s: %w", nsName, err)
	}
	return tun, nil
}

func configureSite(ns netns.NsHandle, addr netip.Addr, prefix netip.Prefix) error {
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		return fmt.Errorf("netlink: %w", err)
	}
	defer h.Close()
	lo, err := h.LinkByName("lo")
	if err != nil {
		return fmt.Errorf("loopback: %w", err)
	}
	if err := h.LinkSetUp(lo); err != nil {
		return fmt.Errorf("loopback up: %w", err)
	}
	tl, err := h.LinkByName(tunName)
	if err != nil {
		return fmt.Errorf("tun %s: %w", tunName, err)
	}
	if err := h.LinkSetUp(tl); err != nil {
		return fmt.Errorf("tun %s up: %w", tunName, err)
	}
	ip := net.IP(addr.AsSlice())
	if err := h.AddrAdd(tl, &netlink.Addr{IPNet: &net.IPNet{IP: ip, Mask: net.CIDRMask(32, 32)}}); err != nil {
		return fmt.Errorf("address %s: %w", addr, err)
	}
	p := prefix.Masked()
	route := &netlink.Route{
		LinkIndex: tl.Attrs().Index,
		Dst:       &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), 32)},
		Src:       ip,
		Scope:     netlink.SCOPE_LINK,
	}
	if err := h.RouteAdd(route); err != nil {
		return fmt.Errorf("route %s: %w", p, err)
	}
	return nil
}

// openTUN creates the TUN device name in the calling thread's network
// namespace and returns it ready for non-blocking reads through the Go
// poller. The device is not persistent: it disappears when the file is
// closed, including when the daemon dies, so a killed daemon leaves no
// devices behind.
func openTUN(name string) (*os.File, error) {
	fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open /dev/net/tun: %w", err)
	}
	ifr, err := unix.NewIfreq(name)
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("tun %q: %w", name, err)
	}
	// IFF_NO_PI: bare IP packets, no 4-byte protocol header.
	ifr.SetUint16(unix.IFF_TUN | unix.IFF_NO_PI)
	if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("tun %q: TUNSETIFF: %w", name, err)
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("tun %q: %w", name, err)
	}
	return os.NewFile(uintptr(fd), "/dev/net/tun:"+name), nil
}

// mntDetach unmounts a namespace's name even while the namespace is busy.
const mntDetach = unix.MNT_DETACH
