package brokertest

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"google.golang.org/protobuf/proto"

	dripv1 "github.com/dripmesh/drip/api/proto/drip/v1"
	"github.com/dripmesh/drip/internal/clientapi"
	"github.com/dripmesh/drip/internal/content"
	"github.com/dripmesh/drip/internal/dedup"
	"github.com/dripmesh/drip/internal/node"
	"github.com/dripmesh/drip/internal/qos"
	"github.com/dripmesh/drip/internal/wire"
	"github.com/dripmesh/drip/internal/workload"
)

// reconnectDelay bounds a client's backoff before it subscribes or
// publishes again after its broker died (the Go client's first retries).
const reconnectDelay = 300 * time.Millisecond

// subscriber is a client holding one logical subscription, as the Go
// client does: it subscribes again elsewhere when its broker dies, moves
// make-before-break when its broker drains, and passes each stamp on once.
type subscriber struct {
	idx   int
	pred  content.Predicate
	flow  qos.Flow
	home  int
	conns []*subConn
	dedup *dedup.Filter
	// gapStart is when the subscriber lost its last subscription; -1 while
	// it has one.
	gapStart time.Duration
	retrying bool
}

type subConn struct {
	node int
	inc  int
	sub  *node.Subscription
	seen map[dedup.Stamp]bool // on this stream: a repeat is the broker's fault
	// moving is set once the broker said it drains.
	moving bool
	lost   uint64 // losses the stream has reported
}

// publisher sends a Poisson stream of messages at one broker at a time.
type publisher struct {
	idx  int
	home int
	node int
	inc  int
	fwd  *node.Forwarder
	gen  *workload.Generator
	rng  *rand.Rand
	rate float64
}

func (s *Sim) addClients() error {
	gen, err := workload.New(s.opts.Workload)
	if err != nil {
		return err
	}
	homes := make([]int, 0, len(s.nodes))
	for _, id := range s.opts.ClientBrokers {
		i, ok := s.index[id]
		if !ok {
			return fmt.Errorf("brokertest: Options.ClientBrokers names router %d, which the topology lacks", id)
		}
		homes = append(homes, i)
	}
	if len(homes) == 0 {
		for i := range s.nodes {
			homes = append(homes, i)
		}
	}
	for j := range s.opts.Subscribers {
		d, err := dedup.New(dedup.ClientConfig())
		if err != nil {
			return err
		}
		sub := &subscriber{idx: j, pred: gen.Predicate(), home: homes[j%len(homes)], dedup: d, gapStart: 0}
		if s.opts.Flow != nil {
			sub.flow = s.opts.Flow(j)
		}
		s.subs = append(s.subs, sub)
		s.ledger.subs = append(s.ledger.subs, &subRecord{pred: sub.pred, received: map[uint64]int{}, first: map[uint64]Delivery{}})
		s.subscribe(sub)
	}
	for i := range s.opts.Publishers {
		wc := s.opts.Workload
		wc.Seed += 1 + int64(i)
		g, err := workload.New(wc)
		if err != nil {
			return err
		}
		p := &publisher{idx: i, home: homes[i%len(homes)], node: -1, gen: g,
			rng: rand.New(rand.NewPCG(s.opts.Seed, uint64(i)+1)), rate: s.opts.Rate}
		s.pubs = append(s.pubs, p)
		if p.rate > 0 {
			s.after(s.nextGap(p), func() { s.publish(p) })
		}
	}
	return nil
}

func (s *Sim) nextGap(p *publisher) time.Duration {
	return time.Duration(p.rng.ExpFloat64() / p.rate * float64(time.Second))
}

// pick returns the broker a client should use now: from preferred on, the
// first that runs and does not drain, skipping avoid and compromised
// brokers (Options.Compromised); -1 if none.
func (s *Sim) pick(preferred, avoid int) int {
	for k := range s.nodes {
		i := (preferred + k) % len(s.nodes)
		if i != avoid && s.nodes[i].running() && !s.nodes[i].compromised {
			return i
		}
	}
	return -1
}

// subscribe opens a subscription for sub, preferring its home broker.
func (s *Sim) subscribe(sub *subscriber) bool {
	avoid := -1
	for _, c := range sub.conns {
		avoid = c.node
	}
	i := s.pick(sub.home, avoid)
	if i < 0 {
		return false
	}
	n := s.nodes[i]
	bs, err := n.node.Subscribe(sub.pred, sub.flow, fmt.Sprintf("sub%d", sub.idx))
	if err != nil {
		s.errs = append(s.errs, fmt.Errorf("subscriber %d at %s: %w", sub.idx, n.name, err))
		return false
	}
	sub.conns = append(sub.conns, &subConn{node: i, inc: n.inc, sub: bs, seen: map[dedup.Stamp]bool{}})
	if sub.gapStart >= 0 {
		s.ledger.subs[sub.idx].gaps = append(s.ledger.subs[sub.idx].gaps, [2]time.Duration{sub.gapStart, s.now})
		sub.gapStart = -1
	}
	return true
}

