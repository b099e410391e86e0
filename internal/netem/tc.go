package netem

import (
	"errors"
	"fmt"
	"net/netip"
	"time"
)

// Handle numbering. A handle is major:minor, 16 bits each. Everything drip
// installs lives under RootMajor, and per-neighbour objects are numbered
// from the neighbour's router ID, so `tc` output reads naturally
// (router 5: class d1:1005, leaf 1005:).
const (
	// RootMajor marks drip's root qdisc; a root with this major is drip's
	// own, left over or current.
	RootMajor = 0xd1
	// DefaultMinor is the class of traffic to non-neighbours.
	DefaultMinor = 0xffff
	// peerBase + router ID is a neighbour's class minor and leaf major.
	peerBase = 0x1000
	// MaxRouterID keeps leaf majors below 0x8000: the kernel numbers the
	// qdiscs it creates by itself from 0x8001 up, and a collision would
	// make adding drip's leaf fail.
	MaxRouterID = 0x7fff - peerBase

	// HandleRoot is the parent of a device's root qdisc (TC_H_ROOT).
	HandleRoot = 0xffffffff
)

// MakeHandle joins a major and minor number.
func MakeHandle(major, minor uint16) uint32 { return uint32(major)<<16 | uint32(minor) }

// Major and Minor split a handle.
func Major(h uint32) uint16 { return uint16(h >> 16) }

// Minor is the low half of a handle.
func Minor(h uint32) uint16 { return uint16(h) }

// HandleString prints a handle as tc does ("d1:1005", "1005:", "root").
func HandleString(h uint32) string {
	switch {
	case h == HandleRoot:
		return "root"
	case Minor(h) == 0:
		return fmt.Sprintf("%x:", Major(h))
	default:
		return fmt.Sprintf("%x:%x", Major(h), Minor(h))
	}
}

// RootHandle is drip's root qdisc.
var RootHandle = MakeHandle(RootMajor, 0)

// DefaultClass takes traffic no filter matches.
var DefaultClass = MakeHandle(RootMajor, DefaultMinor)

// PeerClass is the htb class of the neighbour with router ID id.
func PeerClass(id uint32) uint32 { return MakeHandle(RootMajor, uint16(peerBase+id)) }

// PeerLeaf is the handle of the leaf qdisc under PeerClass(id).
func PeerLeaf(id uint32) uint32 { return MakeHandle(uint16(peerBase+id), 0) }

// isOwnLeaf tells whether h is in drip's leaf numbering.
func isOwnLeaf(h uint32) bool {
	return Minor(h) == 0 && Major(h) >= peerBase && Major(h) <= peerBase+MaxRouterID
}

// Qdisc kinds drip installs or recognises.
const (
	KindHTB   = "htb"
	KindNetem = "netem"
	KindBFIFO = "bfifo"
)

// Qdisc is a queueing discipline as the reconciler sees it: only the
// fields drip sets, so comparing desired and installed is meaningful.
type Qdisc struct {
	Handle uint32
	Parent uint32 // HandleRoot for the device's root
	Kind   string
	// Default is, for htb, the minor number of the class that takes
	// unclassified traffic.
	Default uint16
	// Limit bounds the queue: bytes for bfifo, packets for netem.
	Limit uint32
	// Netem holds the impairments of a netem qdisc.
	Netem Impairment
}

func (q Qdisc) String() string {
	s := fmt.Sprintf("qdisc %s %s parent %s", q.Kind, HandleString(q.Handle), HandleString(q.Parent))
	switch q.Kind {
	case KindHTB:
		s += fmt.Sprintf(" default %x", q.Default)
	case KindBFIFO:
		s += fmt.Sprintf(" limit %db", q.Limit)
	case KindNetem:
		s += fmt.Sprintf(" limit %d %s", q.Limit, q.Netem)
	}
	return s
}

// Impairment is what netem adds on top of rate shaping.
type Impairment struct {
	Delay  time.Duration // one way
	Jitter time.Duration
	Loss   float64 // probability in [0, 1]
}

// Zero reports whether the impairment changes nothing.
func (i Impairment) Zero() bool { return i.Delay == 0 && i.Jitter == 0 && i.Loss == 0 }

func (i Impairment) String() string {
	if i.Zero() {
		return "none"
	}
	return fmt.Sprintf("delay %v jitter %v loss %g%%", i.Delay, i.Jitter, i.Loss*100)
}

// Class is an htb class.
type Class struct {
	Handle uint32
	Parent uint32
	Rate   uint64 // guaranteed bytes per second
	Ceil   uint64 // at most this many bytes per second
}

func (c Class) String() string {
	return fmt.Sprintf("class htb %s parent %s rate %dB/s ceil %dB/s", HandleString(c.Handle), HandleString(c.Parent), c.Rate, c.Ceil)
}

// Filter is a u32 filter sending packets to one destination prefix into a
// class.
type Filter struct {
	Parent   uint32 // the qdisc it hangs on
	Priority uint16 // one per address family: a u32 instance matches one protocol
	Dst      netip.Prefix
	Class    uint32 // flowid
	// ID is the kernel's handle of an installed filter (set by listing,
	// needed to delete it); it is not part of what a filter means.
	ID uint32
}

func (f Filter) String() string {
	return fmt.Sprintf("filter u32 parent %s prio %d dst %s flowid %s", HandleString(f.Parent), f.Priority, f.Dst, HandleString(f.Class))
}

// key identifies a filter by meaning; the kernel ID is left out.
func (f Filter) key() Filter { f.ID = 0; return f }

// State is a set of qdiscs, classes and filters on one device.
type State struct {
	Qdiscs  []Qdisc
	Classes []Class
	Filters []Filter
}

// Empty reports whether the state installs nothing.
func (s State) Empty() bool { return len(s.Qdiscs) == 0 && len(s.Classes) == 0 && len(s.Filters) == 0 }

// TC is the traffic-control operations the reconciler needs on one device.
// Add fails if the object exists; Change alters an existing one in place
// (same handle, parent and kind); Delete of a qdisc takes its classes,
// filters and children with it.
type TC interface {
	Qdiscs() ([]Qdisc, error)
	AddQdisc(Qdisc) error
	ChangeQdisc(Qdisc) error
	DeleteQdisc(Qdisc) error

	Classes() ([]Class, error)
	AddClass(Class) error
	ChangeClass(Class) error
	DeleteClass(Class) error

	// Filters lists the filters on drip's root qdisc.
	Filters() ([]Filter, error)
	AddFilter(Filter) error
	DeleteFilter(Filter) error
}

// ErrNetemUnsupported is wrapped by a TC's AddQdisc when the kernel has no
// netem qdisc (sch_netem not built or not loadable).
var ErrNetemUnsupported = errors.New("the kernel has no netem qdisc (sch_netem)")

// ErrForeignRoot is returned when the device's root qdisc was installed by
// someone else: drip replaces only the kernel's default root or its own.
var ErrForeignRoot = errors.New("the device's root qdisc is not drip's")
