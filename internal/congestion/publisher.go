package congestion

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/dripmesh/drip/internal/content"
	"github.com/dripmesh/drip/internal/encoding"
	"github.com/dripmesh/drip/internal/match"
)

// Verdict is what a Publisher decides about an offered message.
type Verdict int

const (
	// Send: the message leaves now, with the returned header.
	Send Verdict = iota
	// Held: the message waits for tokens; Release returns it later.
	Held
	// Full: the message belongs to a limited flow and the queue is full.
	// The publisher was not told about it; the caller offers it again
	// after a Release, which is how the limit reaches the application as
	// back-pressure rather than loss.
	Full
)

func (v Verdict) String() string {
	switch v {
	case Send:
		return "send"
	case Held:
		return "held"
	case Full:
		return "full"
	}
	return fmt.Sprintf("Verdict(%d)", int(v))
}

// MaxEchoFilters bounds the filters of one echo request.
const MaxEchoFilters = 16

// histRun is how many messages' Bloom filters a run of the publisher's
// history holds: a run is 256 KiB, and lives while a header of it does.
const histRun = 1024

// maxEchoesPerHeader bounds the echo replies one message carries.
const maxEchoesPerHeader = 2

// Publisher is one publisher's side of the protocol (Malekpour11
// §III-B-6 to 8). It is not safe for concurrent use.
type Publisher struct {
	cfg Config
	id  uint64
	seq uint64
	// hist is an append-only run of the Bloom filters of the messages
	// sent: every header's record is a window of it, shared, not copied.
	hist   []encoding.Bloom
	rate   meter
	flows  table
	echoes []pendingEcho
	held   []heldMessage
	pass   uint64
	// matchedGen is the flows' gen at the end of the last full release
	// pass: then every held message matched a flow, and every message
	// held since did when it was offered (Offer holds only those). While
	// the flows' gen stays, a release pass may stop once every flow is
	// blocked: no message behind can leave.
	matchedGen uint64
	// sweep is when requests are next checked for expiry.
	sweep   time.Time
	scratch []*request
	// listeners are the subscribers that gave their predicates, and
	// takers their predicates indexed (the exact matcher a broker delivers
	// by); constraints counts their constraints.
	listeners   map[uint64]*listener
	takers      *match.Index
	constraints int
	stamps      []Stamp              // Stamp's scratch
	taken       []match.SubscriberID // Stamp's scratch
	// unlistened is when a subscriber that gave no predicate last asked
	// (feedback or an echo): it reads losses from the records, so they
	// are RecordSize long until SessionTimeout after that.
	unlistened time.Time
	stats      PublisherStats
}

// listener is a subscriber that asked for stamps: the size of its
// predicate in constraints, how many of the messages sent it took, and when
// it was last heard from.
type listener struct {
	size  int
	count uint64
	heard time.Time
}

// PublisherStats counts what a Publisher did, for metrics.
type PublisherStats struct {
	// Sent and Controlled count messages sent, and those of them that
	// belonged to a limited flow; HeldMessages counts messages that
	// waited, and Waited their total wait.
	Sent, Controlled, HeldMessages uint64
	Waited                         time.Duration
	// Feedback counts feedback messages, Refused the requests refused in
	// them (malformed, or the table full), Raised those below MinRate.
	Feedback, Refused, Raised uint64
	// CLRChanges counts changes of a filter's limiting subscriber: a
	// request becoming a flow or ceasing to be one.
	CLRChanges uint64
	// Stamps counts the stamps put on messages; Unstamped those left off
	// past MaxStamps; ListenRefused the predicates refused (the bounds).
	Stamps, Unstamped, ListenRefused uint64
}

type pendingEcho struct {
	Echo
	received time.Time
}

type heldMessage struct {
	id    uint64
	bloom encoding.Bloom
	since time.Time
	flows []*request
}

// Released is a held message that may leave now, with its header.
type Released struct {
	ID     uint64
	Header Header
}

// NewPublisher returns the state of publisher id.
func NewPublisher(id uint64, cfg Config) (*Publisher, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Publisher{cfg: cfg, id: id, flows: newTable(), listeners: map[uint64]*listener{}, takers: match.New()}, nil
}

