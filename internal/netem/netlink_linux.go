package netem

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// htbQuantum is the bytes a class may send per round when it borrows.
// drip's classes are all children of the root and never borrow, so the
// value only has to be legal; setting it keeps the kernel from deriving
// one from the rate and logging that it is out of range.
const htbQuantum = 1 << 16

// Netlink is the real TC: one network device, programmed over rtnetlink.
// It is not safe for concurrent use.
type Netlink struct {
	h    *netlink.Handle
	link netlink.Link
	// raw carries the requests the netlink package cannot express: a
	// bfifo with its limit, and reading that limit back.
	raw *nl.SocketHandle
}

var _ TC = (*Netlink)(nil)

// OpenNetlink opens device dev in the caller's network namespace.
func OpenNetlink(dev string) (*Netlink, error) { return OpenNetlinkAt(netns.None(), dev) }

// OpenNetlinkAt opens device dev in network namespace ns (netns.None():
// the caller's). The sockets are created in ns, so no thread of the
// process has to stay there.
func OpenNetlinkAt(ns netns.NsHandle, dev string) (*Netlink, error) {
	h, err := netlink.NewHandleAt(ns, unix.NETLINK_ROUTE)
	if err != nil {
		return nil, fmt.Errorf("netlink: %w", err)
	}
	link, err := h.LinkByName(dev)
	if err != nil {
		h.Close()
		return nil, fmt.Errorf("device %q: %w", dev, err)
	}
	sock, err := nl.GetNetlinkSocketAt(ns, netns.None(), unix.NETLINK_ROUTE)
	if err != nil {
		h.Close()
		return nil, fmt.Errorf("netlink: %w", err)
	}
	return &Netlink{h: h, link: link, raw: &nl.SocketHandle{Socket: sock}}, nil
}

// Close releases the netlink sockets; what was installed stays.
func (n *Netlink) Close() {
	n.h.Close()
	n.raw.Close()
}

func (n *Netlink) index() int { return n.link.Attrs().Index }

func (n *Netlink) qattrs(q Qdisc) netlink.QdiscAttrs {
	return netlink.QdiscAttrs{LinkIndex: n.index(), Handle: q.Handle, Parent: q.Parent}
}

// Qdiscs lists the device's qdiscs.
func (n *Netlink) Qdiscs() ([]Qdisc, error) {
	list, err := n.h.QdiscList(n.link)
	if err != nil {
		return nil, err
	}
	var limits map[uint32]uint32
	out := make([]Qdisc, 0, len(list))
	for _, nq := range list {
		a := nq.Attrs()
		q := Qdisc{Handle: a.Handle, Parent: a.Parent, Kind: nq.Type()}
		switch v := nq.(type) {
		case *netlink.Htb:
			q.Default = uint16(v.Defcls)
		case *netlink.Netem:
			q.Limit = v.Limit
			q.Netem = Impairment{Delay: fromTicks(v.Latency), Jitter: fromTicks(v.Jitter), Loss: float64(v.Loss) / math.MaxUint32}
		}
		if q.Kind == KindBFIFO {
			if limits == nil {
				if limits, err = n.fifoLimits(); err != nil {
					return nil, err
				}
			}
			q.Limit = limits[q.Handle]
		}
		out = append(out, q)
	}
	return out, nil
}

// AddQdisc creates q; at the root it replaces the kernel's default qdisc,
// under a class the class's default leaf.
func (n *Netlink) AddQdisc(q Qdisc) error {
	err := n.modifyQdisc(unix.RTM_NEWQDISC, unix.NLM_F_CREATE|unix.NLM_F_EXCL, q)
	if err != nil && q.Kind == KindNetem && errors.Is(err, unix.ENOENT) {
		// ENOENT means an unknown kind or a missing parent; the reconciler
		// adds classes before leaves, so a present parent settles it.
		if classes, lerr := n.Classes(); lerr == nil && hasClass(classes, q.Parent) {
			return fmt.Errorf("%w: %w", ErrNetemUnsupported, err)
		}
	}
	return err
}

// ChangeQdisc alters q's options in place.
func (n *Netlink) ChangeQdisc(q Qdisc) error { return n.modifyQdisc(unix.RTM_NEWQDISC, 0, q) }

// DeleteQdisc removes q and everything under it.
func (n *Netlink) DeleteQdisc(q Qdisc) error {
	return n.h.QdiscDel(&netlink.GenericQdisc{QdiscAttrs: n.qattrs(q), QdiscType: q.Kind})
}

