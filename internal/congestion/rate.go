package congestion

import (
	"math"
	"time"
)

// TCPRate is the TCP response function of Malekpour11 eq. 1 (TFRC's, RFC
// 5348 §3.1, with one message per packet, b = 1 and t_RTO = 4·t_RTT): the
// rate, in messages per second, that a TCP flow would get with round-trip
// time rtt and loss event rate p. With no loss it is unbounded.
func TCPRate(rtt time.Duration, p float64) float64 {
	if p <= 0 || rtt <= 0 {
		return math.Inf(1)
	}
	p = min(p, 1)
	r := rtt.Seconds()
	return 1 / (r * (math.Sqrt(2*p/3) + 12*math.Sqrt(3*p/8)*p*(1+32*p*p)))
}

// lossRateFor inverts TCPRate: the loss event rate at which a flow with
// round-trip time rtt gets rate messages per second. TFRC seeds its first
// loss interval with it (RFC 5348 §6.3.1), so that the first loss event
// sets the rate near what the receiver saw, rather than at what a long
// loss-free start would give. TCPRate falls as p grows, so bisection on
// log p converges.
func lossRateFor(rtt time.Duration, rate float64) float64 {
	if rate <= 0 || math.IsInf(rate, 1) || rtt <= 0 {
		return 1
	}
	lo, hi := 1e-9, 1.0
	if TCPRate(rtt, hi) >= rate {
		return hi
	}
	if TCPRate(rtt, lo) <= rate {
		return lo
	}
	for range 60 {
		mid := math.Sqrt(lo * hi)
		if TCPRate(rtt, mid) > rate {
			lo = mid
		} else {
			hi = mid
		}
	}
	return hi
}

// meter is an exponentially decaying event rate with time constant tau: a
// rate without a window to keep. It starts at zero and approaches a steady
// rate as 1 − e^(−t/tau), so two meters started together are in
// proportion from the start (the matching ratio ρ = R_P/λ_P is one).
type meter struct {
	v  float64
	at time.Time
}

// meterTau is the time constant of every meter: a second, the scale at
// which Malekpour11's experiments change rates.
const meterTau = time.Second

func (m *meter) decay(now time.Time) {
	if m.at.IsZero() {
		m.at = now
		return
	}
	if d := now.Sub(m.at); d > 0 {
		m.v *= math.Exp(-d.Seconds() / meterTau.Seconds())
		m.at = now
	}
}

// add counts one event at now.
func (m *meter) add(now time.Time) {
	m.decay(now)
	m.v += 1 / meterTau.Seconds()
}

// rate is the events per second at now.
func (m *meter) rate(now time.Time) float64 {
	m.decay(now)
	return m.v
}
