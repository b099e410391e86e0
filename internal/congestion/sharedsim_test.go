package congestion

import (
	"math/rand/v2"
	"time"

	"github.com/dripmesh/drip/internal/encoding"
)

// pair is one publisher and its subscriber in a shared-bottleneck run:
// the publisher offers rate messages a second, of which rho match the
// subscriber and cross the bottleneck.
type pair struct {
	rate func(t time.Duration) float64
	rho  float64
}

// sharedRun is Malekpour11 §IV-B/C in virtual time: several
// publisher/subscriber pairs whose matching messages share one drop-tail
// bottleneck, whose rate may change. Feedback returns over an uncongested
// path. It returns each pair's deliveries and the link's drops per second.
type sharedRun struct {
	cfg      Config
	pairs    []pair
	capacity func(t time.Duration) float64 // messages/s
	limit    int
	delay    time.Duration
	duration time.Duration
	seed     uint64
	// tcpFrom, if positive, starts a TCP Reno flow with unbounded data
	// across the same bottleneck at that time (Fig. 10).
	tcpFrom time.Duration
	// stallFor, if positive, holds every delivery that would arrive in
	// the first stallFor of each stallEvery until then: head-of-line
	// blocking below the bottleneck, as when a broker's peer link (a TCP
	// connection) recovers a lost segment. Nothing is lost, and the
	// bottleneck keeps serving.
	stallEvery, stallFor time.Duration
	// markAt, if positive, marks each message that finds at least markAt
	// queued ahead of it at the bottleneck (Header.Marked), as a broker
	// marks bundles for a link whose queue is filling.
	markAt int
}

// deferred is when a delivery due at at arrives, stalls considered.
func (r sharedRun) deferred(at time.Time) time.Time {
	if r.stallFor <= 0 {
		return at
	}
	into := at.Sub(epoch) % r.stallEvery
	if into < r.stallFor {
		return at.Add(r.stallFor - into)
	}
	return at
}

type sharedOutcome struct {
	delivered [][]int // [pair][second]
	dropped   []int   // [second]
	offered   []int   // per pair
	tcp       []int   // the TCP flow's deliveries per second
}

// reno is a TCP Reno sender in packets: slow start, then one more per
// window per round trip; half the window at most once per round trip on
// loss, which it learns when the packets behind the lost one are acked
// (three duplicate acks, modelled as the lost packet's would-be arrival
// plus the ack's return).
type reno struct {
	cwnd, ssthresh float64
	inflight       int
	lastCut        time.Time
	acks           pipe[bool] // true: acked, false: found lost
}

func (r *reno) onAck(ok bool, now time.Time, rtt time.Duration) {
	r.inflight--
	switch {
	case ok && r.cwnd < r.ssthresh:
		r.cwnd++
	case ok:
		r.cwnd += 1 / r.cwnd
	case now.Sub(r.lastCut) > rtt:
		r.cwnd = max(r.cwnd/2, 1)
		r.ssthresh = r.cwnd
		r.lastCut = now
	}
}