// Offer decides about message id with Bloom filter m: Send (with its
// header), Held (Release will return it) or Full.
func (p *Publisher) Offer(id uint64, m encoding.Bloom, now time.Time) (Verdict, Header) {
	p.expire(now)
	flows := p.flows.match(p.scratch[:0], m)
	p.scratch = flows
	if len(flows) == 0 {
		return Send, p.stamp(m, flows, now)
	}
	ready := true
	for _, r := range flows {
		r.refill(now, p.cfg.BucketDepth)
		// A flow's messages leave in order: one waits behind another.
		if r.held > 0 || r.tokens < 1 {
			ready = false
		}
	}
	if ready {
		for _, r := range flows {
			r.tokens--
		}
		return Send, p.stamp(m, flows, now)
	}
	if len(p.held) >= p.cfg.MaxQueue {
		return Full, Header{}
	}
	h := heldMessage{id: id, bloom: m, since: now, flows: append([]*request(nil), flows...)}
	for _, r := range flows {
		r.held++
	}
	p.held = append(p.held, h)
	p.stats.HeldMessages++
	return Held, Header{}
}

// Release returns the held messages that may leave now, in the order
// they were offered within each flow. Flows are matched again: a flow
// that expired no longer holds its messages.
func (p *Publisher) Release(now time.Time) []Released {
	if len(p.held) == 0 {
		return nil
	}
	p.expire(now)
	p.pass++
	var out []Released
	kept := p.held[:0]
	blocked := 0 // flows marked blocked in this pass
	for i, h := range p.held {
		// Once every flow is blocked, a message can leave only if no flow
		// matches it (its flows expired). Without that check this loop
		// matched each of thousands of held messages against every flow
		// each time the caller looked, to release none: the client's pacer
		// looks at every publication and feedback.
		if blocked > 0 && blocked == len(p.flows.active) {
			if p.matchedGen == p.flows.gen {
				kept = append(kept, p.held[i:]...)
				break
			}
			if p.flows.matchesAny(h.bloom) {
				kept = append(kept, h)
				continue
			}
		}
		flows := p.flows.match(p.scratch[:0], h.bloom)
		p.scratch = flows
		ready := true
		for _, r := range flows {
			r.refill(now, p.cfg.BucketDepth)
			if r.pass == p.pass || r.tokens < 1 {
				ready = false
			}
		}
		if !ready {
			for _, r := range flows {
				if r.pass != p.pass {
					r.pass = p.pass
					blocked++
				}
			}
			kept = append(kept, h)
			continue
		}
		for _, r := range flows {
			r.tokens--
		}
		for _, r := range h.flows {
			r.held--
		}
		p.stats.Waited += now.Sub(h.since)
		out = append(out, Released{ID: h.id, Header: p.stamp(h.bloom, flows, now)})
	}
	clear(p.held[len(kept):])
	p.held = kept
	p.matchedGen = p.flows.gen
	return out
}

// NextRelease is when Release may next return a message: when a flow
// without a token has its next one, or a flow holding a message expires.
// False when nothing is held. A flow with a token holds its messages only
// behind one of a flow without (Release keeps each flow's order), so its
// own token is no reason to look again: counted, it made a driver that
// released nothing look again at once, in a loop, until the other flow's
// token came.
func (p *Publisher) NextRelease(now time.Time) (time.Time, bool) {
	if len(p.held) == 0 {
		return time.Time{}, false
	}
	next := now.Add(p.cfg.FlowTimeout)
	for _, r := range p.flows.all {
		r.refill(now, p.cfg.BucketDepth)
		if r.tokens < 1 {
			// Rounded up, to 1 ns at least: a token due in less than a
			// nanosecond truncated to now, when Release still finds none.
			wait := time.Duration(math.Ceil((1 - r.tokens) / r.quota * float64(time.Second)))
			next = minTime(next, now.Add(max(wait, 1)))
		}
		if r.held == 0 {
			continue
		}
		// An expired flow lets go of its messages at the next sweep.
		expiry := r.at.Add(p.cfg.FlowTimeout)
		if expiry.Before(p.sweep) {
			expiry = p.sweep
		}
		next = minTime(next, expiry)
	}
	if next.Before(now) {
		next = now
	}
	return next, true
}

// Queued is the number of held messages.
func (p *Publisher) Queued() int { return len(p.held) }

// Stats returns the counters.
func (p *Publisher) Stats() PublisherStats { return p.stats }

// Flow is a limited flow, for metrics.
type Flow struct {
	Subscriber uint64
	Filter     uint32
	Quota      float64
	Tokens     float64
	// Feedback is δ_feedback, the one-way travel time of the last
	// feedback (clock offset included).
	Feedback time.Duration
}