func (n *Netlink) modifyQdisc(cmd, flags int, q Qdisc) error {
	var nq netlink.Qdisc
	switch q.Kind {
	case KindHTB:
		htb := netlink.NewHtb(n.qattrs(q))
		htb.Defcls = uint32(q.Default)
		nq = htb
	case KindNetem:
		nq = &netlink.Netem{
			QdiscAttrs: n.qattrs(q),
			Latency:    toTicks(q.Netem.Delay),
			Jitter:     toTicks(q.Netem.Jitter),
			Loss:       uint32(math.Round(q.Netem.Loss * math.MaxUint32)),
			Limit:      q.Limit,
		}
	case KindBFIFO:
		return n.modifyFifo(cmd, flags, q)
	default:
		return fmt.Errorf("qdisc kind %q is not one drip installs", q.Kind)
	}
	if flags == 0 {
		return n.h.QdiscChange(nq)
	}
	return n.h.QdiscAdd(nq)
}

// modifyFifo sends a bfifo with its byte limit (struct tc_fifo_qopt, the
// whole of TCA_OPTIONS), which the netlink package has no type for.
func (n *Netlink) modifyFifo(cmd, flags int, q Qdisc) error {
	req := nl.NewNetlinkRequest(cmd, flags|unix.NLM_F_ACK)
	req.Sockets = map[int]*nl.SocketHandle{unix.NETLINK_ROUTE: n.raw}
	req.AddData(&nl.TcMsg{Family: nl.FAMILY_ALL, Ifindex: int32(n.index()), Handle: q.Handle, Parent: q.Parent})
	req.AddData(nl.NewRtAttr(nl.TCA_KIND, nl.ZeroTerminated(q.Kind)))
	req.AddData(nl.NewRtAttr(nl.TCA_OPTIONS, nl.Uint32Attr(q.Limit)))
	_, err := req.Execute(unix.NETLINK_ROUTE, 0)
	return err
}

// fifoLimits reads the limit of every bfifo on the device by handle.
func (n *Netlink) fifoLimits() (map[uint32]uint32, error) {
	req := nl.NewNetlinkRequest(unix.RTM_GETQDISC, unix.NLM_F_DUMP)
	req.Sockets = map[int]*nl.SocketHandle{unix.NETLINK_ROUTE: n.raw}
	req.AddData(&nl.TcMsg{Family: nl.FAMILY_ALL, Ifindex: int32(n.index())})
	msgs, err := req.Execute(unix.NETLINK_ROUTE, unix.RTM_NEWQDISC)
	if err != nil {
		return nil, fmt.Errorf("list qdisc limits: %w", err)
	}
	out := map[uint32]uint32{}
	for _, m := range msgs {
		if len(m) < nl.SizeofTcMsg {
			continue
		}
		msg := nl.DeserializeTcMsg(m)
		if int(msg.Ifindex) != n.index() {
			continue
		}
		attrs, err := nl.ParseRouteAttr(m[nl.SizeofTcMsg:])
		if err != nil {
			return nil, fmt.Errorf("list qdisc limits: %w", err)
		}
		var kind string
		var opts []byte
		for _, a := range attrs {
			switch a.Attr.Type {
			case nl.TCA_KIND:
				kind = unix.ByteSliceToString(a.Value)
			case nl.TCA_OPTIONS:
				opts = a.Value
			}
		}
		if kind == KindBFIFO && len(opts) >= 4 {
			out[msg.Handle] = nl.NativeEndian().Uint32(opts)
		}
	}
	return out, nil
}

// Classes lists the device's classes.
func (n *Netlink) Classes() ([]Class, error) {
	list, err := n.h.ClassList(n.link, 0)
	if err != nil {
		return nil, err
	}
	out := make([]Class, 0, len(list))
	for _, nc := range list {
		c := Class{Handle: nc.Attrs().Handle, Parent: nc.Attrs().Parent}
		if c.Parent == HandleRoot {
			// The kernel reports a top-level class's parent as TC_H_ROOT;
			// it was added (and is named) under its qdisc.
			c.Parent = MakeHandle(Major(c.Handle), 0)
		}
		if htb, ok := nc.(*netlink.HtbClass); ok {
			c.Rate, c.Ceil = htb.Rate, htb.Ceil
		}
		out = append(out, c)
	}
	return out, nil
}

func (n *Netlink) htbClass(c Class) *netlink.HtbClass {
	return netlink.NewHtbClass(
		netlink.ClassAttrs{LinkIndex: n.index(), Handle: c.Handle, Parent: c.Parent},
		netlink.HtbClassAttrs{
			Rate: c.Rate * 8, Ceil: c.Ceil * 8, // bits per second
			Buffer: htbBurst(c.Rate), Cbuffer: htbBurst(c.Ceil),
			Quantum: htbQuantum,
		},
	)
}

