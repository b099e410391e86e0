package linkstate

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/dripmesh/drip/internal/encoding"
)

// entry is one LSDB entry: the newest copy of a router's LSA or predicate
// advertisement this node has seen.
type entry struct {
	key Key
	seq uint64
	sum uint64
	// bornAt is when the origin created this copy, on the local clock: the
	// arrival time minus the age the copy carried.
	bornAt time.Duration
	lsa    *LSA    // KindRouter
	pred   *PredAd // KindPredicate
}

func newLSAEntry(a *LSA, now time.Duration) *entry {
	return &entry{key: Key{KindRouter, a.Origin}, seq: a.Seq, sum: a.Checksum(), bornAt: now - max(a.Age, 0), lsa: a}
}

func newPredEntry(p *PredAd, now time.Duration) *entry {
	return newPredEntrySum(p, p.Checksum(), now)
}

// newPredEntrySum is newPredEntry given p's checksum.
func newPredEntrySum(p *PredAd, sum uint64, now time.Duration) *entry {
	return &entry{key: Key{KindPredicate, p.Origin}, seq: p.Seq, sum: sum, bornAt: now - max(p.Age, 0), pred: p}
}

func (e *entry) summary() Summary {
	return Summary{Kind: e.key.Kind, Origin: e.key.Origin, Seq: e.seq, Sum: e.sum}
}

// newer reports whether copy (seq a, sum as) supersedes (seq b, sum bs):
// a higher sequence number, or on equal ones a larger checksum, so that
// every router settles on the same copy of a sequence number two
// incarnations of the origin used.
func newer(a, as, b, bs uint64) bool { return a > b || a == b && as > bs }

// message returns the entry as a message with its current age.
func (e *entry) message(now time.Duration) Message {
	if e.lsa != nil {
		c := *e.lsa
		c.Age = now - e.bornAt
		return &c
	}
	c := *e.pred
	c.Age, c.Sum = now-e.bornAt, e.sum
	return &c
}

func validateLSA(a *LSA) error {
	if a.Seq == 0 {
		return fmt.Errorf("LSA of router %d has sequence number 0", a.Origin)
	}
	if a.Withdrawn && len(a.Links) > 0 {
		return fmt.Errorf("withdrawn LSA of router %d lists %d links", a.Origin, len(a.Links))
	}
	for i, l := range a.Links {
		switch {
		case l.Neighbor == a.Origin:
			return fmt.Errorf("LSA of router %d lists a link to itself", a.Origin)
		case l.Cost == 0:
			return fmt.Errorf("LSA of router %d gives link %d cost 0", a.Origin, l.Neighbor)
		case i > 0 && l.Neighbor <= a.Links[i-1].Neighbor:
			return fmt.Errorf("LSA of router %d lists links out of order at %d (neighbour %d after %d)",
				a.Origin, i, l.Neighbor, a.Links[i-1].Neighbor)
		}
	}
	return nil
}

func validatePredAd(p *PredAd) error {
	if p.Seq == 0 {
		return fmt.Errorf("predicate advertisement of router %d has sequence number 0", p.Origin)
	}
	if err := p.Params.Validate(); err != nil {
		return fmt.Errorf("predicate advertisement of router %d: %w", p.Origin, err)
	}
	if p.Withdrawn && len(p.Filters) > 0 {
		return fmt.Errorf("withdrawn predicate advertisement of router %d has %d filters", p.Origin, len(p.Filters))
	}
	return validateClasses(p)
}

// filters counts an entry's filters, its QoS classes' included.
func (e *entry) filters() int {
	if e == nil || e.pred == nil {
		return 0
	}
	k := len(e.pred.Filters)
	for _, c := range e.pred.Classes {
		k += len(c.Filters)
	}
	return k
}

// admitFilters refuses a predicate advertisement over Config.MaxFilters, or
// one that would take the database past Config.MaxDatabaseFilters.
func (n *Node) admitFilters(in *entry) error {
	k := in.filters()
	if m := n.cfg.MaxFilters; m > 0 && k > m {
		return &LimitError{Origin: in.key.Origin, Seq: in.seq, Err: fmt.Errorf("%d filters, over the limit of %d per advertisement", k, m)}
	}
	if m := n.cfg.MaxDatabaseFilters; m > 0 && n.dbFilters-n.lsdb[in.key].filters()+k > m {
		return &LimitError{Origin: in.key.Origin, Seq: in.seq, Err: fmt.Errorf("%d filters, which would take the database's %d past its limit of %d",
			k, n.dbFilters, m)}
	}
	return nil
}