// pollSubscriber reads what sub's streams hold and reacts to their ends.
func (s *Sim) pollSubscriber(sub *subscriber) {
	rec := s.ledger.subs[sub.idx]
	kept := sub.conns[:0]
	// Moves subscribe elsewhere, adding to sub.conns: after the loop, which
	// rewrites sub.conns in place.
	var moving []*subConn
	for _, c := range sub.conns {
		n := s.nodes[c.node]
		broken := n.inc != c.inc // the broker died: its stream ends without a word
		if !broken {
			s.read(sub, c, rec)
		}
		ended := broken
		select {
		case <-c.sub.Done():
			ended = true
		default:
		}
		if !ended && !c.moving {
			select {
			case <-c.sub.Draining():
				c.moving = true
				moving = append(moving, c)
			default:
			}
		}
		if !ended {
			kept = append(kept, c)
		}
	}
	sub.conns = kept
	for _, c := range moving {
		s.move(sub, c)
	}
	if len(sub.conns) == 0 && sub.gapStart < 0 {
		sub.gapStart = s.now
	}
	if len(sub.conns) == 0 && !sub.retrying {
		sub.retrying = true
		s.after(reconnectDelay/3+time.Duration(s.rng.Int64N(int64(reconnectDelay))), func() {
			sub.retrying = false
			if len(sub.conns) == 0 && !s.subscribe(sub) {
				s.pollSubscriber(sub) // schedules the next try
			}
		})
	}
}

func (s *Sim) read(sub *subscriber, c *subConn, rec *subRecord) {
	for {
		select {
		case <-c.sub.Ready():
			q, ok := c.sub.Take()
			if !ok {
				continue
			}
			c.sub.Dequeued(q)
			p := new(dripv1.Published)
			if err := proto.Unmarshal(q.Append(nil), p); err != nil {
				s.errs = append(s.errs, fmt.Errorf("subscriber %d: undecodable delivery: %w", sub.idx, err))
				continue
			}
			st := dedup.Stamp{Origin: p.GetIngressRouter(), Epoch: p.GetIngressEpoch(), Seq: p.GetSeq()}
			if c.seen[st] {
				rec.streamDuplicates++
				continue
			}
			c.seen[st] = true
			if p.GetCongestionExperienced() {
				rec.marked++
			}
			if sub.dedup.Admit(st, s.base.Add(s.now)) != dedup.First {
				rec.clientSuppressed++
				continue
			}
			payload := p.GetMessage().GetPayload()
			if len(payload) != 8 {
				payload = binary.BigEndian.AppendUint64(nil, Forgery) // not a publisher's
			}
			id := binary.BigEndian.Uint64(payload)
			rec.received[id]++
			if id < uint64(len(s.ledger.msgs)) {
				at := s.ledger.msgs[id].at
				rec.first[id] = Delivery{Msg: id, PublishedAt: at, Latency: s.now - at, Elapsed: time.Duration(p.GetElapsedNs())}
			}
		default:
			if l := c.sub.Lost(); l > c.lost {
				rec.lost += l - c.lost
				c.lost = l
			}
			return
		}
	}
}

// move subscribes elsewhere while the drained subscription still delivers,
// and closes that one after the overlap the broker asked for.
func (s *Sim) move(sub *subscriber, old *subConn) {
	if !s.subscribe(sub) {
		return // nowhere to go: keep the old one until it ends
	}
	overlap := old.sub.DrainNotice().Overlap
	s.after(overlap, func() {
		old.sub.Close()
		for i, c := range sub.conns {
			if c == old {
				s.read(sub, c, s.ledger.subs[sub.idx])
				sub.conns = append(sub.conns[:i], sub.conns[i+1:]...)
				break
			}
		}
	})
}

// publish sends publisher p's next message and schedules the one after.
func (s *Sim) publish(p *publisher) {
	if s.publishUntil > 0 && s.now >= s.publishUntil {
		return
	}
	defer s.after(s.nextGap(p), func() { s.publish(p) })
	if p.node >= 0 {
		n := s.nodes[p.node]
		if n.inc != p.inc || !n.running() {
			// Dead, or draining: a draining broker's final acknowledgement
			// is exact, so the publisher moves without losing a message.
			p.node = -1
		}
	}
	if p.node < 0 {
		i := s.pick(p.home, -1)
		if i < 0 {
			return
		}
		p.node, p.inc, p.fwd = i, s.nodes[i].inc, s.nodes[i].node.NewForwarder()
	}
	if !s.nodes[p.node].node.Joined() {
		// A broker holds publish streams until it has joined the mesh
		// (broker.Broker.Joined): the publisher waits, sending nothing.
		return
	}
	m := p.gen.Message()
	id := s.record(p.node, m)
	pm := clientapi.MessageToProto(m)
	pm.Payload = binary.BigEndian.AppendUint64(nil, id)
	raw, err := proto.Marshal(pm)
	if err != nil {
		s.errs = append(s.errs, err)
		return
	}
	decoded, err := wire.DecodeMessage(raw, wire.DefaultMessageLimits())
	if err != nil {
		s.errs = append(s.errs, err)
		return
	}
	p.fwd.Publish(decoded, raw, 0, s.clock.Now())
	s.dirty = true
}

