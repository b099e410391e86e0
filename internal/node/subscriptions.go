package node

import (
	"slices"
	"sync"
	"time"

	"github.com/dripmesh/drip/internal/content"
	"github.com/dripmesh/drip/internal/encoding"
	"github.com/dripmesh/drip/internal/linkstate"
	"github.com/dripmesh/drip/internal/match"
	"github.com/dripmesh/drip/internal/qos"
	"k8s.io/utils/clock"
)

type subscriptionsConfig struct {
	max, queue, queueBytes int
	enc                    encoding.Params
	broker                 string // name, for acknowledgements
	slow                   SlowSubscribers
	clock                  clock.WithTicker // stall times and waits for room
	start                  time.Time        // the origin of now
	budget                 *Budget          // broker-wide, shared with the link queues
}

// now reads the subscriptions' monotonic clock, in nanoseconds.
func (c *subscriptionsConfig) now() int64 { return int64(c.clock.Since(c.start)) }

// subscriptions is the LOCAL-PREDICATES table (Carzaniga09 §2.2): the exact
// index used for local delivery plus each subscription's encoded filters
// for the advertisement. It tells its owner about every change through
// changed, never through a pointer back.
type subscriptions struct {
	cfg     subscriptionsConfig
	m       *metrics
	changed func()

	mu       sync.Mutex // guards all below; match.Index is not concurrent
	index    *match.Index
	byID     map[match.SubscriberID]*Subscription
	nextID   match.SubscriberID
	closed   bool
	draining *DrainNotice // once the broker drains
	filters  int
}

func newSubscriptions(cfg subscriptionsConfig, m *metrics, changed func()) *subscriptions {
	return &subscriptions{cfg: cfg, m: m, changed: changed, index: match.New(), byID: map[match.SubscriberID]*Subscription{}}
}

func (s *subscriptions) add(p content.Predicate, f qos.Flow, client string) (*Subscription, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closed:
		return nil, ErrStopped
	case s.draining != nil:
		return nil, ErrDraining
	case len(s.byID) >= s.cfg.max:
		return nil, &LimitError{What: "subscriptions", Limit: s.cfg.max}
	}
	s.nextID++
	sub := &Subscription{
		s:      s,
		id:     s.nextID,
		client: client,
		queue:  deque{ready: make(chan struct{}, 1)},
		wake:   make(chan struct{}, 1),
		done:   make(chan struct{}),
		drain:  make(chan struct{}),
		room:   make(chan struct{}, 1),
	}
	if err := s.setLocked(sub, p, f, true); err != nil {
		return nil, err
	}
	s.byID[sub.id] = sub
	return sub, nil
}

func (s *subscriptions) setLocked(sub *Subscription, p content.Predicate, f qos.Flow, isNew bool) error {
	if err := checkFlow(f); err != nil {
		return err
	}
	var err error
	if isNew {
		err = s.index.Add(sub.id, p)
	} else {
		err = s.index.Replace(sub.id, p)
	}
	if err != nil {
		return &InvalidError{err}
	}
	s.filters += len(p) - len(sub.pred)
	sub.pred = p
	sub.flow = f
	sub.deadline.Store(int64(f.Deadline))
	sub.encoded = s.cfg.enc.EncodePredicate(p)
	s.m.subscriptions.Set(float64(s.index.Len()))
	s.m.filters.Set(float64(s.filters))
	s.changed()
	return nil
}

func (s *subscriptions) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.byID)
}

// describe lists up to max subscriptions as "client: predicate", each
// predicate cut to 80 bytes, for a log line.
func (s *subscriptions) describe(max int) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, sub := range s.byID {
		if len(out) == max {
			break
		}
		p := sub.pred.String()
		if len(p) > 80 {
			p = p[:77] + "..."
		}
		out = append(out, sub.client+": "+p)
	}
	slices.Sort(out)
	return out
}

// drain tells every subscriber, now and later, that the broker drains.
func (s *subscriptions) drain(notice DrainNotice) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.draining = &notice
	for _, sub := range s.byID {
		sub.notice.Store(s.draining)
		close(sub.drain)
	}
}

// closeAll ends every subscription (shutdown).
func (s *subscriptions) closeAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	s.closed = true
	for _, sub := range s.byID {
		close(sub.done)
	}
}

// MaxDeadline bounds a subscription's deadline: beyond an hour a deadline
// says nothing a WAN path could break, and the bound keeps budget
// arithmetic far from overflow.
const MaxDeadline = time.Hour

// checkFlow refuses a deadline no broker could keep or compute with.
func checkFlow(f qos.Flow) error {
	if f.Deadline < 0 || f.Deadline > MaxDeadline {
		return invalid("deadline_ns = %d (%v): want 0 (none) or a duration up to %v", int64(f.Deadline), f.Deadline, MaxDeadline)
	}
	return nil
}

// advertisement returns the Bloom filters of every local filter and the
// QoS classes of the subscriptions with a deadline or two paths.
func (s *subscriptions) advertisement() ([]encoding.Bloom, []linkstate.QoSClass) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ids := make([]match.SubscriberID, 0, len(s.byID))
	for id := range s.byID {
		ids = append(ids, id)
	}
	// In subscription order, so that equal subscriptions give equal
	// advertisements (and the simulator replays byte for byte).
	slices.Sort(ids)
	all := make([]encoding.Bloom, 0, s.filters)
	var reqs []qos.Request
	for _, id := range ids {
		sub := s.byID[id]
		all = append(all, sub.encoded...)
		if sub.flow != (qos.Flow{}) {
			reqs = append(reqs, qos.Request{Flow: sub.flow, Filters: sub.encoded})
		}
	}
	return all, qos.Classes(reqs)
}

// matching appends to targets every local subscriber m matches, exactly.
// ids is scratch space; both are returned for reuse.
func (s *subscriptions) matching(m content.Message, ids []match.SubscriberID, targets []*Subscription) ([]match.SubscriberID, []*Subscription) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ids = s.index.Match(m, ids[:0])
	for _, id := range ids {
		targets = append(targets, s.byID[id])
	}
	return ids, targets
}

// shed makes room in the budget for a delivery to sub whose bytes are
// already added: it drops the oldest deliveries of the subscriber holding
// the most bytes (sub itself, if it does), then of the next, until the
// budget holds again; false when it cannot, every subscriber queue being
// empty (the link queues hold the budget), and the new delivery is then
// the one dropped. It sheds down to a low-water mark a sixteenth under
// the limit, so that a subscriber that keeps falling behind costs a scan
// of the subscriptions per sixteenth of the budget, not per message.
// Shedding never touches the link queues (see budget).
func (s *subscriptions) shed(sub *Subscription) bool {
	b := s.cfg.budget
	low := b.limit - b.limit/16
	s.mu.Lock()
	defer s.mu.Unlock()
	for range len(s.byID) + 1 {
		if b.over(b.Used()) <= 0 {
			return true
		}
		var victim *Subscription
		var most int64
		for _, c := range s.byID {
			if n := c.bytes.Load(); n > most {
				victim, most = c, n
			}
		}
		if victim == nil {
			return false
		}
		var shed uint64
		for b.Used() > low {
			q, ok := victim.queue.take()
			if !ok {
				break
			}
			victim.Dequeued(q)
			shed++
		}
		if shed > 0 {
			s.m.budgetShed.Add(float64(shed))
			victim.lose(shed)
		}
	}
	return b.over(b.Used()) <= 0
}