// Flows lists the limited flows, least quota first.
func (p *Publisher) Flows(now time.Time) []Flow {
	out := make([]Flow, 0, len(p.flows.active))
	for _, r := range p.flows.active {
		r.refill(now, p.cfg.BucketDepth)
		out = append(out, Flow{Subscriber: r.key.sub, Filter: r.key.filter, Quota: r.quota, Tokens: r.tokens, Feedback: r.oneWay})
	}
	return out
}

// Feedback processes a subscriber's feedback (Algorithm 2), and its
// predicate when it gives one (Listen). A request
// with a quota that is not a number or negative is refused, and so is a
// new request when MaxRequests are kept; an infinite quota withdraws the
// request; a quota below MinRate is taken as MinRate. The error names what
// was refused; the rest is processed.
func (p *Publisher) Feedback(fb Feedback, now time.Time) error {
	p.expire(now)
	p.stats.Feedback++
	if fb.Listen == nil {
		p.heard(fb.Subscriber, now) // else listen does
	}
	before := p.activeKeys()
	var errs []error
	for _, rq := range fb.Requests {
		k := key{fb.Subscriber, rq.Filter}
		q := rq.Quota
		switch {
		case math.IsNaN(q) || q < 0:
			errs = append(errs, fmt.Errorf("filter %d: quota %v is not a rate", rq.Filter, q))
			continue
		case math.IsInf(q, 1):
			p.flows.drop(k)
			continue
		case p.flows.byKey[k] == nil && len(p.flows.all) >= p.cfg.MaxRequests:
			errs = append(errs, fmt.Errorf("filter %d: table holds %d requests already", rq.Filter, p.cfg.MaxRequests))
			continue
		case q < p.cfg.MinRate:
			q = p.cfg.MinRate
			p.stats.Raised++
		}
		r := p.flows.set(k, rq.Bloom, q, now)
		r.oneWay = now.Sub(fb.SentAt)
	}
	p.countCLRChanges(before)
	p.stats.Refused += uint64(len(errs))
	var err error
	if len(errs) > 0 {
		err = fmt.Errorf("%d of %d requests refused: %w", len(errs), len(fb.Requests), errors.Join(errs...))
	}
	if fb.Listen != nil {
		err = errors.Join(err, p.listen(fb.Subscriber, fb.Listen, now))
	}
	if err != nil {
		return fmt.Errorf("congestion: feedback from subscriber %d: %w", fb.Subscriber, err)
	}
	return nil
}

// Listen takes subscriber sub's predicate: from now on Stamp counts the
// messages it takes, so that the subscriber tells a lost message from one
// it never took exactly, which publication records cannot do where a
// message's Bloom filter holds many attributes (docs/design.md §12,
// "Exact loss detection"). Saying it again keeps the count, and a changed
// predicate counts on. The publisher forgets the predicate once it has
// heard nothing from the subscriber for SessionTimeout; the subscriber
// gives it again when its messages come without its stamp. A predicate is
// refused, and an earlier one of the subscriber kept, when it would take
// the listeners past MaxListeners or their constraints past
// MaxListenConstraints.
func (p *Publisher) Listen(sub uint64, pred content.Predicate, now time.Time) error {
	if err := p.listen(sub, pred, now); err != nil {
		return fmt.Errorf("congestion: subscriber %d: %w", sub, err)
	}
	return nil
}

func (p *Publisher) listen(sub uint64, pred content.Predicate, now time.Time) error {
	p.expire(now)
	size := 0
	for _, f := range pred {
		size += len(f)
	}
	l, known := p.listeners[sub]
	held := 0
	if known {
		held = l.size
	}
	var err error
	switch {
	case len(pred) == 0:
		err = fmt.Errorf("listen: an empty predicate")
	case !known && len(p.listeners) >= p.cfg.MaxListeners:
		err = fmt.Errorf("listen: %d listeners already", p.cfg.MaxListeners)
	case p.constraints-held+size > p.cfg.MaxListenConstraints:
		err = fmt.Errorf("listen: a predicate of %d constraints would take the listeners past %d", size, p.cfg.MaxListenConstraints)
	default:
		if e := p.takers.Replace(match.SubscriberID(sub), pred); e != nil {
			err = fmt.Errorf("listen: %w", e)
		}
	}
	if err != nil {
		p.stats.ListenRefused++
		return err
	}
	if !known {
		l = &listener{}
		p.listeners[sub] = l
	}
	p.constraints += size - l.size
	l.size, l.heard = size, now
	return nil
}

