package client

import (
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dripmesh/drip/internal/clientapi"
	"github.com/dripmesh/drip/internal/congestion"
	"github.com/dripmesh/drip/internal/content"
	"github.com/dripmesh/drip/internal/encoding"
	"github.com/dripmesh/drip/internal/wire"
)

// WithCongestionControl turns the publishing side of content-aware
// congestion control (docs/design.md §12, Malekpour11) on or off; it is on
// by default. A publisher then listens for subscriptions that ask it to
// slow down (one extra subscription, to its own feedback) and slows only
// the messages of the flows they name: the rest leave at once. A slowed
// message waits in a bounded queue; when the queue is full Publish blocks,
// so the application is held back rather than its messages dropped in the
// mesh. Until a subscription asks, each message carries an 11-byte header
// naming the publisher, and nothing waits.
func WithCongestionControl(on bool) Option {
	return func(o *options) { o.noCongestion = !on }
}

// WithCongestionFeedback makes the client's subscriptions ask (default:
// they do not). A subscription then measures the loss and round-trip time
// of each controlled publisher's messages that reach it and, when they
// arrive faster than a TCP flow would get on its path, asks that publisher
// to slow the flows of its filters. Loss is read from the publication
// records the publisher then adds (k = 5 Bloom filters, 320 bytes a
// message), and a record entry can look relevant when it is not: about
// 2% per filter that receives from the publisher, so a predicate of many
// filters sees losses that did not happen and slows its publishers more
// than it needs (docs/design.md §12). Off by default for that reason. A
// range over at most 64 integers is measured by one equality per value;
// a float range or a wider one keeps its coarse Bloom filters, and its
// flows can be slowed far below what the subscription takes.
func WithCongestionFeedback(on bool) Option {
	return func(o *options) { o.congestionFeedback = on }
}

// CongestionStats is what congestion control did for a publisher or a
// subscription.
type CongestionStats struct {
	// Publisher: messages sent while a subscriber asked (full headers),
	// those of them that belonged to a flow a subscriber limited, those
	// that waited for tokens and for how long in all; feedback messages
	// taken (rate requests, echo requests or both), and those refused as
	// malformed.
	Sent, Controlled, Held uint64
	Waited                 time.Duration
	Feedback, BadFeedback  uint64
	// Flows are the publisher's limited flows now, least quota first.
	Flows []congestion.Flow
	// Listeners are the subscribers whose predicates the publisher stamps
	// its messages by now, and Stamps the stamps it has put on them.
	Listeners int
	Stamps    uint64
	// Subscription: messages measured, loss events seen, feedback and echo
	// requests sent, headers refused as malformed, and feedback dropped
	// because the client's feedback queue was full.
	Measured, LossEvents, FeedbackSent, Echoes, BadHeaders, Dropped uint64
	// Stamped counts the messages whose loss was measured by their stamps
	// (docs/design.md §12, "Exact loss detection").
	Stamped uint64
	// Sessions are the subscription's measurements of each controlled
	// publisher (round-trip time, loss event rate, the rate they allow),
	// as of its last round.
	Sessions []congestion.SessionStats
}

// newID returns a random nonzero session ID.
func newID() uint64 {
	for {
		if id := rand.Uint64(); id != 0 {
			return id
		}
	}
}

// contentMessage is m in the data model, for its Bloom filter.
func contentMessage(m Message) (content.Message, error) {
	if len(m.Fields) > 0 {
		attrs := make([]content.Attribute, 0, len(m.Fields))
		for _, f := range m.Fields {
			var cv content.Value
			switch f.kind {
			case KindString:
				cv = content.String(f.s)
			case KindInt:
				cv = content.Int(f.Int())
			case KindFloat:
				cv = content.Float(f.Float())
			case KindBool:
				cv = content.Bool(f.Bool())
			}
			attrs = append(attrs, content.Attribute{Name: f.Name, Value: cv})
		}
		return content.NewMessage(attrs, nil)
	}
	attrs := make([]content.Attribute, 0, len(m.Attrs))
	for n, v := range m.Attrs {
		var cv content.Value
		switch x := v.(type) {
		case string:
			cv = content.String(x)
		case int:
			cv = content.Int(int64(x))
		case int64:
			cv = content.Int(x)
		case float64:
			cv = content.Float(x)
		case bool:
			cv = content.Bool(x)
		default:
			return content.Message{}, fmt.Errorf("attribute %q: unsupported type %T", n, v)
		}
		attrs = append(attrs, content.Attribute{Name: n, Value: cv})
	}
	return content.NewMessage(attrs, nil)
}

