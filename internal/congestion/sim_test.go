package congestion

import (
	"math/rand/v2"
	"slices"
	"time"

	"github.com/dripmesh/drip/internal/encoding"
)

// epoch is where virtual time starts in the tests.
var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// bottleneck is a drop-tail link in virtual time: it serves rate messages
// per second, queues at most limit, and adds delay.
type bottleneck struct {
	rate      float64
	limit     int
	delay     time.Duration
	busyUntil time.Time
	departs   []time.Time // of the messages queued or in service
	dropped   int
}

// queued is how many messages are queued or in service at now.
func (l *bottleneck) queued(now time.Time) int {
	n := 0
	for _, d := range l.departs {
		if d.After(now) {
			n++
		}
	}
	return n
}

// send queues a message offered at now and says when it arrives; false
// when the queue is full and it is dropped.
func (l *bottleneck) send(now time.Time) (time.Time, bool) {
	i := 0
	for i < len(l.departs) && !l.departs[i].After(now) {
		i++
	}
	l.departs = l.departs[i:]
	if len(l.departs) >= l.limit {
		l.dropped++
		return time.Time{}, false
	}
	start := now
	if l.busyUntil.After(start) {
		start = l.busyUntil
	}
	dep := start.Add(time.Duration(float64(time.Second) / l.rate))
	l.busyUntil = dep
	l.departs = append(l.departs, dep)
	return dep.Add(l.delay), true
}

// pipe is a FIFO of things in flight that arrive in order.
type pipe[T any] struct {
	at   []time.Time
	what []T
}

func (p *pipe[T]) push(at time.Time, v T) {
	p.at = append(p.at, at)
	p.what = append(p.what, v)
}

// pop returns the next thing that has arrived by now.
func (p *pipe[T]) pop(now time.Time) (T, bool) {
	var zero T
	if len(p.at) == 0 || p.at[0].After(now) {
		return zero, false
	}
	v := p.what[0]
	p.at, p.what = p.at[1:], p.what[1:]
	return v, true
}

// delivery is a message on its way to the subscriber.
type delivery struct {
	h Header
	m encoding.Bloom
}

// bits returns a Bloom filter with the given bits set: the tests' messages
// and filters, whose subset relation is what matching is.
func bits(positions ...int) encoding.Bloom {
	var b encoding.Bloom
	for _, p := range positions {
		b.Set(p)
	}
	return b
}

// scenario is one publisher and one subscriber in virtual time: the
// publisher's messages match the subscriber with probability rho and only
// those cross the bottleneck (a content-based network sends a subscriber
// only what it asked for); feedback returns over an uncongested path.
type scenario struct {
	cfg        Config
	controlled bool
	publish    func(t time.Duration) float64 // the application's rate at t
	rho        float64
	link       *bottleneck
	back       time.Duration // feedback path delay
	duration   time.Duration
	step       time.Duration
	seed       uint64
	// subscriberClock is the subscriber's clock offset: it must cancel.
	subscriberClock time.Duration
	// sample, if set, is called once per second of virtual time.
	sample func(t time.Duration, s *Subscriber)
	// filter, if set, is the subscriber's filter instead of bits(1), and
	// other the Bloom filter of the messages it does not take instead of
	// bits(3, 4): a coarse flow's test makes other match the flow.
	filter *Filter
	other  encoding.Bloom
	// lateFrom is when lateDelivered starts counting.
	lateFrom time.Duration
	// split, when above 1, gives the subscriber that many filters, each
	// taking an equal part of its messages (bits(1, 2, 10+j) for filter
	// bits(1, 10+j)), instead of one.
	split int
}

type outcome struct {
	offered, sent, delivered, dropped int
	lateDelivered                     int // from lateFrom on
	pub                               *Publisher
	sub                               *Subscriber
}

func (sc scenario) run() outcome {
	rng := rand.New(rand.NewPCG(sc.seed, 1))
	pub, err := NewPublisher(1, sc.cfg)
	if err != nil {
		panic(err)
	}
	sub, err := NewSubscriber(7, sc.cfg)
	if err != nil {
		panic(err)
	}
	relevant, other := bits(1, 2), bits(3, 4)
	if !sc.other.IsZero() {
		other = sc.other
	}
	filter := Filter{ID: 1, Bloom: bits(1)}
	if sc.filter != nil {
		filter = *sc.filter
	}
	filters := []Filter{filter}
	var parts []encoding.Bloom // the relevant messages, by filter
	if sc.split > 1 {
		filters = nil
		for j := range sc.split {
			filters = append(filters, Filter{ID: uint32(j + 1), Bloom: bits(1, 10+j)})
			parts = append(parts, bits(1, 2, 10+j))
		}
	}
	sub.SetFilters(filters)
	isRelevant := func(m encoding.Bloom) bool { return m == relevant || slices.Contains(parts, m) }
	var out outcome
	out.pub, out.sub = pub, sub
	var toSub pipe[delivery]
	var toPubFB pipe[Feedback]
	var toPubEcho pipe[Echo]
	var pending []encoding.Bloom // offered by the application, refused as Full
	blooms := map[uint64]encoding.Bloom{}
	var nextID uint64
	credit := 0.0
	forward := func(h Header, m encoding.Bloom, now time.Time) {
		out.sent++
		if !isRelevant(m) {
			return
		}
		if at, ok := sc.link.send(now); ok {
			toSub.push(at, delivery{h, m})
		}
	}
	nextSample := time.Second
	for t := time.Duration(0); t < sc.duration; t += sc.step {
		now := epoch.Add(t)
		credit += sc.publish(t) * sc.step.Seconds()
		for ; credit >= 1; credit-- {
			m := other
			if rng.Float64() < sc.rho {
				m = relevant
				if len(parts) > 0 {
					m = parts[rng.IntN(len(parts))]
				}
			}
			out.offered++
			pending = append(pending, m)
		}
		// The application publishes in order and blocks while the queue
		// is full.
		for len(pending) > 0 {
			m := pending[0]
			if !sc.controlled {
				_, h := pub.Offer(nextID, m, now)
				forward(h, m, now)
				pending = pending[1:]
				continue
			}
			nextID++
			v, h := pub.Offer(nextID, m, now)
			if v == Full {
				break
			}
			pending = pending[1:]
			if v == Send {
				forward(h, m, now)
			} else {
				blooms[nextID] = m
			}
		}
		for _, r := range pub.Release(now) {
			forward(r.Header, blooms[r.ID], now)
			delete(blooms, r.ID)
		}
		subNow := now.Add(sc.subscriberClock)
		for {
			d, ok := toSub.pop(now)
			if !ok {
				break
			}
			out.delivered++
			if t >= sc.lateFrom {
				out.lateDelivered++
			}
			sub.Receive(&d.h, d.m, subNow)
		}
		fbs, echoes := sub.Tick(subNow)
		// Without control the subscriber still measures (the study of
		// Fig. 5 watches its estimates), but the publisher ignores it.
		if sc.controlled {
			for _, fb := range fbs {
				toPubFB.push(now.Add(sc.back), fb)
			}
		}
		for _, e := range echoes {
			toPubEcho.push(now.Add(sc.back), e)
		}
		for {
			fb, ok := toPubFB.pop(now)
			if !ok {
				break
			}
			_ = pub.Feedback(fb, now)
		}
		for {
			e, ok := toPubEcho.pop(now)
			if !ok {
				break
			}
			_ = pub.Echo(e, now)
		}
		if sc.sample != nil && t+sc.step >= nextSample {
			sc.sample(nextSample, sub)
			nextSample += time.Second
		}
	}
	out.dropped = sc.link.dropped
	return out
}
