package congestion

import (
	"cmp"
	"math"
	"slices"
	"time"

	"github.com/dripmesh/drip/internal/content"
	"github.com/dripmesh/drip/internal/encoding"
)

// rttWeight is the weight of a new round-trip sample once one is known:
// TCP's smoothing (RFC 6298), so that one queueing spike moves the rate
// little.
const rttWeight = 0.125

// Filter is one of a subscriber's filters: an ID that the subscriber
// chooses and the filter's Bloom filter, which the publisher limits.
// An encoding that maps a filter to a disjunction of Bloom filters (ranges
// under cat-v2) gives them as Alternatives and their intersection as Bloom:
// the subscriber then tells its messages, and the losses a record shows,
// by the alternatives, precisely, and asks the publisher to limit the
// intersection, a superset (a flow's filter is one Bloom filter, so that
// covering is a subset test).
//
// Coarse says that the filter's Bloom filters also match messages it does
// not take, beyond Bloom false positives: an order or substring constraint
// that the encoding covers by coarse nodes. A record entry that only a
// coarse filter matches is then no evidence of a message the subscriber
// missed, so a session that has an exact filter's messages measures loss
// on those alone (see Receive).
//
// Constraints, when every filter has them, are the filter itself: the
// subscriber gives them to each publisher, which then stamps the messages
// they take (Publisher.Listen), and loss is measured on the stamps.
type Filter struct {
	ID           uint32
	Bloom        encoding.Bloom
	Alternatives []encoding.Bloom
	Coarse       bool
	Constraints  content.Filter
}

// Matches reports whether the message with Bloom filter m may match f:
// what the subscriber reads a record entry or a delivery by.
func (f *Filter) Matches(m encoding.Bloom) bool {
	if len(f.Alternatives) == 0 {
		return f.Bloom.SubsetOf(m)
	}
	for _, a := range f.Alternatives {
		if a.SubsetOf(m) {
			return true
		}
	}
	return false
}

// Subscriber is one subscriber's side of the protocol (Malekpour11
// §III-B-5): a session per publisher it receives from. It is not safe for
// concurrent use.
type Subscriber struct {
	cfg      Config
	id       uint64
	filters  []Filter
	listen   content.Predicate // the filters' constraints; nil unless all have them
	sessions map[uint64]*session
	stats    SubscriberStats
}

// SubscriberStats counts what a Subscriber saw, for metrics.
type SubscriberStats struct {
	// Messages counts messages received; LossEvents the loss events
	// detected; Feedback and Echoes the messages sent.
	Messages, LossEvents, Feedback, Echoes uint64
	// Evicted counts sessions dropped to stay within MaxSessions.
	Evicted uint64
	// Listens counts the feedback messages that gave the predicate, and
	// Stamped the messages measured by their stamps.
	Listens, Stamped uint64
	// Marked counts the messages a broker marked (Header.Marked) among
	// those loss is measured on.
	Marked uint64
}

// session is the state of one publisher (Malekpour11 Fig. 3).
type session struct {
	pub  uint64
	last uint64    // highest sequence number received
	seen time.Time // when the last message arrived
	loss lossHistory
	recv meter // messages from this publisher
	// stream counts the messages of the stream loss is measured on: all
	// of recv's, or the exact filters' alone once exact is set (see
	// Receive): an exact filter has an entry.
	stream meter
	exact  bool
	rate   float64 // λ_P, from the last header
	// rtt is the smoothed round-trip time, measured once an echo came
	// back; base is the last full measurement and the one-way delay of
	// data then, from which non-limiting subscribers follow changes.
	rtt        time.Duration
	measured   bool
	baseRTT    time.Duration
	baseOneWay time.Duration
	echoed     time.Time // when an echo was last requested
	round      time.Time // when the current round began
	distinct   int       // messages this round
	lastTotal  float64   // their rate in the last round
	entries    map[uint32]*entry
	counted    uint64 // loss events in the stats
	sampled    uint64 // the last message whose record entry was sampled
	// stamped says that the publisher stamps this subscriber's messages:
	// loss is measured on the stamps alone. stamp is the last stamp;
	// listened is when the predicate was last given, and unknown says that
	// a message with a full header came without the subscriber's stamp
	// since: the publisher does not know the predicate (or the message had
	// MaxStamps already).
	stamped  bool
	stamp    uint64
	listened time.Time
	unknown  bool
	// arrived counts the messages since the last echo request.
	arrived int
}