// askedFor is how long a publisher keeps sending full headers, with
// publication records and stamps, after the last request or echo: they
// cost up to k Bloom filters and a stamp per listener a message, and only
// a subscriber that asked reads them.
const askedFor = 30 * time.Second

// pubCC is a Publisher's side of congestion control. Its fields are
// guarded by the Publisher's mutex.
type pubCC struct {
	core  *congestion.Publisher
	id    uint64
	asked time.Time // last request or echo
	held  map[uint64]heldMessage
	next  uint64 // ID of the next offered message
	wake  chan struct{}
	fb    *Subscription
	buf   []byte // header scratch
	// unasked is the header while no subscriber asks: the ID alone.
	unasked []byte
	taken   uint64 // feedback messages received
	bad     uint64
}

// heldMessage is a message congestion control holds, with its content for
// the stamps it gets when it leaves.
type heldMessage struct {
	m       Message
	content content.Message
}

// startCongestion subscribes to the publisher's feedback and starts the
// goroutines that take it and release held messages.
func (p *Publisher) startCongestion() error {
	id := newID() // in every header; feedback comes addressed to it
	core, err := congestion.NewPublisher(id, congestion.DefaultConfig())
	if err != nil {
		return err
	}
	cc := &pubCC{core: core, id: id, held: map[uint64]heldMessage{}, wake: make(chan struct{}, 1)}
	pred := fmt.Sprintf("%s = %d", wire.CongestionTo, int64(cc.id))
	if cc.fb, err = p.c.subscribe(p.ctx, pred, false); err != nil {
		return fmt.Errorf("subscribing to congestion feedback (WithCongestionControl(false) turns it off): %w", err)
	}
	p.cc = cc
	go p.takeFeedback(cc)
	go p.pace(cc)
	return nil
}

// takeFeedback hands the feedback messages addressed to the publisher to
// its congestion core.
func (p *Publisher) takeFeedback(cc *pubCC) {
	for {
		d, err := cc.fb.Next(p.ctx)
		if err != nil {
			return
		}
		f, err := clientapi.UnmarshalCongestionFeedback(d.Payload, cc.id)
		now := time.Now()
		p.mu.Lock()
		cc.taken++
		switch {
		case err != nil:
			cc.bad++
		default:
			if (len(f.Feedback.Requests) > 0 || f.Feedback.Listen != nil) && cc.core.Feedback(f.Feedback, now) != nil {
				cc.bad++
			}
			if f.Echo != nil && cc.core.Echo(*f.Echo, now) != nil {
				cc.bad++
			}
			// A predicate alone does not ask for full headers: a listener
			// gives it again whenever the publisher forgot it, which
			// would keep them on for good where quiet subscribers should
			// let the publisher fall back to its ID (askedFor).
			if len(f.Feedback.Requests) > 0 || f.Echo != nil {
				cc.asked = now
			}
		}
		p.mu.Unlock()
		cc.poke()
	}
}

func (cc *pubCC) poke() {
	select {
	case cc.wake <- struct{}{}:
	default:
	}
}

// pace is the goroutine that sends held messages as their flows earn
// tokens.
func (p *Publisher) pace(cc *pubCC) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		p.mu.Lock()
		now := time.Now()
		released := cc.core.Release(now)
		for _, r := range released {
			hm, ok := cc.held[r.ID]
			if !ok {
				continue // cannot happen: every message the core holds is here
			}
			delete(cc.held, r.ID)
			// Checked when it was held: enqueue cannot fail.
			_ = p.enqueue(hm.m, cc.header(&r.Header, hm.content))
		}
		if len(released) > 0 {
			p.cond.Broadcast()
		}
		next, ok := cc.core.NextRelease(now)
		p.mu.Unlock()
		wait := time.Hour
		if ok {
			wait = max(time.Until(next), 0)
		}
		timer.Reset(wait)
		select {
		case <-timer.C:
		case <-cc.wake:
		case <-p.ctx.Done():
			return
		}
	}
}

