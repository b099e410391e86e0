package congestion

import "time"

// lossWeights are TFRC's weights for the last eight loss intervals, most
// recent first (RFC 5348 §5.4): the newest half counts fully, so that the
// rate answers a change of conditions within a few loss events, and the
// older half fades, so that it does not jump when one interval leaves.
var lossWeights = [...]float64{1, 1, 1, 1, 0.8, 0.6, 0.4, 0.2}

// lossHistory is a receiver's loss intervals (Malekpour11 §II-A, §III-C): a
// loss interval is the number of deliveries between two loss events, and a
// loss event is one or more losses within one round-trip time.
type lossHistory struct {
	closed [len(lossWeights)]float64 // most recent first
	n      int                       // closed intervals kept
	open   float64                   // deliveries since the last loss event
	event  time.Time                 // when the last loss event began
	events uint64                    // loss events ever
}

// deliver adds w to the open interval: 1 for a delivery known to follow no
// relevant loss, less when a gap the publication record does not cover may
// have hidden one (Malekpour11 §III-C).
func (h *lossHistory) deliver(w float64) { h.open += w }

// loss records a detected loss at now. A loss within one rtt of the loss
// event it follows is part of that event. The first loss event closes an
// interval of 1/p, where p is the loss event rate that gives the rate seen
// so far (RFC 5348 §6.3.1).
func (h *lossHistory) loss(now time.Time, rtt time.Duration, seen float64) {
	if h.n > 0 && now.Sub(h.event) < rtt {
		return
	}
	first := h.open
	if h.n == 0 {
		first = 1 / lossRateFor(rtt, seen)
	}
	copy(h.closed[1:], h.closed[:len(h.closed)-1])
	h.closed[0] = max(first, 1)
	h.n = min(h.n+1, len(h.closed))
	h.open = 0
	h.event = now
	h.events++
}

// rate is the loss event rate p, the inverse of the weighted average loss
// interval; the open interval counts when it raises the average (RFC 5348
// §5.4), so that a long run without loss lowers p before the next loss
// event. Zero before the first loss event.
func (h *lossHistory) rate() float64 {
	if h.n == 0 {
		return 0
	}
	var closed, w0 float64
	for i := range h.n {
		closed += lossWeights[i] * h.closed[i]
		w0 += lossWeights[i]
	}
	withOpen, w1 := lossWeights[0]*h.open, lossWeights[0]
	for i := range min(h.n, len(lossWeights)-1) {
		withOpen += lossWeights[i+1] * h.closed[i]
		w1 += lossWeights[i+1]
	}
	return 1 / max(closed/w0, withOpen/w1)
}