// entry is a filter's row in a session.
type entry struct {
	count int
	// rate is the reception rate Algorithm 1 uses, last the rate of the
	// last round alone (see round).
	rate, last float64
	quota      float64
	clr        bool
	// flow and taken are the record entries sampled that the flow's Bloom
	// filter matches and, of them, those the filter takes, each averaged
	// over the last ShareWindow of the flow's (see sampleRecords).
	flow, taken float64
}

// share is the fraction of its flow's messages that the filter takes,
// estimated from the records with one message of prior that it takes all
// (so that it starts at 1 and moves with the evidence), and at least
// 1/MaxQuotaScale.
func (e *entry) share(maxScale float64) float64 {
	return max((e.taken+1)/(e.flow+1), 1/maxScale)
}

// NewSubscriber returns the state of subscriber id.
func NewSubscriber(id uint64, cfg Config) (*Subscriber, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Subscriber{cfg: cfg, id: id, sessions: map[uint64]*session{}}, nil
}

// SetFilters replaces the subscriber's filters; rows of filters that are
// gone leave every session.
func (s *Subscriber) SetFilters(fs []Filter) {
	s.filters = slices.Clone(fs)
	s.listen = nil
	if len(fs) > 0 && !slices.ContainsFunc(fs, func(f Filter) bool { return len(f.Constraints) == 0 }) {
		s.listen = make(content.Predicate, len(fs))
		for i, f := range fs {
			s.listen[i] = f.Constraints
		}
	}
	for _, ss := range s.sessions {
		for id := range ss.entries {
			if !slices.ContainsFunc(fs, func(f Filter) bool { return f.ID == id }) {
				delete(ss.entries, id)
			}
		}
		ss.exact = s.hasExact(ss) // a filter may have changed kind under its ID
		// A publisher that stamps has the old predicate: give it the new
		// one at the next Tick.
		ss.listened, ss.unknown = time.Time{}, ss.unknown || ss.stamped
	}
}

// Stats returns the counters.
func (s *Subscriber) Stats() SubscriberStats { return s.stats }

// SessionStats is what a Subscriber measures of one publisher's messages:
// the inputs of the TCP response function and its result, for metrics and
// the experiments' time series.
type SessionStats struct {
	Publisher uint64
	// RTT is the smoothed round-trip time, InitialRTT until Measured.
	RTT      time.Duration
	Measured bool
	// LossEventRate is p (zero before the first loss event), Allowed the
	// rate eq. 1 gives for RTT and p (+Inf before the first loss event),
	// LossEvents the loss events detected.
	LossEventRate float64
	Allowed       float64
	LossEvents    uint64
	// Stamped says that loss is measured on the publisher's stamps.
	Stamped bool
}

// Sessions lists the sessions' measurements, by publisher.
func (s *Subscriber) Sessions() []SessionStats {
	out := make([]SessionStats, 0, len(s.sessions))
	for _, ss := range s.sessions {
		p := ss.loss.rate()
		out = append(out, SessionStats{Publisher: ss.pub, RTT: ss.rtt, Measured: ss.measured,
			LossEventRate: p, Allowed: TCPRate(ss.rtt, p), LossEvents: ss.loss.events, Stamped: ss.stamped})
	}
	slices.SortFunc(out, func(a, b SessionStats) int { return cmp.Compare(a.Publisher, b.Publisher) })
	return out
}