// header is the wire form of h, the header of m, stamped for the
// subscribers that listen.
func (cc *pubCC) header(h *congestion.Header, m content.Message) []byte {
	cc.core.Stamp(h, m)
	cc.buf = wire.AppendCongestionHeader(cc.buf[:0], h)
	return cc.buf
}

// publishControlled offers m to congestion control and queues it, holds
// it, or waits for room. Until a subscriber asks, the message only names
// the publisher (11 bytes), so that a subscriber can ask, and the core is
// not consulted: it has no flow. Called with p.mu held.
func (p *Publisher) publishControlled(m Message) error {
	cc := p.cc
	// No clock read until a subscriber has asked: where clock reads are
	// slow, one per publish is a visible share of a publisher's CPU
	// (docs/results/perf-gaps.md).
	var now time.Time
	if !cc.asked.IsZero() {
		now = time.Now()
	}
	if cc.asked.IsZero() || now.Sub(cc.asked) >= askedFor {
		if cc.unasked == nil {
			cc.unasked = wire.AppendCongestionHeader(nil, &congestion.Header{Publisher: cc.id})
		}
		if err := p.enqueue(m, cc.unasked); err != nil {
			return err
		}
		p.sent++
		return nil
	}
	// Checked before the core sees it: a message it holds leaves later,
	// from the pacer, which must not find it malformed then.
	var err error
	if p.names, _, err = messageSize(m, p.names); err != nil {
		return fmt.Errorf("drip client: message %d: %w", p.sent, err)
	}
	cm, err := contentMessage(m)
	if err != nil {
		return fmt.Errorf("drip client: message %d: %w", p.sent, err)
	}
	bloom := wire.CongestionParams.EncodeMessage(cm)
	for {
		id := cc.next
		v, h := cc.core.Offer(id, bloom, now)
		switch v {
		case congestion.Send:
			if err := p.enqueue(m, cc.header(&h, cm)); err != nil {
				return err
			}
			p.sent++
			return nil
		case congestion.Held:
			cc.next++
			// Publish copies a message it sends at once (enqueue), so
			// callers reuse their buffers; one held for later must not
			// alias them either.
			m.Payload = slices.Clone(m.Payload)
			m.Attrs, m.Fields = maps.Clone(m.Attrs), m.Fields.Clone()
			cc.held[id] = heldMessage{m, cm}
			p.sent++
			cc.poke()
			return nil
		}
		// The queue of held messages is full: wait for the pacer.
		p.cond.Wait()
		if err := p.usable(); err != nil {
			return err
		}
		if p.ctx.Err() != nil {
			return p.ctx.Err()
		}
		now = time.Now()
	}
}

// Congestion returns what congestion control did for the publisher (zero
// when it is off).
func (p *Publisher) Congestion() CongestionStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cc == nil {
		return CongestionStats{}
	}
	st := p.cc.core.Stats()
	return CongestionStats{
		Sent: st.Sent, Controlled: st.Controlled, Held: st.HeldMessages, Waited: st.Waited,
		Feedback: p.cc.taken, BadFeedback: p.cc.bad, Flows: p.cc.core.Flows(time.Now()),
		Listeners: p.cc.core.Listeners(), Stamps: st.Stamps,
	}
}

// subCC is a Subscription's side of congestion control, owned by its run
// goroutine.
type subCC struct {
	core      *congestion.Subscriber
	predicate string // whose filters the core has
	bad       atomic.Uint64
	measured  atomic.Uint64
	stats     atomic.Pointer[congestion.SubscriberStats]
	sessions  atomic.Pointer[[]congestion.SessionStats]
	header    congestion.Header // decoding scratch: the core keeps none
}

func newSubCC() *subCC {
	core, err := congestion.NewSubscriber(newID(), congestion.DefaultConfig())
	if err != nil {
		panic(err) // the default configuration is valid
	}
	return &subCC{core: core}
}

// maxAlternatives bounds the Bloom filters a subscription's filter is
// matched by (a product of ranges can make many); beyond it the
// intersection alone, which sees more losses than there are.
const maxAlternatives = 64

// setPredicate gives the core the filters of the predicate the broker
// acknowledged.
func (cc *subCC) setPredicate(text string) {
	if text == cc.predicate {
		return
	}
	pred, err := content.Parse(text)
	if err != nil {
		return // the broker accepted it; keep the filters of the last one
	}
	cc.predicate = text
	fs := make([]congestion.Filter, len(pred))
	for i, f := range pred {
		fs[i] = congestionFilter(uint32(i), f)
		fs[i].Constraints = f // publishers stamp what the predicate takes
	}
	cc.core.SetFilters(fs)
}

