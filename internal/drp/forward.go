package drp

import (
	"math/bits"
	"slices"
	"strconv"

	"github.com/bits-and-blooms/bitset"
)

// Bundle is the routing header of a message bundle <D, m> (Carzaniga09 §2.2):
// everything the forwarding decision needs, without the message.
type Bundle struct {
	// Source is the ingress router. A broadcast follows the shortest-path
	// tree rooted here (§2.3); partitioned bundles carry it for accounting.
	Source uint32
	// Dest is D, the routers this bundle must still reach (bit i is router
	// ID i). Each Bundle a Decision returns owns its own Dest.
	Dest *bitset.BitSet
	// HopsLeft is the number of links the bundle may cross, counting the
	// one it is sent on. A router receiving it forwards with HopsLeft−1,
	// and only when that is at least 1.
	HopsLeft uint8
	// Broadcast marks a bundle that follows the source's shortest-path tree
	// instead of being repartitioned at each hop (§2.3).
	Broadcast bool
}

// DropReason says why destinations were dropped. Its values index
// Decision.Dropped and its String values are metric labels: neither may
// change.
type DropReason uint8

const (
	// DropNoRoute: the router knows no next hop to the destination.
	DropNoRoute DropReason = iota
	// DropHopLimit: the bundle exhausted its hop limit before reaching the
	// destination, usually because tables were reconverging.
	DropHopLimit
)

// NumDropReasons is the number of DropReason values, the length of
// Decision.Dropped.
const NumDropReasons = int(DropHopLimit) + 1

// String returns the metric label of r: "no_route" or "hop_limit".
func (r DropReason) String() string {
	switch r {
	case DropNoRoute:
		return "no_route"
	case DropHopLimit:
		return "hop_limit"
	}
	return "drop_reason_" + strconv.Itoa(int(r))
}

// Forward is one bundle to send to the neighbour Next.
type Forward struct {
	Next   uint32
	Bundle Bundle
}

// Decision is what a router does with a message.
type Decision struct {
	// Deliver asks for local delivery with the exact local predicates.
	Deliver bool
	// Forwards are the bundles to send, at most one per neighbour, in a
	// deterministic order. The Decision owns them and every Dest in them.
	Forwards []Forward
	// Dropped counts the destinations dropped here, indexed by DropReason.
	// For a broadcast bundle stopped by its hop limit the router cannot
	// tell which destinations lie below it, so it counts all it carried:
	// an upper bound.
	Dropped [NumDropReasons]int
	// Unrouted lists the destinations dropped for DropNoRoute, for a
	// diagnostic; nil when there are none, so that routing allocates
	// nothing for it.
	Unrouted []uint32
	// Bounced are the destinations of a partitioned bundle whose next hop
	// is the neighbour it came from; nil when there are none. Consistent
	// tables never send a bundle back (each hop is strictly closer to the
	// destination), so a bounce means the two routers disagree while link
	// state floods, and sending it back would start a loop that only the
	// hop limit ends. The caller decides: hold the destinations until its
	// routes change, or send them back (Transit with from = r.Self()).
	Bounced *bitset.BitSet
}

// DroppedTotal returns the number of destinations dropped for any reason.
func (d *Decision) DroppedTotal() int {
	n := 0
	for _, c := range d.Dropped {
		n += c
	}
	return n
}

// scanLimit is the number of next hops looked up by linear scan before the
// Forwarder switches to a map; routers rarely have more neighbours, and a
// scan of a few words beats hashing.
const scanLimit = 8

// maxWords bounds the bitset words read: bits at 2^32 and above are not
// router IDs, and a peer's oversized set must not make a router spin.
const maxWords = 1 << 26

// Forwarder computes B-DRP forwarding decisions. It keeps scratch space
// between calls, so it is not safe for concurrent use; give each owning
// goroutine its own. Decisions share nothing with the Forwarder or with
// the caller's bitsets.
type Forwarder struct {
	cfg Config

	// members are the reachable destinations of the current call, in
	// ascending ID order, with the index of their next-hop group.
	members []member
	groups  []group
	// groupOf indexes groups by next hop once there are more than
	// scanLimit of them; mapped says it is in use for the current call.
	groupOf map[uint32]int32
	mapped  bool
	// template is the ingress broadcast set, built once and copied to
	// every child.
	template []uint64
}

type member struct {
	id    uint32
	group int32
}