// Stamp adds to h a stamp for each listener whose predicate takes m, the
// message h is the header of, and counts it. Call it for every message
// sent with a full header, in the order they leave (Offer's and Release's
// headers), so that a listener's counts follow its messages. h.Stamps is
// valid until the next Stamp.
//
// A listener's pending echo is answered on the message too (when it has
// room for another reply): its predicate says exactly that the subscriber
// receives it, where an echo's filters, Bloom filters, may wait for a
// message that matches one of the few it carries.
//
// The predicates are matched as a broker's local delivery matches them
// (internal/match), so that a stamp goes on exactly the messages the
// subscriber's broker delivers to it, at a cost that grows with what the
// message satisfies rather than with the listeners (BenchmarkStamp).
// Listeners are stamped in the order of their IDs, so that those past
// MaxStamps are the same on every message that several take.
func (p *Publisher) Stamp(h *Header, m content.Message) {
	h.Stamps = p.stamps[:0]
	p.taken = p.takers.Match(m, p.taken[:0])
	slices.Sort(p.taken)
	for _, id := range p.taken {
		sub := uint64(id)
		p.echoListener(h, sub)
		if len(h.Stamps) == p.cfg.MaxStamps {
			p.stats.Unstamped++
			continue
		}
		l := p.listeners[sub]
		l.count++
		h.Stamps = append(h.Stamps, Stamp{Subscriber: sub, Seq: l.count})
	}
	p.stamps = h.Stamps
	p.stats.Stamps += uint64(len(h.Stamps))
}

// echoListener answers subscriber sub's pending echo on h, unless h has
// answered it already or has no room.
func (p *Publisher) echoListener(h *Header, sub uint64) {
	if len(h.Echoes) == maxEchoesPerHeader || slices.ContainsFunc(h.Echoes, func(r EchoReply) bool { return r.Subscriber == sub }) {
		return
	}
	for i := range p.echoes {
		if e := &p.echoes[i]; e.Subscriber == sub {
			h.Echoes = append(h.Echoes, EchoReply{Subscriber: sub, SentAt: e.SentAt, Held: h.SentAt.Sub(e.received)})
			if len(e.Filters) == 0 {
				p.echoes = slices.Delete(p.echoes, i, i+1) // answered on the message it receives
			}
			return
		}
	}
}

// listening reports whether subscriber sub gave a predicate it still has.
func (p *Publisher) listening(sub uint64) bool {
	_, ok := p.listeners[sub]
	return ok
}

// heard keeps subscriber sub's predicate, if it gave one, for another
// SessionTimeout: a subscriber gives it again only when its messages come
// without its stamp, so anything it sends says it still listens. A
// subscriber that gave none reads the records.
func (p *Publisher) heard(sub uint64, now time.Time) {
	if l, ok := p.listeners[sub]; ok {
		l.heard = now
		return
	}
	p.unlistened = now
}

// listenRecordSize is the record of a publisher that has listeners and
// whose asking subscribers all listen: they measure loss on their stamps,
// and a record of one still gives each delivery a sample of the message
// before it, from which a subscriber estimates the share of a coarse flow
// that its filter takes (Subscriber.sampleRecords). While no flow is
// limited there is no quota to scale by a share, and such a publisher
// sends no record at all. Records are most of a full header (k = 5 is 320
// bytes), and on the 8-broker overload the headers alone took links that
// the data left idle (docs/results/congestion.md).
const listenRecordSize = 1

// recordSize is the length of the records on messages sent at now.
func (p *Publisher) recordSize(now time.Time) int {
	switch {
	case len(p.listeners) == 0 || (!p.unlistened.IsZero() && now.Sub(p.unlistened) < p.cfg.SessionTimeout):
		return p.cfg.RecordSize
	case len(p.flows.all) == 0:
		return 0
	}
	return min(listenRecordSize, p.cfg.RecordSize)
}

// Listeners is the number of subscribers whose predicates Stamp evaluates.
func (p *Publisher) Listeners() int { return len(p.listeners) }

// Forget removes every request of subscriber sub, and its predicate: its
// stream ended.
func (p *Publisher) Forget(sub uint64) {
	p.dropListeners(func(s uint64, _ *listener) bool { return s == sub })
	before := p.activeKeys()
	for _, r := range append([]*request(nil), p.flows.all...) {
		if r.key.sub == sub {
			p.flows.drop(r.key)
		}
	}
	p.countCLRChanges(before)
}