// LimitError is a predicate advertisement refused for its size (Config.
// MaxFilters, MaxDatabaseFilters): neither installed nor flooded. Step
// returns it wrapped; errors.As finds it.
type LimitError struct {
	Origin uint32
	Seq    uint64
	Err    error
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("predicate advertisement of router %d seq %d refused: %v", e.Origin, e.Seq, e.Err)
}

func (e *LimitError) Unwrap() error { return e.Err }

// DatabaseFilters counts the filters of every predicate advertisement in
// the database, the router's own included.
func (n *Node) DatabaseFilters() int { return n.dbFilters }

// install stores e, replacing any older copy, and marks what it changes.
func (n *Node) install(e *entry) {
	old := n.lsdb[e.key]
	n.dbFilters += e.filters() - old.filters()
	if old != nil {
		n.digest -= summaryHash(old.summary())
	}
	n.lsdb[e.key] = e
	n.digest += summaryHash(e.summary())
	// A refresh (same contents, new seq) changes neither routes nor rows.
	if old == nil || old.sum != e.sum {
		n.markChanged(e.key)
	}
	if e.key.Origin != n.cfg.ID {
		if exp := e.bornAt + n.cfg.MaxAge; n.nextExpiry == 0 || exp < n.nextExpiry {
			n.nextExpiry = exp
		}
	}
}

func (n *Node) remove(e *entry) {
	n.dbFilters -= e.filters()
	n.digest -= summaryHash(e.summary())
	delete(n.lsdb, e.key)
	n.markChanged(e.key)
}

func (n *Node) markChanged(k Key) {
	if k.Kind == KindRouter {
		n.topoDirty = true
	} else {
		n.predDirty[k.Origin] = true
	}
}

// expire drops other routers' entries older than MaxAge: their origin
// stopped refreshing them, so it is dead or beyond a partition.
func (n *Node) expire() {
	n.nextExpiry = 0
	var gone []*entry
	for _, e := range n.lsdb {
		if e.key.Origin == n.cfg.ID {
			continue
		}
		exp := e.bornAt + n.cfg.MaxAge
		if n.now >= exp {
			gone = append(gone, e)
		} else if n.nextExpiry == 0 || exp < n.nextExpiry {
			n.nextExpiry = exp
		}
	}
	slices.SortFunc(gone, func(a, b *entry) int { return cmpKey(a.key, b.key) })
	for _, e := range gone {
		n.remove(e)
		n.events = append(n.events, Event{Type: EventExpired, Peer: e.key.Origin, Kind: e.key.Kind, Seq: e.seq})
	}
}

func cmpKey(a, b Key) int {
	if a.Kind != b.Kind {
		return int(a.Kind) - int(b.Kind)
	}
	return cmp.Compare(a.Origin, b.Origin)
}

func (n *Node) sortedEntries() []*entry {
	out := make([]*entry, 0, len(n.lsdb))
	for _, e := range n.lsdb {
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b *entry) int { return cmpKey(a.key, b.key) })
	return out
}

// receive applies the flooding rules to a copy of an entry from nb: a newer
// copy is installed and flooded to every other adjacent neighbour; an older
// one is answered with ours, so the sender catches up; our own entry in a
// newer copy means an earlier incarnation of this router is still
// remembered, and we originate past it (OSPF's sequence number jump).
func (n *Node) receive(nb *neighbor, in *entry) error {
	cur := n.lsdb[in.key]
	// Only a copy that would change something is checked (Config.Auth):
	// the duplicates flooding brings and older copies cost nothing.
	if n.now-in.bornAt >= n.cfg.MaxAge {
		// A copy about to expire everywhere: installing it would revive
		// it. One with MaxSeq is its origin flushing that number
		// (flushOwn): it removes a copy held with it, and passes on.
		if in.seq == MaxSeq && cur != nil && cur.seq == MaxSeq && in.key.Origin != n.cfg.ID {
			if err := n.check(in); err != nil {
				return err
			}
			n.remove(cur)
			n.flood(in, nb.id)
		}
		return nil
	}
	if in.key.Origin == n.cfg.ID {
		switch {
		case in.seq > cur.seq || in.seq == cur.seq && in.sum != cur.sum:
			if err := n.check(in); err != nil {
				return err
			}
			n.jump(in.key.Kind, in.seq)
		case in.seq < cur.seq:
			n.sendEntry(nb.id, cur)
		}
		return nil
	}
	switch {
	case cur == nil || newer(in.seq, in.sum, cur.seq, cur.sum):
		if err := n.admitFilters(in); err != nil {
			return err
		}
		if err := n.check(in); err != nil {
			return err
		}
		n.install(in)
		n.flood(in, nb.id)
	case newer(cur.seq, cur.sum, in.seq, in.sum):
		n.sendEntry(nb.id, cur)
	}
	return nil
}

