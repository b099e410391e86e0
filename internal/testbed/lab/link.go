package lab

import (
	"math/rand/v2"
	"time"
)

// Params are the emulated properties of one direction of a link.
type Params struct {
	// Bandwidth is the link rate in bytes per second; 0 means unlimited
	// (no serialisation delay and no queue).
	Bandwidth float64 `json:"bandwidth"`
	// Delay is the one-way propagation delay.
	Delay time.Duration `json:"delay_ns"`
	// Jitter spreads each packet's delay uniformly over
	// [Delay−Jitter, Delay+Jitter] (never below zero). Packets still leave
	// in order: a packet drawn to arrive before its predecessor arrives
	// with it, as with netem's rate option, because reordering would make
	// TCP see loss where there is none.
	Jitter time.Duration `json:"jitter_ns"`
	// Loss is the probability that a packet vanishes; losses are
	// independent and happen before the queue, as with netem, so a lost
	// packet costs no bandwidth.
	Loss float64 `json:"loss"`
	// QueueBytes bounds the bytes waiting to be serialised; a packet that
	// would exceed it is dropped (drop-tail). A packet arriving at an idle
	// link is always accepted, however large.
	QueueBytes int `json:"queue_bytes"`
}

// Drop says why a packet was dropped.
type Drop uint8

// Drop reasons.
const (
	DropNone    Drop = iota
	DropLoss         // random loss (Params.Loss)
	DropQueue        // the link's queue was full
	DropCut          // the link was cut, before or while the packet crossed it
	DropNoRoute      // no path to the destination (Network only)
)

func (d Drop) String() string {
	switch d {
	case DropNone:
		return "none"
	case DropLoss:
		return "loss"
	case DropQueue:
		return "queue"
	case DropCut:
		return "cut"
	case DropNoRoute:
		return "no_route"
	}
	return "unknown"
}

// LinkCounters count what one direction of a link did.
type LinkCounters struct {
	// Packets and Bytes were accepted for transmission (queued or sent).
	Packets uint64 `json:"packets"`
	Bytes   uint64 `json:"bytes"`
	// Dropped packets by reason.
	Loss  uint64 `json:"dropped_loss"`
	Queue uint64 `json:"dropped_queue"`
	Cut   uint64 `json:"dropped_cut"`
}

// Link is the model of one direction of a link: a deterministic scheduler
// that takes a packet's size and the time it reaches the link, and says
// when it arrives at the far end or why it is dropped. It has no clock;
// callers must offer packets in non-decreasing time.
type Link struct {
	p  Params
	up bool
	// epoch counts cuts, so packets that were on the link when it was cut
	// can be recognised and dropped when they would have arrived.
	epoch uint64
	// busy is when the transmitter finishes the last accepted packet: a
	// virtual clock, so the queue needs no per-packet state.
	busy time.Duration
	// last is the arrival time of the last accepted packet, which keeps
	// arrivals in order under jitter.
	last time.Duration
	rng  *rand.Rand
	c    LinkCounters
	// flushed counts accepted bytes that were never serialised because a
	// cut emptied the queue.
	flushed uint64
	// sentHigh is the largest Sent reported.
	sentHigh uint64
}

// NewLink returns an up link with params p whose loss and jitter draws
// come from a generator seeded with seed.
func NewLink(p Params, seed uint64) *Link {
	return &Link{p: p, up: true, rng: rand.New(rand.NewPCG(seed, 0x1ab))}
}

// Params returns the link's current parameters.
func (l *Link) Params() Params { return l.p }

// SetParams changes the parameters at now. Packets already accepted keep
// their schedule; the bytes still queued drain at the new rate (at once if
// it is unlimited), so later packets queue behind the right amount.
func (l *Link) SetParams(p Params, now time.Duration) {
	if backlog := l.Backlog(now); backlog > 0 {
		l.busy = now
		if p.Bandwidth > 0 {
			l.busy += time.Duration(float64(backlog) * float64(time.Second) / p.Bandwidth)
		}
	}
	l.p = p
}

// Up reports whether the link carries packets.
func (l *Link) Up() bool { return l.up }

// Cut takes the link down at now: packets offered later are dropped, and
// so are packets that were queued or in flight, when they would have
// arrived.
func (l *Link) Cut(now time.Duration) {
	if !l.up {
		return
	}
	l.up = false
	l.epoch++
	l.flushed += uint64(l.Backlog(now))
	// Nothing accepted before the cut arrives, so nothing constrains the
	// order of what follows the heal.
	l.busy, l.last = min(l.busy, now), 0
}

// Heal brings a cut link back up, idle.
func (l *Link) Heal() { l.up = true }

// Counters returns what the link has done so far.
func (l *Link) Counters() LinkCounters { return l.c }

// Sent is the number of bytes serialised onto the link by now: accepted
// bytes minus those still queued or flushed by a cut. Its rate over the
// configured Bandwidth is the link's utilisation, exact at any time scale.
// It never decreases (it is exported as a Prometheus counter): rounding in
// the backlog could otherwise take a byte back.
func (l *Link) Sent(now time.Duration) uint64 {
	s := int64(l.c.Bytes) - int64(l.flushed) - int64(l.Backlog(now))
	l.sentHigh = max(l.sentHigh, uint64(max(s, 0)))
	return l.sentHigh
}

// Backlog is the number of bytes waiting to be serialised at now.
func (l *Link) Backlog(now time.Duration) int {
	if l.p.Bandwidth <= 0 || l.busy <= now {
		return 0
	}
	return int(float64(l.busy-now) * l.p.Bandwidth / float64(time.Second))
}

// Offer hands the link a packet of size bytes at time now. It returns the
// time the packet arrives at the far end, or the reason it was dropped.
func (l *Link) Offer(size int, now time.Duration) (time.Duration, Drop) {
	if !l.up {
		l.c.Cut++
		return 0, DropCut
	}
	if l.p.Loss > 0 && l.rng.Float64() < l.p.Loss {
		l.c.Loss++
		return 0, DropLoss
	}
	depart := now
	if l.p.Bandwidth > 0 {
		start := max(now, l.busy)
		if start > now && l.Backlog(now)+size > l.p.QueueBytes {
			l.c.Queue++
			return 0, DropQueue
		}
		depart = start + time.Duration(float64(size)*float64(time.Second)/l.p.Bandwidth)
		l.busy = depart
	}
	arrive := depart + l.p.Delay
	if j := l.p.Jitter; j > 0 {
		arrive += time.Duration(l.rng.Int64N(int64(2*j)+1)) - j
		arrive = max(arrive, depart)
	}
	arrive = max(arrive, l.last)
	l.last = arrive
	l.c.Packets++
	l.c.Bytes += uint64(size)
	return arrive, DropNone
}
