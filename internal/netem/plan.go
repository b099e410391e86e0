package netem

import (
	"cmp"
	"fmt"
	"math"
	"net"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/dripmesh/drip/internal/topology"
)

// UnshapedRate is the htb rate of classes that must not limit: the default
// class and links without a bandwidth. htb needs some rate; 100 Gbit/s is
// beyond what a pod's veth carries.
const UnshapedRate = 100e9 / 8

// Queue bounds. A bfifo leaf is the queue in front of the rate limit: long
// enough to absorb a TCP window's burst without loss, short enough not to
// add seconds of delay on a slow link.
const (
	fifoTime     = 100 * time.Millisecond // of traffic at the link's rate
	fifoMinBytes = 64 << 10
	fifoMaxBytes = 4 << 20
	// A netem qdisc holds every packet for its delay, so it needs room for
	// rate × (delay + jitter) of traffic, with a margin; the kernel's
	// default of 1000 packets is too small for fast, long links.
	netemMinPackets = 1000
	netemMaxPackets = 1 << 20
	packetBytes     = 1500
)

// Filter priorities: one u32 instance per address family.
const (
	PriorityIPv4 = 1
	PriorityIPv6 = 2
)

// Input is what a plan is made from.
type Input struct {
	Topology *topology.Topology
	// Self is the broker whose egress is shaped.
	Self string
	// Addrs holds each neighbour's resolved addresses by broker name. A
	// neighbour without addresses keeps its class but gets no filter.
	Addrs map[string][]netip.Addr
	// NoNetem is set once the kernel refused a netem qdisc: impairments are
	// then left out (and reported), rate shaping still applies.
	NoNetem bool
}

// Feature is one impairment netem provides.
type Feature string

// The impairments, in the order they are reported.
const (
	FeatureDelay  Feature = "delay"
	FeatureJitter Feature = "jitter"
	FeatureLoss   Feature = "loss"
)

// Features lists every Feature.
var Features = []Feature{FeatureDelay, FeatureJitter, FeatureLoss}

// PeerPlan is the shaping of traffic to one neighbour.
type PeerPlan struct {
	Name  string
	ID    uint32
	Class uint32
	// Rate is the link's bandwidth in bytes per second; 0 when the link
	// has none, and the class then does not limit.
	Rate uint64
	// Impairment is what the link asks for.
	Impairment Impairment
	// Missing lists the impairments asked for but not applied because the
	// kernel lacks netem.
	Missing []Feature
	// Addrs are the destinations filtered into Class.
	Addrs []netip.Addr
}

// Plan is the desired shaping of one broker's egress.
type Plan struct {
	State State
	Peers []PeerPlan
	// Warnings are problems the plan works around (a neighbour sharing
	// another's address).
	Warnings []string
}