// congestionFilter is how congestion control tells filter f: by the
// Bloom filters the subscriber matches messages with (Alternatives) and
// the one the publisher limits (Bloom), which every message f takes
// matches. cat-v2 encodes a range or substring as a disjunction of Bloom
// filters; the publisher limits what all of them share. For a range of
// at most maxAlternatives integers the subscriber matches by one equality
// per value instead: cat-v2 covers a range with a few coarse nodes (in
// `pub = 0 && k >= 0 && k < 20`, by nodes every k in [0, 100) matches),
// which brokers' routing tolerates but congestion control cannot: the
// subscriber would read every gap as a loss and could not measure what
// share of its flow it takes (docs/design.md §12, "coarse flows"). Both
// encodings are necessary conditions of f, so the flow is what either's
// alternatives share, the narrower for both. A value that is not an
// integer (a float inside the range) matches none of the equalities and
// counts as another filter's.
//
// The filter is coarse unless its Bloom filters take exactly its messages
// (but for Bloom false positives): every constraint an equality or an
// existence test, or one of them the enumerated range.
func congestionFilter(id uint32, f content.Filter) congestion.Filter {
	alts := wire.CongestionParams.AppendFilter(nil, f)
	flow := intersection(alts)
	exact := func(c content.Constraint) bool { return c.Op == content.OpEq || c.Op == content.OpExists }
	coarse := !allOf(f, exact)
	if eq, ranged := enumerateRange(f); eq != nil {
		flow = flow.Or(intersection(eq))
		alts = eq
		for i := range alts {
			alts[i] = alts[i].Or(flow) // so that an alternative implies the flow
		}
		coarse = !allOf(f, func(c content.Constraint) bool { return c.Name == ranged || exact(c) })
	}
	out := congestion.Filter{ID: id, Bloom: flow, Coarse: coarse}
	if len(alts) > 1 && len(alts) <= maxAlternatives {
		out.Alternatives = alts
	}
	return out
}

// intersection is the bits every one of bs has.
func intersection(bs []encoding.Bloom) encoding.Bloom {
	b := bs[0]
	for _, a := range bs[1:] {
		b = b.And(a)
	}
	return b
}

// allOf reports whether every constraint of f satisfies ok.
func allOf(f content.Filter, ok func(content.Constraint) bool) bool {
	return !slices.ContainsFunc(f, func(c content.Constraint) bool { return !ok(c) })
}

// enumerateRange is f's Bloom filters with its integer range on one
// attribute, named, written as equalities, or nil when f has no such range
// or it would take more than maxAlternatives.
func enumerateRange(f content.Filter) ([]encoding.Bloom, string) {
	for _, c := range f {
		if c.Value.Kind() != content.KindInt || !isOrder(c.Op) {
			continue
		}
		lo, hi, ok := intBounds(f, c.Name)
		// hi − lo in uint64: the int64 difference can overflow.
		if !ok || hi < lo || uint64(hi-lo) >= maxAlternatives {
			return nil, ""
		}
		var rest content.Filter
		for _, d := range f {
			if d.Name != c.Name {
				rest = append(rest, d)
			}
		}
		var alts []encoding.Bloom
		for i := range hi - lo + 1 {
			eq := append(slices.Clone(rest), content.Constraint{Name: c.Name, Op: content.OpEq, Value: content.Int(lo + i)})
			alts = wire.CongestionParams.AppendFilter(alts, eq)
			if len(alts) > maxAlternatives {
				return nil, ""
			}
		}
		return alts, c.Name
	}
	return nil, ""
}

func isOrder(op content.Op) bool {
	return op == content.OpLt || op == content.OpLe || op == content.OpGt || op == content.OpGe
}