// Receive takes a message delivered to the subscriber: its header and
// its Bloom filter. A header without a sequence number is that of a
// publisher no subscriber has asked yet (it names itself, nothing more):
// it opens the session, so that the next Tick asks, and is otherwise not
// measured.
//
// Loss is measured on one stream of the session's messages: those of its
// exact filters once one has had a message from this publisher, else all.
// A coarse filter's Bloom filters match, in a record, messages the
// filter does not take, so counting its matches would read gaps of
// messages it never took as losses (docs/design.md §12, "Loss measured on
// exact filters"). The loss event rate is the same on either stream when
// losses do not depend on content, so the deliveries counted between loss
// events are the measured stream's too.
func (s *Subscriber) Receive(h *Header, m encoding.Bloom, now time.Time) {
	s.stats.Messages++
	ss := s.session(h.Publisher, now)
	ss.seen = now
	ss.arrived++
	if h.Seq == 0 {
		// The publisher sends full headers only once a subscriber asks;
		// a subscriber that listens asks with its predicate, once, as the
		// session begins (see listenDue).
		ss.unknown = ss.unknown || ss.last == 0
		return
	}
	ss.rate = h.Rate
	oneWay := now.Sub(h.SentAt)
	s.measureRTT(ss, h, oneWay, now)

	exactHit := false
	for i := range s.filters {
		f := &s.filters[i]
		if !f.Matches(m) {
			continue
		}
		if !f.Coarse {
			exactHit, ss.exact = true, true // its entry exists from here on
		}
		e := ss.entries[f.ID]
		if e == nil {
			e = &entry{}
			ss.entries[f.ID] = e
		}
		e.count++
		// The header names the flows' limiting subscribers: this one
		// limits f while its messages say so (an expired flow's messages
		// carry no tag).
		e.clr = slices.ContainsFunc(h.Tags, func(t Tag) bool { return t.Subscriber == s.id && t.Filter == f.ID })
	}
	s.sampleRecords(ss, h)
	ss.distinct++
	ss.recv.add(now)
	exact := ss.exact
	inStream := !exact || exactHit
	if inStream {
		ss.stream.add(now)
	}

	if h.Seq <= ss.last {
		return // late: it was counted lost, or is a copy
	}
	if h.Marked && inStream {
		// A queue on the way was filling: a loss event before the loss,
		// so that the rate settles below the queue's capacity instead of
		// at the point where it overflows (TFRC with ECN, RFC 5348 §3.1;
		// docs/design.md §12, "Marks").
		s.stats.Marked++
		ss.loss.loss(now, ss.rtt, ss.recv.rate(now))
	}
	if s.measureStamp(ss, h, now) {
		ss.last = h.Seq
		return
	}
	delivered := 1.0
	switch gap := h.Seq - ss.last - 1; {
	case ss.last == 0:
	case s.revealsLoss(ss, h, gap, exact):
		ss.loss.loss(now, ss.rtt, ss.recv.rate(now))
	case gap <= uint64(len(h.Record)):
	default:
		// The record does not reach back over the whole gap: assume the
		// messages it does not cover were irrelevant, and count the
		// delivery by the chance that this is right (Malekpour11 §III-C).
		rho := 1.0
		if ss.rate > 0 {
			rho = min(ss.stream.rate(now)/ss.rate, 1)
		}
		delivered = math.Pow(1-rho, float64(gap-uint64(len(h.Record))))
	}
	if inStream {
		ss.loss.deliver(delivered)
	}
	ss.last = h.Seq
}

// measureStamp measures loss on the stamps of the subscriber's messages
// once the publisher stamps them (Publisher.Listen), and reports whether
// it did: a gap in the stamps is a loss, exactly, where a publication
// record shows one only as likely (docs/design.md §12, "Exact loss
// detection"). A message without the subscriber's stamp then is not
// measured: the publisher counts only the messages it stamped. A stamp
// not above the last on a later message is a count begun again (the
// publisher forgot the subscriber and heard its predicate anew).
func (s *Subscriber) measureStamp(ss *session, h *Header, now time.Time) bool {
	i := slices.IndexFunc(h.Stamps, func(st Stamp) bool { return st.Subscriber == s.id })
	if i < 0 {
		ss.unknown = true
		return ss.stamped
	}
	stamp := h.Stamps[i].Seq
	s.stats.Stamped++
	if ss.stamped && stamp > ss.stamp+1 {
		ss.loss.loss(now, ss.rtt, ss.recv.rate(now))
	}
	ss.loss.deliver(1)
	ss.stamped, ss.stamp, ss.unknown = true, stamp, false
	return true
}