// NewPlan computes the desired state: an htb root with a default class,
// and per neighbour (in router ID order) a class at the link's rate, a
// netem leaf for its impairments (a bfifo when there are none or the
// kernel lacks netem) and a filter per address. A broker without
// neighbours gets an empty State: nothing to install.
func NewPlan(in Input) (Plan, error) {
	if in.Topology == nil {
		return Plan{}, fmt.Errorf("netem: no topology")
	}
	if _, ok := in.Topology.Find(in.Self); !ok {
		return Plan{}, fmt.Errorf("netem: topology has no broker named %q", in.Self)
	}
	var p Plan
	nbs := in.Topology.Neighbors(in.Self)
	if len(nbs) == 0 {
		return p, nil
	}
	p.State.Qdiscs = append(p.State.Qdiscs, Qdisc{Handle: RootHandle, Parent: HandleRoot, Kind: KindHTB, Default: DefaultMinor})
	owner := map[netip.Addr]string{}
	for _, n := range nbs {
		id := *n.Broker.ID
		if id > MaxRouterID {
			return Plan{}, fmt.Errorf("netem: neighbour %q has router ID %d; tc handles fit IDs up to %d", n.Broker.Name, id, MaxRouterID)
		}
		pp := PeerPlan{
			Name:  n.Broker.Name,
			ID:    id,
			Class: PeerClass(id),
			Rate:  bytesPerSecond(float64(n.Link.Bandwidth)),
			Impairment: Impairment{
				Delay:  time.Duration(n.Link.Delay).Round(time.Microsecond),
				Jitter: time.Duration(n.Link.Jitter).Round(time.Microsecond),
				Loss:   float64(n.Link.Loss),
			},
		}
		rate := cmp.Or(pp.Rate, UnshapedRate)
		p.State.Classes = append(p.State.Classes, Class{Handle: pp.Class, Parent: RootHandle, Rate: rate, Ceil: rate})
		leaf := Qdisc{Handle: PeerLeaf(id), Parent: pp.Class, Kind: KindBFIFO, Limit: fifoLimit(rate)}
		switch {
		case pp.Impairment.Zero():
		case in.NoNetem:
			pp.Missing = missing(pp.Impairment)
		default:
			leaf.Kind, leaf.Limit, leaf.Netem = KindNetem, netemLimit(rate, pp.Impairment), pp.Impairment
		}
		p.State.Qdiscs = append(p.State.Qdiscs, leaf)
		for _, a := range normalize(in.Addrs[pp.Name]) {
			if other, taken := owner[a]; taken {
				p.Warnings = append(p.Warnings, fmt.Sprintf("neighbours %q and %q both resolve to %s; traffic to it is shaped as %q's", other, pp.Name, a, other))
				continue
			}
			owner[a] = pp.Name
			pp.Addrs = append(pp.Addrs, a)
			prio := uint16(PriorityIPv4)
			if a.Is6() {
				prio = PriorityIPv6
			}
			p.State.Filters = append(p.State.Filters, Filter{Parent: RootHandle, Priority: prio, Dst: netip.PrefixFrom(a, a.BitLen()), Class: pp.Class})
		}
		p.Peers = append(p.Peers, pp)
	}
	// Last, so that the state lists every object in handle order.
	p.State.Classes = append(p.State.Classes, Class{Handle: DefaultClass, Parent: RootHandle, Rate: UnshapedRate, Ceil: UnshapedRate})
	sortFilters(p.State.Filters)
	return p, nil
}

// PeerHost is the host part of a neighbour's peer address (its client
// address when it has none): the name or IP its traffic is sent to.
func PeerHost(b topology.Broker) string {
	addr := cmp.Or(b.Peer, b.Client)
	if host, _, err := net.SplitHostPort(addr); err == nil {
		return host
	}
	return strings.Trim(addr, "[]")
}

// sortFilters orders filters by priority, then destination, then class.
func sortFilters(fs []Filter) {
	slices.SortFunc(fs, func(a, b Filter) int {
		return cmp.Or(cmp.Compare(a.Priority, b.Priority), a.Dst.Addr().Compare(b.Dst.Addr()),
			cmp.Compare(a.Dst.Bits(), b.Dst.Bits()), cmp.Compare(a.Class, b.Class))
	})
}

func bytesPerSecond(r float64) uint64 {
	if r <= 0 {
		return 0
	}
	return max(1, uint64(math.Round(r)))
}

func fifoLimit(rate uint64) uint32 {
	return uint32(min(max(float64(rate)*fifoTime.Seconds(), fifoMinBytes), fifoMaxBytes))
}

func netemLimit(rate uint64, im Impairment) uint32 {
	held := float64(rate) * (im.Delay + im.Jitter).Seconds()
	return uint32(min(max(math.Ceil(2*held/packetBytes), netemMinPackets), netemMaxPackets))
}

func missing(im Impairment) []Feature {
	var out []Feature
	if im.Delay > 0 {
		out = append(out, FeatureDelay)
	}
	if im.Jitter > 0 {
		out = append(out, FeatureJitter)
	}
	if im.Loss > 0 {
		out = append(out, FeatureLoss)
	}
	return out
}

// normalize drops zones and IPv4-in-IPv6 mapping (filters match the bare
// header), invalid addresses and duplicates, and sorts.
func normalize(addrs []netip.Addr) []netip.Addr {
	out := make([]netip.Addr, 0, len(addrs))
	for _, a := range addrs {
		if a.IsValid() {
			out = append(out, a.Unmap().WithZone(""))
		}
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return slices.Compact(out)
}