// MaxSeq is the largest sequence number. A router originating a thousand
// entries a second would reach it in half a billion years, so a copy that
// carries it, or comes close, was forged or corrupted: the origin then
// flushes that number from the mesh and starts again at 1 (flushOwn) rather
// than wrap around, which made every later copy look older and set off a
// storm of jumps that outlived the forger.
const MaxSeq uint64 = math.MaxUint64

// nextSeq is the sequence number of a new own entry, past minSeq, the
// current copy's cur and the start of this incarnation's numbers
// (Config.Incarnation); ok is false when none is left below MaxSeq.
func (n *Node) nextSeq(minSeq, cur uint64) (seq uint64, ok bool) {
	if last := max(minSeq, cur, n.seqBase()); last < MaxSeq {
		return last + 1, true
	}
	return 0, false
}

// seqBase is the number before this incarnation's first sequence number.
func (n *Node) seqBase() uint64 { return n.cfg.Incarnation << IncarnationShift }

// flushOwn removes the own entry of key, which has reached MaxSeq, from
// every router: it floods a copy with MaxSeq aged MaxAge, which removes
// the copies held with that number (receive), and forgets its own, so that
// the next origination starts again at its incarnation's first number
// (1 without one) — OSPF's premature
// aging at MaxSequenceNumber (RFC 2328 §12.1.6, §14.1). A router that held
// an older copy sends it back, and the origin jumps past it as usual.
func (n *Node) flushOwn(key Key) {
	var e *entry
	if key.Kind == KindRouter {
		e = newLSAEntry(&LSA{Origin: n.cfg.ID, Seq: MaxSeq, Age: n.cfg.MaxAge}, n.now)
	} else {
		e = newPredEntry(&PredAd{Origin: n.cfg.ID, Seq: MaxSeq, Age: n.cfg.MaxAge, Params: n.cfg.Encoding}, n.now)
	}
	n.seal(e) // routers refuse an unsigned flush as any other forgery
	n.flood(e, n.cfg.ID)
	if cur := n.lsdb[key]; cur != nil {
		n.remove(cur)
	}
	n.events = append(n.events, Event{Type: EventSeqFlush, Peer: n.cfg.ID, Kind: key.Kind, Seq: MaxSeq})
}

// jump re-originates an own entry with a sequence number past seq.
func (n *Node) jump(kind Kind, seq uint64) {
	next, ok := n.nextSeq(seq, 0)
	if !ok {
		next = n.seqBase() + 1 // after a flush (flushOwn)
	}
	n.events = append(n.events, Event{Type: EventSeqJump, Peer: n.cfg.ID, Kind: kind, Seq: next})
	if kind == KindRouter {
		n.lsaForce = true
		n.lsaMinSeq = max(n.lsaMinSeq, seq)
		return
	}
	own := n.lsdb[Key{KindPredicate, n.cfg.ID}]
	n.originatePred(own.pred.Filters, own.pred.Classes, seq)
}

func (n *Node) sendEntry(to uint32, e *entry) {
	n.send(to, e.message(n.now))
}

func (n *Node) send(to uint32, m Message) {
	n.msgs = append(n.msgs, Envelope{To: to, Msg: m})
}

// flood sends e to every adjacent neighbour but except.
func (n *Node) flood(e *entry, except uint32) {
	var m Message
	for _, id := range n.nbrIDs {
		if id == except || n.nbrs[id].state != StateFull {
			continue
		}
		if m == nil {
			m = e.message(n.now)
		}
		n.send(id, m)
	}
}

// flush advances database exchanges and originates the own LSA if
// adjacencies or costs changed during the input, so that one input yields
// at most one new LSA.
func (n *Node) flush() {
	n.advance()
	if n.lsaDirty || n.lsaForce {
		n.originateLSA()
	}
}