type group struct {
	next  uint32
	maxID uint32 // sizes the group's bitset
	off   int    // of the group's words in the shared slab
}

// NewForwarder returns a Forwarder for cfg, or cfg's validation error.
func NewForwarder(cfg Config) (*Forwarder, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Forwarder{cfg: cfg}, nil
}

// Config returns the configuration f was built with.
func (f *Forwarder) Config() Config { return f.cfg }

// Ingress decides the remote delivery of a message published at r.Self()
// (Carzaniga09 §2.2). dest is D, the routers whose encoded predicate the
// message matched; it may contain r.Self(), which is ignored because local
// delivery at the ingress uses the exact predicates and happens apart, so
// Deliver is always false. dest is only read.
//
// Reachable destinations are partitioned by next hop into one bundle per
// neighbour, or, above the broadcast threshold, the set is sent whole to
// every child in r.Self()'s shortest-path tree (§2.3). Unreachable
// destinations are dropped with DropNoRoute.
func (f *Forwarder) Ingress(r Routing, dest *bitset.BitSet) Decision {
	var d Decision
	self := r.Self()
	reachable := f.collect(r, self, self, dest, &d)
	if reachable == 0 {
		return d
	}
	if f.broadcasts(reachable, r.Known()) {
		// A tree without children contradicts the next hops just found;
		// partitioning still reaches them, so fall through to it.
		if children := r.TreeChildren(self); len(children) > 0 {
			f.template = f.template[:0]
			for _, m := range f.members {
				w := int(m.id >> 6)
				for len(f.template) <= w {
					f.template = append(f.template, 0)
				}
				f.template[w] |= 1 << (m.id & 63)
			}
			// Children of self never include self, so nothing is skipped.
			d.Forwards = broadcast(children, self, f.template, self, self, f.cfg.HopLimit)
			return d
		}
	}
	d.Forwards = f.partition(self, f.cfg.HopLimit)
	return d
}

// Transit decides what r.Self() does with bundle b received from the
// neighbour from (Carzaniga09 §2.2): deliver locally iff it is in b.Dest, then
// forward what remains. A partitioned bundle is repartitioned by next hop;
// a broadcast goes to r.Self()'s children in the tree rooted at b.Source
// (§2.3), except from. Nothing is forwarded once the remaining set is
// empty, and when b.HopsLeft leaves no hop to forward with, the remaining
// destinations are dropped with DropHopLimit. Destinations whose next hop
// is from are not forwarded but returned in Decision.Bounced. b.Dest is
// only read.
func (f *Forwarder) Transit(r Routing, from uint32, b Bundle) Decision {
	var d Decision
	if b.Dest == nil {
		return d
	}
	self := r.Self()
	d.Deliver = b.Dest.Test(uint(self))
	rest := int(b.Dest.Count())
	if d.Deliver {
		rest--
	}
	if rest == 0 {
		return d
	}
	// A bundle is never sent with HopsLeft 0, but a peer could send one.
	exhausted := b.HopsLeft <= 1

	if b.Broadcast {
		children := r.TreeChildren(b.Source)
		n := len(children)
		if slices.Contains(children, from) {
			n-- // only with inconsistent tables: never send back
		}
		if n == 0 {
			return d
		}
		if exhausted {
			d.Dropped[DropHopLimit] += rest
			return d
		}
		words := b.Dest.Words()
		words = words[:min(len(words), maxWords)]
		for len(words) > 0 && words[len(words)-1] == 0 {
			words = words[:len(words)-1]
		}
		d.Forwards = broadcast(children, from, words, self, b.Source, b.HopsLeft-1)
		return d
	}

	if exhausted {
		d.Dropped[DropHopLimit] += rest
		return d
	}
	if f.collect(r, self, from, b.Dest, &d) == 0 {
		return d
	}
	d.Forwards = f.partition(b.Source, b.HopsLeft-1)
	return d
}

func (f *Forwarder) broadcasts(reachable, known int) bool {
	return f.cfg.BroadcastFraction > 0 &&
		float64(reachable) > f.cfg.BroadcastFraction*float64(known-1)
}