func (r sharedRun) run() sharedOutcome {
	const step = time.Millisecond
	rng := rand.New(rand.NewPCG(r.seed, 2))
	link := &bottleneck{rate: r.capacity(0), limit: r.limit, delay: r.delay}
	secs := int(r.duration / time.Second)
	out := sharedOutcome{delivered: make([][]int, len(r.pairs)), dropped: make([]int, secs), offered: make([]int, len(r.pairs)), tcp: make([]int, secs)}
	tcp := &reno{cwnd: 1, ssthresh: 1e9}
	type side struct {
		pub     *Publisher
		sub     *Subscriber
		credit  float64
		pending []encoding.Bloom
		held    map[uint64]encoding.Bloom
		next    uint64
		fb      pipe[Feedback]
		echo    pipe[Echo]
	}
	var toSubs pipe[struct {
		i int
		d delivery
	}]
	sides := make([]*side, len(r.pairs))
	for i := range r.pairs {
		pub, err := NewPublisher(uint64(100+i), r.cfg)
		if err != nil {
			panic(err)
		}
		sub, err := NewSubscriber(uint64(200+i), r.cfg)
		if err != nil {
			panic(err)
		}
		// Each pair's messages carry its own bit: a subscriber matches its
		// publisher's relevant messages only.
		sub.SetFilters([]Filter{{ID: 1, Bloom: bits(10 + i)}})
		sides[i] = &side{pub: pub, sub: sub, held: map[uint64]encoding.Bloom{}}
		out.delivered[i] = make([]int, secs)
	}
	for t := time.Duration(0); t < r.duration; t += step {
		now := epoch.Add(t)
		sec := int(t / time.Second)
		link.rate = r.capacity(t)
		for i, s := range sides {
			p := r.pairs[i]
			s.credit += p.rate(t) * step.Seconds()
			for ; s.credit >= 1; s.credit-- {
				m := bits(40 + i) // matches nobody: never crosses the link
				if rng.Float64() < p.rho {
					m = bits(10+i, 40+i)
				}
				out.offered[i]++
				s.pending = append(s.pending, m)
			}
			send := func(h Header, m encoding.Bloom) {
				if !bits(10 + i).SubsetOf(m) {
					return
				}
				if r.markAt > 0 && link.queued(now) >= r.markAt {
					h.Marked = true
				}
				if at, ok := link.send(now); ok {
					toSubs.push(r.deferred(at), struct {
						i int
						d delivery
					}{i, delivery{h, m}})
				} else {
					out.dropped[sec]++
				}
			}
			for len(s.pending) > 0 {
				s.next++
				v, h := s.pub.Offer(s.next, s.pending[0], now)
				if v == Full {
					break
				}
				if v == Send {
					send(h, s.pending[0])
				} else {
					s.held[s.next] = s.pending[0]
				}
				s.pending = s.pending[1:]
			}
			for _, rel := range s.pub.Release(now) {
				send(rel.Header, s.held[rel.ID])
				delete(s.held, rel.ID)
			}
		}
		if r.tcpFrom > 0 && t >= r.tcpFrom {
			for tcp.inflight < int(tcp.cwnd) {
				tcp.inflight++
				if at, ok := link.send(now); ok {
					tcp.acks.push(at.Add(r.delay), true)
				} else {
					out.dropped[sec]++
					// Duplicate acks come back behind the packets queued
					// ahead of the lost one.
					tcp.acks.push(link.busyUntil.Add(2*r.delay), false)
				}
			}
			for {
				ok, arrived := tcp.acks.pop(now)
				if !arrived {
					break
				}
				if ok {
					out.tcp[sec]++
				}
				tcp.onAck(ok, now, 2*r.delay+time.Duration(float64(r.limit)/link.rate*float64(time.Second))/2)
			}
		}
		for {
			x, ok := toSubs.pop(now)
			if !ok {
				break
			}
			out.delivered[x.i][sec]++
			sides[x.i].sub.Receive(&x.d.h, x.d.m, now)
		}
		for _, s := range sides {
			fbs, echoes := s.sub.Tick(now)
			for _, fb := range fbs {
				s.fb.push(now.Add(r.delay), fb)
			}
			for _, e := range echoes {
				s.echo.push(now.Add(r.delay), e)
			}
			for {
				fb, ok := s.fb.pop(now)
				if !ok {
					break
				}
				_ = s.pub.Feedback(fb, now)
			}
			for {
				e, ok := s.echo.pop(now)
				if !ok {
					break
				}
				_ = s.pub.Echo(e, now)
			}
		}
	}
	return out
}

// jain is Jain's fairness index of x normalized by the fair shares.
func jain(x, share []float64) float64 {
	var sum, sq float64
	for i := range x {
		r := x[i] / share[i]
		sum += r
		sq += r * r
	}
	return sum * sum / (float64(len(x)) * sq)
}