// Ledger records what was published and what each subscriber received.
type Ledger struct {
	msgs       []msgRecord
	subs       []*subRecord
	converged  []time.Duration // convergence checks that found the mesh converged
	checks     []time.Duration // every convergence check
	disruptive []time.Duration // kills, cuts, partitions, restarts, heals
}

type msgRecord struct {
	at       time.Duration
	ingress  int
	expected []int
}

type subRecord struct {
	pred             content.Predicate
	received         map[uint64]int // message ID → copies passed to the application
	first            map[uint64]Delivery
	gaps             [][2]time.Duration // [lost, back]; a gap still open has no entry
	streamDuplicates int
	clientSuppressed int
	marked           int // deliveries a broker marked (congestion experienced)
	lost             uint64
}

func newLedger() *Ledger { return &Ledger{} }

// Delivery is a message a subscriber's application received (its first
// copy).
type Delivery struct {
	Msg         uint64
	PublishedAt time.Duration
	// Latency is the virtual time from publication to the application.
	Latency time.Duration
	// Elapsed is the time since acceptance the mesh measured on the way
	// (Published.elapsed_ns; 0: not measured).
	Elapsed time.Duration
}

// Received lists what subscriber sub's application received, by message.
func (l *Ledger) Received(sub int) []Delivery {
	out := make([]Delivery, 0, len(l.subs[sub].first))
	for _, d := range l.subs[sub].first {
		out = append(out, d)
	}
	slices.SortFunc(out, func(a, b Delivery) int { return cmp.Compare(a.Msg, b.Msg) })
	return out
}

// Marked is how many deliveries subscriber sub's streams brought marked
// (Published.congestion_experienced), copies on one stream aside.
func (l *Ledger) Marked(sub int) int { return l.subs[sub].marked }

// Expected lists the messages published in [from, to) that subscriber
// sub's predicate matches.
func (l *Ledger) Expected(sub int, from, to time.Duration) []uint64 {
	var out []uint64
	for id, m := range l.msgs {
		if m.at >= from && m.at < to && slices.Contains(m.expected, sub) {
			out = append(out, uint64(id))
		}
	}
	return out
}

// AddSubscriber adds a subscriber of predicate p whose home is router at,
// subscribed at once, and returns its index in the ledger.
func (s *Sim) AddSubscriber(at uint32, p content.Predicate) (int, error) {
	d, err := dedup.New(dedup.ClientConfig())
	if err != nil {
		return 0, err
	}
	sub := &subscriber{idx: len(s.subs), pred: p, home: s.index[at], dedup: d, gapStart: 0}
	s.subs = append(s.subs, sub)
	s.ledger.subs = append(s.ledger.subs, &subRecord{pred: p, received: map[uint64]int{}, first: map[uint64]Delivery{}})
	if !s.subscribe(sub) {
		return 0, fmt.Errorf("brokertest: router %d cannot take a subscription", at)
	}
	return sub.idx, nil
}

// Publish publishes m at router at now, recorded in the ledger as every
// publisher's message is, and returns its ID.
func (s *Sim) Publish(at uint32, m content.Message) (uint64, error) {
	n := s.nodes[s.index[at]]
	if !n.running() {
		return 0, fmt.Errorf("brokertest: router %d does not run", at)
	}
	id := s.record(n.idx, m)
	pm := clientapi.MessageToProto(m)
	pm.Payload = binary.BigEndian.AppendUint64(nil, id)
	raw, err := proto.Marshal(pm)
	if err != nil {
		return 0, err
	}
	decoded, err := wire.DecodeMessage(raw, wire.DefaultMessageLimits())
	if err != nil {
		return 0, err
	}
	n.node.NewForwarder().Publish(decoded, raw, 0, s.clock.Now())
	s.dirty = true
	s.settle()
	return id, nil
}

// record enters a message published at node i now in the ledger.
func (s *Sim) record(i int, m content.Message) uint64 {
	id := uint64(len(s.ledger.msgs))
	var expected []int
	for j, sub := range s.subs {
		if sub.pred.Matches(m) {
			expected = append(expected, j)
		}
	}
	s.ledger.msgs = append(s.ledger.msgs, msgRecord{at: s.now, ingress: i, expected: expected})
	return id
}