// hasExact reports whether one of the subscriber's exact filters has had
// messages from the session's publisher, which session.exact caches: loss
// is then measured on those.
func (s *Subscriber) hasExact(ss *session) bool {
	for i := range s.filters {
		if f := &s.filters[i]; !f.Coarse && ss.entries[f.ID] != nil {
			return true
		}
	}
	return false
}

// sampleRecords measures, for each of the session's flows, what share of
// the publisher's messages that the flow's Bloom filter matches the
// filter takes. The publisher spends a flow's quota on every message its
// Bloom filter matches, while the subscriber counts its quota in the
// messages its filter takes; when the Bloom filter is a superset (a range
// under cat-v2, limited by what its alternatives share) the quota sent is
// scaled by 1/share, or each round would ask for (1+α)·share of what the
// flow was allowed and, for a share below 2/3, starve it
// (docs/design.md §12). The sample is the record entries before each
// delivered message, each message once, and not the delivered message
// itself: whether a message is in a record depends on the messages after
// it, not on its own content, while a delivered message is there because
// its filter took it; counting it would overstate the share whenever
// gaps outrun the record.
func (s *Subscriber) sampleRecords(ss *session, h *Header) {
	n := min(uint64(len(h.Record)), h.Seq-1)
	first := max(h.Seq-n, ss.sampled+1) // the first message not yet sampled
	if first >= h.Seq {
		return
	}
	keep := 1 - 1/float64(s.cfg.ShareWindow)
	for _, r := range h.Record[uint64(len(h.Record))-(h.Seq-first):] {
		for i := range s.filters {
			f := &s.filters[i]
			e := ss.entries[f.ID]
			if e == nil || !f.Bloom.SubsetOf(r) {
				continue
			}
			e.flow = e.flow*keep + 1
			e.taken *= keep
			if f.Matches(r) {
				e.taken++
			}
		}
	}
	ss.sampled = h.Seq - 1
}

// revealsLoss reports whether the record shows a message in the gap
// before h that one of the session's flows would have carried: a filter
// that has received messages from this publisher (Malekpour11 §III-B-5),
// and only an exact one when exact is set (see Receive). Filters that
// never did are left out, because each adds its Bloom false positives (a
// message that looks relevant and was not) to every gap.
func (s *Subscriber) revealsLoss(ss *session, h *Header, gap uint64, exact bool) bool {
	n := uint64(len(h.Record))
	for _, r := range h.Record[n-min(gap, n):] {
		for i := range s.filters {
			if f := &s.filters[i]; ss.entries[f.ID] != nil && !(exact && f.Coarse) && f.Matches(r) {
				return true
			}
		}
	}
	return false
}

// measureRTT takes the round-trip samples a header carries: an echo reply,
// else δ_feedback when the subscriber limits one of the message's flows
// (Malekpour11 §III-B-4), else the change of the one-way data delay since
// the last full measurement (TFMCC, RFC 4654 §4.3).
func (s *Subscriber) measureRTT(ss *session, h *Header, oneWay time.Duration, now time.Time) {
	sample, full := time.Duration(0), false
	for _, e := range h.Echoes {
		if e.Subscriber == s.id {
			sample, full = now.Sub(e.SentAt)-e.Held, true
			break
		}
	}
	if !full {
		for _, t := range h.Tags {
			if t.Subscriber == s.id {
				sample, full = t.Feedback+oneWay, true
				break
			}
		}
	}
	if !full && ss.measured {
		sample = ss.baseRTT + oneWay - ss.baseOneWay
	}
	if sample <= 0 {
		return
	}
	if full {
		ss.baseRTT, ss.baseOneWay = sample, oneWay
	}
	if !ss.measured {
		if !full {
			return
		}
		ss.rtt, ss.measured = sample, true
		return
	}
	ss.rtt += time.Duration(rttWeight * float64(sample-ss.rtt))
}

