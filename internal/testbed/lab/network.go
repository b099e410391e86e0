package lab

import (
	"fmt"
	"github.com/dripmesh/drip/internal/pq"
	"time"

	"github.com/dripmesh/drip/internal/topology"
)

// DefaultQueueTime sizes link queues: the bytes a link serialises in this
// long. 100 ms holds a bandwidth-delay product of the seed's 1 MB/s links
// at WAN round trips without turning every saturated link into seconds of
// delay.
const DefaultQueueTime = 100 * time.Millisecond

// minQueueBytes keeps slow links able to queue a small burst of full-size
// packets.
const minQueueBytes = 10 * 1500

// NetworkOptions tune a Network.
type NetworkOptions struct {
	// QueueTime sizes each link direction's queue as Bandwidth × QueueTime
	// (at least 15 000 bytes); 0 means DefaultQueueTime.
	QueueTime time.Duration
	// Seed derives every link direction's loss and jitter generator.
	Seed uint64
}

// Change is a partial update of a link's parameters; nil fields keep
// their value.
type Change struct {
	Bandwidth *float64       `json:"bandwidth,omitempty"`
	Delay     *time.Duration `json:"delay_ns,omitempty"`
	Jitter    *time.Duration `json:"jitter_ns,omitempty"`
	Loss      *float64       `json:"loss,omitempty"`
}

// Validate reports values no link can have.
func (c Change) Validate() error {
	switch {
	case c.Bandwidth != nil && *c.Bandwidth < 0:
		return fmt.Errorf("bandwidth %v is negative", *c.Bandwidth)
	case c.Delay != nil && *c.Delay < 0:
		return fmt.Errorf("delay %v is negative", *c.Delay)
	case c.Jitter != nil && *c.Jitter < 0:
		return fmt.Errorf("jitter %v is negative", *c.Jitter)
	case c.Loss != nil && (*c.Loss < 0 || *c.Loss > 1):
		return fmt.Errorf("loss %v is not in [0, 1]", *c.Loss)
	}
	return nil
}

// Delivery is a packet that reached its destination site.
type Delivery[P any] struct {
	Dst     int
	Payload P
}

// LinkStats describe one direction of a link.
type LinkStats struct {
	From   string `json:"from"`
	To     string `json:"to"`
	Params Params `json:"params"`
	Up     bool   `json:"up"`
	// Backlog is the bytes queued for serialisation right now.
	Backlog int `json:"backlog_bytes"`
	// Sent is the bytes serialised onto the link so far (see Link.Sent):
	// the counter to compute utilisation from.
	Sent uint64 `json:"sent_bytes"`
	LinkCounters
}

// Network is the deterministic model of a whole lab: sites joined by links
// (two Link directions each), static least-weight routes, and the packets
// in flight. A packet crosses its path hop by hop: it is offered to the
// next link at the moment it arrives at the end of the previous one, so
// each link sees its packets in time order even when they come from
// different sites. P is the packet's payload, opaque to the model.
//
// Routes are computed once from the configured graph, like static IP
// routes: cutting a link stops the traffic routed over it instead of
// detouring it, so a broker link that is cut stays cut.
type Network[P any] struct {
	g      *graph
	paths  [][][]int
	links  []*Link // directed; see graph
	qtime  time.Duration
	now    time.Duration
	events pq.Heap[event[P]]
	seq    uint64
	out    []Delivery[P]
	// noRoute counts packets each site sent to an unreachable site.
	noRoute []uint64
}

// NewNetwork builds the model of t's sites and links.
func NewNetwork[P any](t *topology.Topology, o NetworkOptions) (*Network[P], error) {
	g, err := newGraph(t)
	if err != nil {
		return nil, fmt.Errorf("lab topology: %w", err)
	}
	if o.QueueTime <= 0 {
		o.QueueTime = DefaultQueueTime
	}
	n := &Network[P]{g: g, paths: g.shortestPaths(), qtime: o.QueueTime, noRoute: make([]uint64, len(g.names)), events: pq.New(earlier[P], 64)}
	for i, l := range t.Links {
		p := Params{Bandwidth: float64(l.Bandwidth), Delay: time.Duration(l.Delay), Jitter: time.Duration(l.Jitter), Loss: float64(l.Loss)}
		if err := (Change{Bandwidth: &p.Bandwidth, Delay: &p.Delay, Jitter: &p.Jitter, Loss: &p.Loss}).Validate(); err != nil {
			return nil, fmt.Errorf("lab topology: link %d (%s–%s): %w", i, l.A, l.B, err)
		}
		p.QueueBytes = n.queueBytes(p.Bandwidth)
		for dir := range uint64(2) {
			n.links = append(n.links, NewLink(p, o.Seed^(uint64(2*i)+dir)*0x9e3779b97f4a7c15))
		}
	}
	return n, nil
}

func (n *Network[P]) queueBytes(bandwidth float64) int {
	return max(int(bandwidth*n.qtime.Seconds()), minQueueBytes)
}

// Sites returns the site names in index order.
func (n *Network[P]) Sites() []string { return n.g.names }

// Site returns the index of the named site.
func (n *Network[P]) Site(name string) (int, bool) {
	i, ok := n.g.index[name]
	return i, ok
}