// intBounds is the least and greatest integer f's constraints on name
// allow, when every one of them is an integer order constraint and both
// ends are bounded.
func intBounds(f content.Filter, name string) (lo, hi int64, ok bool) {
	lo, hi = math.MinInt64, math.MaxInt64
	var hasLo, hasHi bool
	for _, c := range f {
		if c.Name != name {
			continue
		}
		if c.Value.Kind() != content.KindInt || !isOrder(c.Op) {
			return 0, 0, false
		}
		v := c.Value.Int()
		switch c.Op {
		case content.OpGe:
			lo, hasLo = max(lo, v), true
		case content.OpGt:
			if v == math.MaxInt64 {
				return 0, 0, false
			}
			lo, hasLo = max(lo, v+1), true
		case content.OpLe:
			hi, hasHi = min(hi, v), true
		case content.OpLt:
			if v == math.MinInt64 {
				return 0, 0, false
			}
			hi, hasHi = min(hi, v-1), true
		}
	}
	return lo, hi, hasLo && hasHi
}

// receive measures a delivery that carries a congestion header.
func (cc *subCC) receive(d *Delivery, now time.Time) {
	h := &cc.header
	if err := wire.DecodeCongestionHeader(d.congestion, h); err != nil {
		cc.bad.Add(1)
		return
	}
	m, err := contentMessage(d.Message)
	if err != nil {
		cc.bad.Add(1)
		return
	}
	cc.measured.Add(1)
	h.Marked = d.marked
	cc.core.Receive(h, wire.CongestionParams.EncodeMessage(m), now)
}

// tick runs the core's rounds and sends what they produce.
func (cc *subCC) tick(c *Client, now time.Time) {
	fbs, echoes := cc.core.Tick(now)
	byPub := map[uint64]*clientapi.CongestionFeedback{}
	for _, fb := range fbs {
		byPub[fb.Publisher] = &clientapi.CongestionFeedback{Feedback: fb}
	}
	for _, e := range echoes {
		f := byPub[e.Publisher]
		if f == nil {
			f = &clientapi.CongestionFeedback{Feedback: congestion.Feedback{Publisher: e.Publisher, Subscriber: e.Subscriber, SentAt: e.SentAt}}
			byPub[e.Publisher] = f
		}
		f.Echo = &e
	}
	for pub, f := range byPub {
		payload, err := clientapi.MarshalCongestionFeedback(*f)
		if err != nil {
			continue
		}
		c.sendFeedback(pub, payload)
	}
	st := cc.core.Stats()
	cc.stats.Store(&st)
	// Ticks come once a round (a round trip) or an echo interval.
	sessions := cc.core.Sessions()
	cc.sessions.Store(&sessions)
}

// feedbackQueue bounds the feedback a client has yet to publish: feedback
// is sent again every round, so what does not fit is dropped and counted.
const feedbackQueue = 256

// feedbackSender publishes a client's feedback messages on one publisher
// of its own, without congestion control.
type feedbackSender struct {
	once    sync.Once
	ch      chan Message
	dropped atomic.Uint64
}

func (c *Client) sendFeedback(pub uint64, payload []byte) {
	fs := &c.feedback
	fs.once.Do(func() {
		fs.ch = make(chan Message, feedbackQueue)
		go c.runFeedback(fs.ch)
	})
	select {
	case fs.ch <- Message{Attrs: Attrs{wire.CongestionTo: int64(pub)}, Payload: payload}:
	default:
		fs.dropped.Add(1)
	}
}

func (c *Client) runFeedback(ch chan Message) {
	ctx := c.ctx
	var p *Publisher
	defer func() {
		if p != nil {
			_, _ = p.Close()
		}
	}()
	for {
		var m Message
		select {
		case m = <-ch:
		case <-ctx.Done():
			return
		}
		if p == nil {
			var err error
			if p, err = c.newPublisher(ctx, false); err != nil {
				c.feedback.dropped.Add(1)
				continue
			}
		}
		if err := p.Publish(m); err != nil {
			_, _ = p.Close()
			p = nil
			c.feedback.dropped.Add(1)
		}
	}
}

// Congestion returns what congestion control did for the subscription
// (zero when it is off).
func (s *Subscription) Congestion() CongestionStats {
	if s.cc == nil {
		return CongestionStats{}
	}
	out := CongestionStats{Measured: s.cc.measured.Load(), BadHeaders: s.cc.bad.Load(), Dropped: s.c.feedback.dropped.Load()}
	if st := s.cc.stats.Load(); st != nil {
		out.LossEvents, out.FeedbackSent, out.Echoes, out.Stamped = st.LossEvents, st.Feedback, st.Echoes, st.Stamped
	}
	if ss := s.cc.sessions.Load(); ss != nil {
		out.Sessions = *ss
	}
	return out
}