func (s *Subscriber) session(pub uint64, now time.Time) *session {
	if ss := s.sessions[pub]; ss != nil {
		return ss
	}
	if len(s.sessions) >= s.cfg.MaxSessions {
		var oldest *session
		for _, ss := range s.sessions {
			if oldest == nil || ss.seen.Before(oldest.seen) {
				oldest = ss
			}
		}
		delete(s.sessions, oldest.pub)
		s.stats.Evicted++
	}
	ss := &session{pub: pub, rtt: s.cfg.InitialRTT, round: now, entries: map[uint32]*entry{}}
	s.sessions[pub] = ss
	return ss
}

// interval is the length of a session's round: one RTT, at least
// MinInterval.
func (s *Subscriber) interval(ss *session) time.Duration { return max(ss.rtt, s.cfg.MinInterval) }

// Tick runs what is due at now: Algorithm 1 for every session whose round
// has ended, echo requests for sessions without a round-trip time, the
// predicate for publishers whose messages come without the subscriber's
// stamp (Feedback.Listen, on the round's feedback or alone; see
// listenDue), and the expiry of sessions silent for SessionTimeout.
func (s *Subscriber) Tick(now time.Time) ([]Feedback, []Echo) {
	var fbs []Feedback
	var echoes []Echo
	for pub, ss := range s.sessions {
		if now.Sub(ss.seen) >= s.cfg.SessionTimeout {
			delete(s.sessions, pub)
			continue
		}
		if s.echoDue(ss, now) {
			first := ss.echoed.IsZero()
			ss.echoed, ss.arrived = now, 0
			e := Echo{Publisher: pub, Subscriber: s.id, SentAt: now}
			// A listener's echo is answered by its predicate (Publisher.Stamp),
			// and filters would add up to a kilobyte to every request; but a
			// publisher that has not stamped after the first request may
			// predate stamps, and needs them.
			if s.listen == nil || !ss.stamped && !first {
				for _, f := range s.filters[:min(len(s.filters), MaxEchoFilters)] {
					e.Filters = append(e.Filters, f.Bloom)
				}
			}
			echoes = append(echoes, e)
			s.stats.Echoes++
		}
		var fb Feedback
		ok := false
		if now.Sub(ss.round) >= s.interval(ss) {
			fb, ok = s.round(ss, now)
		}
		if s.listenDue(ss, now) {
			if !ok {
				fb, ok = Feedback{Publisher: pub, Subscriber: s.id, SentAt: now}, true
			}
			fb.Listen = s.listen
			ss.listened, ss.unknown = now, false
			s.stats.Listens++
		}
		if ok {
			fbs = append(fbs, fb)
			s.stats.Feedback++
		}
	}
	slices.SortFunc(fbs, func(a, b Feedback) int { return cmp.Compare(a.Publisher, b.Publisher) })
	return fbs, echoes
}

// echoDue reports whether the session asks for an echo at now: it has no
// round-trip time and asked last EchoInterval ago or never (Malekpour11
// §III-B-4: at session start). A listener's request waits at the publisher
// for the next message the subscriber receives, so it asks again only once
// a message came without the reply: asked every EchoInterval regardless,
// with their Bloom filters, the requests of the 8-broker overload's 6,400
// sparse sessions were much of the control traffic that filled its links
// (docs/results/congestion.md).
func (s *Subscriber) echoDue(ss *session, now time.Time) bool {
	if ss.measured || len(s.filters) == 0 || now.Sub(ss.echoed) < s.cfg.EchoInterval {
		return false
	}
	return s.listen == nil || ss.echoed.IsZero() || ss.arrived > 0
}

// listenDue reports whether the session's publisher is to be given the
// predicate now: its messages come without the subscriber's stamp, and the
// predicate was not given within ListenInterval. Only then: a predicate
// given to every publisher on a timer costs a message per subscriber and
// publisher, which on many-to-many meshes is load of its own
// (docs/results/congestion.md).
func (s *Subscriber) listenDue(ss *session, now time.Time) bool {
	return s.listen != nil && ss.unknown && (ss.listened.IsZero() || now.Sub(ss.listened) >= s.cfg.ListenInterval)
}

