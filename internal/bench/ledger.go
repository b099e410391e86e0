package bench

import (
	"slices"
	"sync"
	"time"
)

// verdict classifies one delivery.
type verdict uint8

const (
	expected      verdict = iota // first copy to a subscriber the oracle named
	duplicate                    // a later copy of an expected delivery
	falsePositive                // to a subscriber the oracle did not name
	unknown                      // no such message was sent in this run
)

// ledger records what each sent message must reach and what it reached.
// Messages are kept per publisher, in sequence order, so that recording a
// send needs no search and publishers do not contend with each other.
type ledger struct {
	shards []shard
}

type shard struct {
	mu   sync.Mutex
	msgs []record
}

type record struct {
	expected []int32 // subscriber indexes, increasing
	got      []uint8 // copies received per expected subscriber, saturating at 255
	sentMs   int32   // when it was sent, milliseconds since sending started
}

func newLedger(publishers int) *ledger {
	return &ledger{shards: make([]shard, publishers)}
}

// add records message seq of publisher pub, sent that long after sending
// started; seq must be the publisher's next sequence number, which is how
// a publisher numbers its messages.
func (l *ledger) add(pub int, seq uint64, sent time.Duration, expected []int32) {
	s := &l.shards[pub]
	s.mu.Lock()
	defer s.mu.Unlock()
	if uint64(len(s.msgs)) != seq {
		panic("bench: ledger: messages recorded out of sequence")
	}
	s.msgs = append(s.msgs, record{expected: expected, got: make([]uint8, len(expected)), sentMs: int32(sent.Milliseconds())})
}

// deliver classifies the delivery of message (pub, seq) to subscriber sub.
func (l *ledger) deliver(pub uint32, seq uint64, sub int32) verdict {
	if int(pub) >= len(l.shards) {
		return unknown
	}
	s := &l.shards[pub]
	s.mu.Lock()
	defer s.mu.Unlock()
	if seq >= uint64(len(s.msgs)) {
		return unknown
	}
	r := &s.msgs[seq]
	k, found := slices.BinarySearch(r.expected, sub)
	switch {
	case !found:
		return falsePositive
	case r.got[k] > 0:
		if r.got[k] < 255 {
			r.got[k]++
		}
		return duplicate
	default:
		r.got[k] = 1
		return expected
	}
}

// undelivered counts the expected deliveries that never arrived, per
// subscriber and per second of sending (the last of the seconds also
// counts what was sent after it, as the run's series does).
func (l *ledger) undelivered(subscribers, seconds int) (bySub, bySecond []uint64) {
	bySub, bySecond = make([]uint64, subscribers), make([]uint64, seconds)
	for i := range l.shards {
		s := &l.shards[i]
		s.mu.Lock()
		for _, r := range s.msgs {
			for k, j := range r.expected {
				if r.got[k] == 0 {
					bySub[j]++
					bySecond[min(max(int(r.sentMs/1000), 0), seconds-1)]++
				}
			}
		}
		s.mu.Unlock()
	}
	return bySub, bySecond
}

// misses lists up to limit expected deliveries that never arrived, in
// publisher and sequence order.
func (l *ledger) misses(limit int) []Miss {
	var out []Miss
	for i := range l.shards {
		s := &l.shards[i]
		s.mu.Lock()
		for seq, r := range s.msgs {
			for k, j := range r.expected {
				if r.got[k] == 0 && len(out) < limit {
					out = append(out, Miss{Subscriber: int(j), Publisher: i, Seq: uint64(seq), SentS: float64(r.sentMs) / 1000})
				}
			}
		}
		s.mu.Unlock()
	}
	return out
}