// originateLSA creates, installs and floods a new own LSA unless nothing
// changed and nothing forces one.
func (n *Node) originateLSA() {
	a := &LSA{Origin: n.cfg.ID, Withdrawn: n.stopped}
	if !n.stopped {
		for _, id := range n.nbrIDs {
			if nb := n.nbrs[id]; nb.state == StateFull && nb.advertised && !nb.suspect {
				a.Links = append(a.Links, Link{Neighbor: id, Cost: nb.cost})
			}
		}
	}
	cur := n.lsdb[Key{KindRouter, n.cfg.ID}]
	if cur != nil && !n.lsaForce && cur.sum == a.Checksum() {
		n.lsaDirty = false
		return
	}
	var curSeq uint64
	if cur != nil {
		curSeq = cur.seq
	}
	seq, ok := n.nextSeq(n.lsaMinSeq, curSeq)
	if !ok {
		n.flushOwn(Key{KindRouter, n.cfg.ID})
		n.lsaMinSeq, seq = 0, n.seqBase()+1
	}
	a.Seq = seq
	n.lsaDirty, n.lsaForce = false, false
	e := newLSAEntry(a, n.now)
	n.seal(e)
	n.install(e)
	n.flood(e, n.cfg.ID)
}

// originatePred creates, installs and floods a new own predicate
// advertisement with a sequence number past minSeq and the current one.
func (n *Node) originatePred(filters []encoding.Bloom, classes []QoSClass, minSeq uint64) {
	p := &PredAd{Origin: n.cfg.ID, Withdrawn: n.stopped, Params: n.cfg.Encoding}
	if !n.stopped {
		p.Filters, p.Classes = filters, classes
	}
	key := Key{KindPredicate, n.cfg.ID}
	var curSeq uint64
	if cur := n.lsdb[key]; cur != nil {
		curSeq = cur.seq
	}
	seq, ok := n.nextSeq(minSeq, curSeq)
	if !ok {
		n.flushOwn(key)
		seq = n.seqBase() + 1
	}
	p.Seq = seq
	e := newPredEntry(p, n.now)
	n.seal(e)
	n.install(e)
	n.flood(e, n.cfg.ID)
}

// stepSummary compares a neighbour's database with ours. We request what
// we lack or hold older, send what we hold newer or the neighbour lacks,
// and jump our own sequence numbers if it remembers an earlier incarnation
// of us. One summary thus brings both sides up to date (anti-entropy,
// which the lower-ID side starts). The first summary of an adjacency is
// one of two, each side sending its own: then we only request, and send
// only our own entries the neighbour holds older, because the neighbour
// requests the rest from our summary; what we request is pending until it
// arrives (advance).
func (n *Node) stepSummary(nb *neighbor, m *DBSummary) {
	exchange := nb.state == StateFull && !nb.advertised && !nb.gotSummary
	var want []Key
	var wantSeq []uint64
	listed := make(map[Key]bool, len(m.Entries))
	for _, s := range m.Entries {
		k := Key{s.Kind, s.Origin}
		if k.Kind != KindRouter && k.Kind != KindPredicate {
			continue
		}
		listed[k] = true
		cur := n.lsdb[k]
		switch {
		case s.Origin == n.cfg.ID:
			switch {
			case s.Seq < cur.seq:
				n.sendEntry(nb.id, cur)
			case s.Seq == cur.seq && s.Sum == cur.sum:
			case n.cfg.Auth != nil:
				// A summary is not signed: jump only past a copy that
				// proves an earlier incarnation signed it (receive), or
				// a neighbour could make us flush at will.
				want, wantSeq = append(want, k), append(wantSeq, s.Seq)
			default:
				n.jump(k.Kind, s.Seq)
			}
		case cur == nil || newer(s.Seq, s.Sum, cur.seq, cur.sum):
			want, wantSeq = append(want, k), append(wantSeq, s.Seq)
		case !exchange && newer(cur.seq, cur.sum, s.Seq, s.Sum):
			n.sendEntry(nb.id, cur)
		}
	}
	if exchange {
		nb.gotSummary = true
		nb.pending = make(map[Key]uint64, len(want))
		for i, k := range want {
			nb.pending[k] = wantSeq[i]
		}
	} else {
		for _, e := range n.sortedEntries() {
			if !listed[e.key] {
				n.sendEntry(nb.id, e)
			}
		}
	}
	if len(want) > 0 {
		n.send(nb.id, &DBRequest{Keys: want})
	}
}

// stepRequest answers a request with the entries we hold.
func (n *Node) stepRequest(nb *neighbor, m *DBRequest) {
	for _, k := range m.Keys {
		if e := n.lsdb[k]; e != nil {
			n.sendEntry(nb.id, e)
		}
	}
}

// sendSummary starts a database exchange with nb.
func (n *Node) sendSummary(nb *neighbor) {
	entries := n.sortedEntries()
	s := &DBSummary{Entries: make([]Summary, len(entries))}
	for i, e := range entries {
		s.Entries[i] = e.summary()
	}
	n.send(nb.id, s)
}