// collect fills members and groups with the destinations in dest other than
// self, grouped by next hop, counts the unreachable ones into d, puts those
// whose next hop is back (the neighbour the bundle came from; self at the
// ingress, which is never a next hop) into d.Bounced, and returns the
// number of the others.
func (f *Forwarder) collect(r Routing, self, back uint32, dest *bitset.BitSet, d *Decision) int {
	f.members = f.members[:0]
	f.groups = f.groups[:0]
	if f.mapped {
		clear(f.groupOf)
		f.mapped = false
	}
	if dest == nil {
		return 0
	}
	words := dest.Words()
	words = words[:min(len(words), maxWords)]
	for wi, w := range words {
		for w != 0 {
			id := uint32(wi<<6 + bits.TrailingZeros64(w))
			w &= w - 1
			if id == self {
				continue
			}
			next, ok := r.NextHop(id)
			if !ok {
				d.Dropped[DropNoRoute]++
				d.Unrouted = append(d.Unrouted, id)
				continue
			}
			if next == back && back != self {
				if d.Bounced == nil {
					d.Bounced = new(bitset.BitSet)
				}
				d.Bounced.Set(uint(id))
				continue
			}
			g := f.groupFor(next)
			f.groups[g].maxID = id // ascending, so the last is the largest
			f.members = append(f.members, member{id: id, group: g})
		}
	}
	return len(f.members)
}

func (f *Forwarder) groupFor(next uint32) int32 {
	if f.mapped {
		if g, ok := f.groupOf[next]; ok {
			return g
		}
	} else {
		for i := range f.groups {
			if f.groups[i].next == next {
				return int32(i)
			}
		}
	}
	g := int32(len(f.groups))
	f.groups = append(f.groups, group{next: next})
	switch {
	case f.mapped:
		f.groupOf[next] = g
	case len(f.groups) > scanLimit:
		if f.groupOf == nil {
			f.groupOf = make(map[uint32]int32)
		}
		for i, gr := range f.groups {
			f.groupOf[gr.next] = int32(i)
		}
		f.mapped = true
	}
	return g
}

// partition turns the collected groups into one bundle per next hop. All
// bitsets share one word slab, each capped to its own words so that a
// bundle's owner cannot grow into its neighbour's: three allocations per
// decision however many neighbours, and one for the commonest decision, a
// single next hop for destinations below router ID 256 (onePartition).
func (f *Forwarder) partition(source uint32, hops uint8) []Forward {
	total := 0
	for i := range f.groups {
		f.groups[i].off = total
		total += int(f.groups[i].maxID>>6) + 1
	}
	if len(f.groups) == 1 && total <= len(onePartition{}.words) {
		one := new(onePartition)
		for _, m := range f.members {
			one.words[m.id>>6] |= 1 << (m.id & 63)
		}
		one.set.SetBitsetFrom(one.words[:total:total])
		one.fw[0] = Forward{Next: f.groups[0].next, Bundle: Bundle{Source: source, Dest: &one.set, HopsLeft: hops}}
		return one.fw[:]
	}
	slab := make([]uint64, total)
	for _, m := range f.members {
		slab[f.groups[m.group].off+int(m.id>>6)] |= 1 << (m.id & 63)
	}
	sets := make([]bitset.BitSet, len(f.groups))
	fw := make([]Forward, len(f.groups))
	for i, g := range f.groups {
		end := g.off + int(g.maxID>>6) + 1
		sets[i].SetBitsetFrom(slab[g.off:end:end])
		fw[i] = Forward{Next: g.next, Bundle: Bundle{Source: source, Dest: &sets[i], HopsLeft: hops}}
	}
	return fw
}

// onePartition is a decision of one bundle whose set fits in a few words,
// in one allocation: the bundle points into it, so it lives as long as the
// bundle.
type onePartition struct {
	fw    [1]Forward
	set   bitset.BitSet
	words [4]uint64
}

// broadcast sends a copy of words, without self, to every child but skip.
func broadcast(children []uint32, skip uint32, words []uint64, self, source uint32, hops uint8) []Forward {
	n := len(children)
	if slices.Contains(children, skip) {
		n--
	}
	w := len(words)
	slab := make([]uint64, n*w)
	sets := make([]bitset.BitSet, n)
	fw := make([]Forward, 0, n)
	for _, c := range children {
		if c == skip {
			continue
		}
		i := len(fw)
		s := slab[i*w : (i+1)*w : (i+1)*w]
		copy(s, words)
		if int(self>>6) < w {
			s[self>>6] &^= 1 << (self & 63)
		}
		sets[i].SetBitsetFrom(s)
		fw = append(fw, Forward{Next: c, Bundle: Bundle{Source: source, Dest: &sets[i], HopsLeft: hops, Broadcast: true}})
	}
	return fw
}