// Echo takes a subscriber's echo request; the reply rides on the next
// messages that match one of its filters, until EchoTimeout. A listener's
// echo needs no filter: the reply rides on the next message its predicate
// takes (Stamp), the next it receives, however long that takes (up to
// SessionTimeout).
func (p *Publisher) Echo(e Echo, now time.Time) error {
	p.expire(now)
	switch {
	case len(e.Filters) == 0 && !p.listening(e.Subscriber):
		return fmt.Errorf("congestion: echo from subscriber %d has no filter and no predicate", e.Subscriber)
	case len(e.Filters) > MaxEchoFilters:
		return fmt.Errorf("congestion: echo from subscriber %d has %d filters, more than %d", e.Subscriber, len(e.Filters), MaxEchoFilters)
	}
	p.heard(e.Subscriber, now)
	for i := range p.echoes {
		if p.echoes[i].Subscriber == e.Subscriber {
			p.echoes[i] = pendingEcho{e, now}
			return nil
		}
	}
	if len(p.echoes) >= p.cfg.MaxEchoes {
		return fmt.Errorf("congestion: echo from subscriber %d refused: %d pending", e.Subscriber, p.cfg.MaxEchoes)
	}
	p.echoes = append(p.echoes, pendingEcho{e, now})
	return nil
}

// stamp makes the header of a message that leaves now and records it.
func (p *Publisher) stamp(m encoding.Bloom, flows []*request, now time.Time) Header {
	p.seq++
	p.rate.add(now)
	p.stats.Sent++
	h := Header{Publisher: p.id, Seq: p.seq, SentAt: now, Rate: p.rate.rate(now)}
	n := len(p.hist)
	if k := min(n, p.recordSize(now)); k > 0 {
		h.Record = p.hist[n-k : n : n] // a full slice: appending to it copies
	}
	if n == cap(p.hist) {
		// A new run starts with the last k−1, so the next window fits.
		run := make([]encoding.Bloom, 0, max(histRun, 2*p.cfg.RecordSize))
		p.hist = append(run, p.hist[n-min(n, p.cfg.RecordSize-1):]...)
	}
	p.hist = append(p.hist, m)
	if len(flows) > 0 {
		p.stats.Controlled++
		n := min(len(flows), p.cfg.MaxTags)
		h.Tags = make([]Tag, n)
		for i, r := range flows[:n] {
			h.Tags[i] = Tag{Subscriber: r.key.sub, Filter: r.key.filter, Feedback: r.oneWay}
		}
	}
	for i := range p.echoes {
		if len(h.Echoes) == maxEchoesPerHeader {
			break
		}
		e := &p.echoes[i]
		for _, f := range e.Filters {
			if f.SubsetOf(m) {
				h.Echoes = append(h.Echoes, EchoReply{Subscriber: e.Subscriber, SentAt: e.SentAt, Held: now.Sub(e.received)})
				break
			}
		}
	}
	return h
}

// expire forgets stale requests and echoes, at most four times per
// FlowTimeout.
func (p *Publisher) expire(now time.Time) {
	if now.Before(p.sweep) {
		return
	}
	p.sweep = now.Add(p.cfg.FlowTimeout / 4)
	before := p.activeKeys()
	p.flows.expire(now.Add(-p.cfg.FlowTimeout))
	p.countCLRChanges(before)
	kept := p.echoes[:0]
	for _, e := range p.echoes {
		// A listener's echo waits for the next message its predicate
		// takes, however sparse (the subscriber asks again only after a
		// message came without the reply); the reply ends it.
		timeout := p.cfg.EchoTimeout
		if len(e.Filters) == 0 {
			timeout = p.cfg.SessionTimeout
		}
		if now.Sub(e.received) < timeout {
			kept = append(kept, e)
		}
	}
	p.echoes = kept
	p.dropListeners(func(_ uint64, l *listener) bool { return now.Sub(l.heard) >= p.cfg.SessionTimeout })
}

// dropListeners forgets the listeners that gone says are gone.
func (p *Publisher) dropListeners(gone func(sub uint64, l *listener) bool) {
	for sub, l := range p.listeners {
		if gone(sub, l) {
			p.constraints -= l.size
			p.takers.Remove(match.SubscriberID(sub))
			delete(p.listeners, sub)
		}
	}
}

func (p *Publisher) activeKeys() map[key]bool {
	m := make(map[key]bool, len(p.flows.active))
	for _, r := range p.flows.active {
		m[r.key] = true
	}
	return m
}

func (p *Publisher) countCLRChanges(before map[key]bool) {
	for _, r := range p.flows.active {
		if !before[r.key] {
			p.stats.CLRChanges++
		}
		delete(before, r.key)
	}
	p.stats.CLRChanges += uint64(len(before))
}

func minTime(t time.Time, more ...time.Time) time.Time {
	for _, u := range more {
		if u.Before(t) {
			t = u
		}
	}
	return t
}