// NextTick is when Tick has something to do; false without sessions.
func (s *Subscriber) NextTick() (time.Time, bool) {
	var next time.Time
	for _, ss := range s.sessions {
		at := ss.round.Add(s.interval(ss))
		if s.listen != nil && ss.unknown {
			at = minTime(at, ss.listened.Add(s.cfg.ListenInterval))
		}
		if s.echoDue(ss, ss.echoed.Add(s.cfg.EchoInterval)) {
			at = minTime(at, ss.echoed.Add(s.cfg.EchoInterval))
		}
		if next.IsZero() || at.Before(next) {
			next = at
		}
	}
	return next, !next.IsZero()
}

// round is Algorithm 1 for one session at the end of a round.
func (s *Subscriber) round(ss *session, now time.Time) (Feedback, bool) {
	d := now.Sub(ss.round).Seconds()
	ss.round = now
	ids := make([]uint32, 0, len(ss.entries))
	// A reception rate is the greater of this round's and the last's:
	// TFRC's receive rate limit takes the greatest over the last two
	// round trips (RFC 5348 §4.3, X_recv_set), so that one round in which
	// the path delivered little, holding messages up without losing them,
	// does not set a flow's quota to what that round happened to deliver
	// (INCREASE_RATE starts from the reception rate, Algorithm 1 line 20).
	for id, e := range ss.entries {
		r := float64(e.count) / d
		e.rate, e.last, e.count = max(r, e.last), r, 0
		ids = append(ids, id)
	}
	slices.Sort(ids)
	round := float64(ss.distinct) / d
	total := max(round, ss.lastTotal)
	ss.lastTotal, ss.distinct = round, 0
	s.stats.LossEvents += ss.loss.events - ss.counted
	ss.counted = ss.loss.events

	allowed := TCPRate(ss.rtt, ss.loss.rate())
	switch {
	case allowed < total:
		// DECREASE_RATE: share the allowed rate max-min among the filters.
		demand := make([]float64, len(ids))
		for i, id := range ids {
			demand[i] = ss.entries[id].rate
		}
		for i, q := range MaxMin(allowed, demand) {
			ss.entries[ids[i]].quota = q
		}
	default:
		// INCREASE_RATE: keep what each filter gets, and let the filters
		// this subscriber limits grow into the unused rate, each by at
		// most α of its rate.
		clr := 0
		for _, id := range ids {
			e := ss.entries[id]
			e.quota = e.rate
			if e.clr {
				clr++
			}
		}
		if clr > 0 && allowed > total {
			share := (allowed - total) / float64(clr)
			for _, id := range ids {
				if e := ss.entries[id]; e.clr {
					e.quota += min(s.cfg.Alpha*max(e.rate, s.cfg.MinRate), share)
				}
			}
		}
	}
	fb := Feedback{Publisher: ss.pub, Subscriber: s.id, SentAt: now}
	for _, id := range ids {
		e := ss.entries[id]
		if e.quota < e.rate || e.clr {
			// The quota is counted in the filter's messages; the
			// publisher spends it on the flow's.
			q := e.quota / e.share(s.cfg.MaxQuotaScale)
			fb.Requests = append(fb.Requests, Request{Filter: id, Bloom: s.bloom(id), Quota: max(q, s.cfg.MinRate)})
		} else if e.rate == 0 {
			delete(ss.entries, id) // no flow from this publisher any more
		}
	}
	ss.exact = s.hasExact(ss)
	return fb, len(fb.Requests) > 0
}

func (s *Subscriber) bloom(id uint32) encoding.Bloom {
	for _, f := range s.filters {
		if f.ID == id {
			return f.Bloom
		}
	}
	return encoding.Bloom{}
}

// MaxMin shares capacity among demands max-min fairly (water filling): no
// demand gets more than it asks, and what one leaves is split among the
// rest. The shares are in the order of demand; a negative demand or
// capacity counts as zero. The lab's experiments judge fairness against
// it too.
func MaxMin(capacity float64, demand []float64) []float64 {
	order := make([]int, len(demand))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return cmp.Compare(demand[a], demand[b]) })
	out := make([]float64, len(demand))
	left := max(capacity, 0)
	for n, i := range order {
		share := left / float64(len(order)-n)
		out[i] = min(max(demand[i], 0), share)
		left -= out[i]
	}
	return out
}
