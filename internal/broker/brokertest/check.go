package brokertest

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Report is the verdict on one run.
type Report struct {
	Published int // messages
	Expected  int // (message, subscriber) pairs the oracle named
	Delivered int // of those, passed to the application
	// Protected pairs were published while the mesh was converged, with
	// no disruptive fault until Delta later and the subscriber connected
	// throughout; every one must be delivered.
	Protected        int
	ProtectedMissing int
	Undelivered      int // expected pairs not delivered, protected or not
	FalsePositives   int // delivered to a subscriber the message does not match
	// Forged are deliveries of messages no publisher of the ledger
	// published: what a compromised broker injected (adversary.go).
	Forged int
	// StreamDuplicates are repeats on one subscription stream: a broker
	// passed a stamp on twice. AppDuplicates reached an application twice.
	StreamDuplicates int
	AppDuplicates    int
	ClientSuppressed int // copies the clients' filters dropped (failover overlap)
	SlowLost         uint64
	Gaps             int
	MaxGap           time.Duration
	// Accounted is what the brokers counted: route drops by reason, link
	// queue drops by reason, duplicates suppressed by verdict, malformed
	// bundles.
	Accounted  map[string]float64
	Violations []string // the first few broken guarantees, readable
	violations int
}

// OK says whether every guarantee held.
func (r Report) OK() bool { return r.violations == 0 }

func (r Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "published %d, expected %d, delivered %d (protected %d, %d missing), undelivered %d, false positives %d, "+
		"duplicates %d on streams and %d at applications, %d suppressed by clients, %d lost to slow reading, %d gaps (longest %v)",
		r.Published, r.Expected, r.Delivered, r.Protected, r.ProtectedMissing, r.Undelivered, r.FalsePositives,
		r.StreamDuplicates, r.AppDuplicates, r.ClientSuppressed, r.SlowLost, r.Gaps, r.MaxGap)
	if r.Forged > 0 {
		fmt.Fprintf(&b, ", %d forged", r.Forged)
	}
	keys := make([]string, 0, len(r.Accounted))
	for k := range r.Accounted {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	b.WriteString("; brokers counted")
	for _, k := range keys {
		if r.Accounted[k] > 0 {
			fmt.Fprintf(&b, " %s=%.0f", k, r.Accounted[k])
		}
	}
	for _, v := range r.Violations {
		b.WriteString("\n  ")
		b.WriteString(v)
	}
	if r.violations > len(r.Violations) {
		fmt.Fprintf(&b, "\n  ... and %d more", r.violations-len(r.Violations))
	}
	return b.String()
}

func (r *Report) violate(format string, args ...any) {
	r.violations++
	if len(r.Violations) < 10 {
		r.Violations = append(r.Violations, fmt.Sprintf(format, args...))
	}
}

// Check judges the run so far. delta is how long a protected message may
// take to arrive.
func (s *Sim) Check(delta time.Duration) Report {
	l := s.ledger
	r := Report{Accounted: map[string]float64{}}
	for _, c := range []struct{ name, label, prefix string }{
		{"drip_route_dropped_destinations_total", "reason", "route_dropped:"},
		{"drip_link_dropped_bundles_total", "reason", "link_dropped:"},
		{"drip_duplicates_suppressed_total", "verdict", "suppressed:"},
		{"drip_malformed_bundles_total", "", "malformed"},
		{"drip_bundles_refused_total", "reason", "refused:"},
		{"drip_false_positives_total", "", "bloom_false_positives"},
	} {
		for k, v := range s.Counters(c.name, c.label) {
			r.Accounted[c.prefix+k] += v
		}
	}
	r.Published = len(l.msgs)
	for j, sub := range s.subs {
		rec := l.subs[j]
		r.StreamDuplicates += rec.streamDuplicates
		r.ClientSuppressed += rec.clientSuppressed
		r.SlowLost += rec.lost
		if rec.streamDuplicates > 0 {
			r.violate("subscriber %d: a broker passed %d stamps on twice on one stream", j, rec.streamDuplicates)
		}
		for _, g := range rec.gaps {
			if g[0] > 0 { // the first "gap" is the initial subscribe
				r.Gaps++
				r.MaxGap = max(r.MaxGap, g[1]-g[0])
			}
		}
		for id, n := range rec.received {
			if id == AsItself {
				continue // what a compromised broker publishes in its own name
			}
			if id >= uint64(len(l.msgs)) {
				r.Forged += n
				r.violate("subscriber %d received %d messages no publisher published (forgeries)", j, n)
				continue
			}
			m := l.msgs[id]
			if !slices.Contains(m.expected, j) {
				r.FalsePositives++
				r.violate("subscriber %d received message %d (published at %v) that its predicate %s does not match", j, id, m.at, rec.pred)
			}
			if n > 1 {
				r.AppDuplicates += n - 1
				r.violate("subscriber %d received message %d (published at %v) %d times", j, id, m.at, n)
			}
		}
		_ = sub
	}
	for id, m := range l.msgs {
		for _, j := range m.expected {
			r.Expected++
			rec := l.subs[j]
			got := rec.received[uint64(id)] > 0
			if got {
				r.Delivered++
			} else {
				r.Undelivered++
			}
			if s.protected(m.at, j, delta) {
				r.Protected++
				if !got {
					r.ProtectedMissing++
					r.violate("subscriber %d never received message %d published at %v at %s, while the mesh was converged",
						j, id, m.at, s.nodes[m.ingress].name)
				}
			}
		}
	}
	return r
}

// protected says whether subscriber j must receive a message published at
// t: the mesh was converged at some check c ≤ t, no disruptive fault
// happened from c to t+delta, and the subscriber was connected throughout
// (a graceful move keeps it connected).
func (s *Sim) protected(t time.Duration, j int, delta time.Duration) bool {
	l := s.ledger
	i, _ := slices.BinarySearch(l.converged, t+1)
	if i == 0 {
		return false
	}
	c := l.converged[i-1]
	end := t + delta
	if end > s.now {
		return false // not enough time has passed to judge
	}
	k, _ := slices.BinarySearch(l.disruptive, c)
	if k < len(l.disruptive) && l.disruptive[k] <= end {
		return false
	}
	sub := s.subs[j]
	for _, g := range l.subs[j].gaps {
		if g[0] <= end && g[1] >= c {
			return false
		}
	}
	if sub.gapStart >= 0 && sub.gapStart <= end {
		return false
	}
	return true
}

// watchConvergence records every interval whether the mesh is converged.
func (s *Sim) watchConvergence(every time.Duration) {
	var check func()
	check = func() {
		s.ledger.checks = append(s.ledger.checks, s.now)
		if s.Converged() {
			s.ledger.converged = append(s.ledger.converged, s.now)
		}
		s.after(every, check)
	}
	s.after(every, check)
}

// disrupted records a fault that may lose messages in flight.
func (s *Sim) disrupted() { s.ledger.disruptive = append(s.ledger.disruptive, s.now) }