// Path returns the sites a packet from src to dst visits, both included;
// nil when dst is unreachable.
func (n *Network[P]) Path(src, dst int) []string {
	p := n.paths[src][dst]
	if p == nil {
		return nil
	}
	out := []string{n.g.names[src]}
	for _, d := range p {
		out = append(out, n.g.names[n.g.ends[d][1]])
	}
	return out
}

// Send injects a packet of size bytes from site src to site dst at time
// now, after processing everything due by then. It returns why the packet
// was dropped at the first link, if it was.
func (n *Network[P]) Send(now time.Duration, src, dst, size int, payload P) Drop {
	n.advance(now)
	path := n.paths[src][dst]
	switch {
	case path == nil:
		n.noRoute[src]++
		return DropNoRoute
	case len(path) == 0:
		n.out = append(n.out, Delivery[P]{Dst: dst, Payload: payload})
		return DropNone
	}
	return n.offer(&flight[P]{dst: dst, size: size, payload: payload, path: path}, n.now)
}

// Advance processes everything due by now and returns the packets that
// reached their destination since the last call, in arrival order. The
// slice is reused by the next call to Send or Advance.
func (n *Network[P]) Advance(now time.Duration) []Delivery[P] {
	n.advance(now)
	out := n.out
	n.out = n.out[:0]
	return out
}

// NextEvent returns when the next packet arrives at the end of a link, if
// any is in flight.
func (n *Network[P]) NextEvent() (time.Duration, bool) {
	if n.events.Len() == 0 {
		return 0, false
	}
	return n.events.Peek().at, true
}

// InFlight is the number of packets queued or on a link.
func (n *Network[P]) InFlight() int { return n.events.Len() }

func (n *Network[P]) advance(now time.Duration) {
	for n.events.Len() > 0 && n.events.Peek().at <= now {
		e := n.events.Pop()
		f := e.f
		l := n.links[f.path[f.hop]]
		if l.epoch != f.epoch {
			l.c.Cut++
			continue
		}
		if f.hop == len(f.path)-1 {
			n.out = append(n.out, Delivery[P]{Dst: f.dst, Payload: f.payload})
			continue
		}
		f.hop++
		n.offer(f, e.at)
	}
	n.now = max(n.now, now)
}

func (n *Network[P]) offer(f *flight[P], at time.Duration) Drop {
	l := n.links[f.path[f.hop]]
	arrive, drop := l.Offer(f.size, at)
	if drop != DropNone {
		return drop
	}
	f.epoch = l.epoch
	n.seq++
	n.events.Push(event[P]{at: arrive, seq: n.seq, f: f})
	return DropNone
}

// Set changes both directions of the link between sites a and b at now,
// after processing everything due by then.
func (n *Network[P]) Set(now time.Duration, a, b string, c Change) error {
	if err := c.Validate(); err != nil {
		return fmt.Errorf("link %s–%s: %w", a, b, err)
	}
	i, err := n.g.link(a, b)
	if err != nil {
		return err
	}
	n.advance(now)
	for _, l := range n.links[2*i : 2*i+2] {
		p := l.Params()
		if c.Bandwidth != nil {
			p.Bandwidth = *c.Bandwidth
			p.QueueBytes = n.queueBytes(p.Bandwidth)
		}
		if c.Delay != nil {
			p.Delay = *c.Delay
		}
		if c.Jitter != nil {
			p.Jitter = *c.Jitter
		}
		if c.Loss != nil {
			p.Loss = *c.Loss
		}
		l.SetParams(p, n.now)
	}
	return nil
}

// Cut takes both directions of the link between a and b down at now,
// after processing everything due by then.
func (n *Network[P]) Cut(now time.Duration, a, b string) error {
	i, err := n.g.link(a, b)
	if err != nil {
		return err
	}
	n.advance(now)
	n.links[2*i].Cut(n.now)
	n.links[2*i+1].Cut(n.now)
	return nil
}

// Heal brings both directions of the link between a and b back up.
func (n *Network[P]) Heal(a, b string) error {
	i, err := n.g.link(a, b)
	if err != nil {
		return err
	}
	n.links[2*i].Heal()
	n.links[2*i+1].Heal()
	return nil
}

// Stats describes every link direction at now, A→B before B→A, in the
// topology's link order.
func (n *Network[P]) Stats(now time.Duration) []LinkStats {
	out := make([]LinkStats, len(n.links))
	for d, l := range n.links {
		out[d] = LinkStats{
			From: n.g.names[n.g.ends[d][0]], To: n.g.names[n.g.ends[d][1]],
			Params: l.Params(), Up: l.Up(), Backlog: l.Backlog(now), Sent: l.Sent(now), LinkCounters: l.Counters(),
		}
	}
	return out
}

// NoRoute returns how many packets each site sent to a site it cannot
// reach.
func (n *Network[P]) NoRoute() []uint64 { return append([]uint64(nil), n.noRoute...) }

// flight is a packet on its way.
type flight[P any] struct {
	dst, size int
	payload   P
	path      []int
	hop       int
	// epoch is the current link's epoch when the packet was accepted.
	epoch uint64
}

// event is a packet arriving at the end of its current link.
type event[P any] struct {
	at  time.Duration
	seq uint64 // FIFO among equal times, for determinism
	f   *flight[P]
}

// earlier orders events by time, FIFO among equal times.
func earlier[P any](a, b event[P]) bool {
	if a.at != b.at {
		return a.at < b.at
	}
	return a.seq < b.seq
}