// htbBurst is the bytes a class may send at once after idling: tc's
// default of one millisecond at the rate plus an MTU. It is set here
// because the netlink package derives it from a clock rate that modern
// kernels report as 1 GHz, leaving a fast class (the unshaped ones) with
// no burst at all.
func htbBurst(rate uint64) uint32 {
	return uint32(min(rate/1000+1600, math.MaxUint32))
}

// AddClass creates an htb class.
func (n *Netlink) AddClass(c Class) error { return n.h.ClassAdd(n.htbClass(c)) }

// ChangeClass changes an htb class's rates in place.
func (n *Netlink) ChangeClass(c Class) error { return n.h.ClassChange(n.htbClass(c)) }

// DeleteClass removes a class and its leaf.
func (n *Netlink) DeleteClass(c Class) error {
	return n.h.ClassDel(&netlink.HtbClass{ClassAttrs: netlink.ClassAttrs{LinkIndex: n.index(), Handle: c.Handle, Parent: c.Parent}})
}

// Filters lists the u32 filters on drip's root qdisc. u32's own hash-table
// entries are left out; a filter that is not a destination match drip
// could have made is listed with an invalid Dst, so the reconciler
// removes it.
func (n *Netlink) Filters() ([]Filter, error) {
	list, err := n.h.FilterList(n.link, RootHandle)
	if err != nil {
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.EINVAL) {
			return nil, nil // no drip root: no filters of drip's
		}
		return nil, err
	}
	var out []Filter
	for _, nf := range list {
		a := nf.Attrs()
		f := Filter{Parent: a.Parent, Priority: a.Priority, ID: a.Handle}
		u, isU32 := nf.(*netlink.U32)
		if isU32 && u.Sel == nil {
			continue // a hash table, not a match
		}
		if a.Handle == 0 {
			continue
		}
		if isU32 {
			f.Class = u.ClassId
			keys := make([]u32Key, len(u.Sel.Keys))
			for i, k := range u.Sel.Keys {
				keys[i] = u32Key{Mask: k.Mask, Val: k.Val, Off: k.Off}
			}
			if u.Sel.Offmask == 0 && u.Sel.Flags&nl.TC_U32_TERMINAL != 0 {
				switch a.Protocol {
				case unix.ETH_P_IP:
					f.Dst, _ = prefixFromKeys(false, keys)
				case unix.ETH_P_IPV6:
					f.Dst, _ = prefixFromKeys(true, keys)
				}
			}
		}
		out = append(out, f)
	}
	return out, nil
}

// AddFilter attaches a u32 destination match.
func (n *Netlink) AddFilter(f Filter) error {
	proto := uint16(unix.ETH_P_IP)
	if f.Dst.Addr().Is6() {
		proto = unix.ETH_P_IPV6
	}
	sel := &nl.TcU32Sel{Flags: nl.TC_U32_TERMINAL}
	for _, k := range u32Keys(f.Dst) {
		sel.Keys = append(sel.Keys, nl.TcU32Key{Mask: k.Mask, Val: k.Val, Off: k.Off})
	}
	return n.h.FilterAdd(&netlink.U32{
		FilterAttrs: netlink.FilterAttrs{LinkIndex: n.index(), Parent: f.Parent, Priority: f.Priority, Protocol: proto},
		ClassId:     f.Class,
		Sel:         sel,
	})
}

// DeleteFilter removes the filter with f's ID. The protocol is left 0,
// which the kernel takes as "whichever this priority has".
func (n *Netlink) DeleteFilter(f Filter) error {
	return n.h.FilterDel(&netlink.U32{FilterAttrs: netlink.FilterAttrs{
		LinkIndex: n.index(), Parent: f.Parent, Priority: f.Priority, Handle: f.ID,
	}})
}

func hasClass(cs []Class, h uint32) bool {
	for _, c := range cs {
		if c.Handle == h {
			return true
		}
	}
	return false
}

// toTicks and fromTicks convert to and from the packet scheduler's clock
// (/proc/net/psched), in which netem takes delay and jitter.
func toTicks(d time.Duration) uint32 {
	t := math.Round(float64(d.Microseconds()) * netlink.TickInUsec())
	return uint32(min(t, math.MaxUint32))
}

func fromTicks(t uint32) time.Duration {
	us := math.Round(float64(t) / netlink.TickInUsec())
	return time.Duration(us) * time.Microsecond
}
