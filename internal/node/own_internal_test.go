package node

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/dripmesh/drip/internal/dedup"
)

// TestSentMessagesRecognisesWhatWasSent: a bundle comes back only with a
// message sent under its stamp; another message under the stamp, or the
// message under another stamp, is not one this broker sent.
// Its own messages (origin 1 here) and those it passed on (origin 3) alike.
func TestSentMessagesRecognisesWhatWasSent(t *testing.T) {
	for _, origin := range []uint32{1, 3} {
		m := newSentMessages(1)
		s := dedup.Stamp{Origin: origin, Epoch: 7, Seq: 42}
		m.record(s, []byte("buy"))
		assert.True(t, m.sent(s, []byte("buy")), "origin %d", origin)
		for _, tc := range []struct {
			name string
			s    dedup.Stamp
			msg  string
		}{
			{"other contents", s, "sell"},
			{"other origin", dedup.Stamp{Origin: origin + 1, Epoch: 7, Seq: 42}, "buy"},
			{"other epoch", dedup.Stamp{Origin: origin, Epoch: 8, Seq: 42}, "buy"},
			{"other seq", dedup.Stamp{Origin: origin, Epoch: 7, Seq: 43}, "buy"},
			{"a whole table of seqs later", dedup.Stamp{Origin: origin, Epoch: 7, Seq: 42 + sentSlots}, "buy"},
		} {
			assert.False(t, m.sent(tc.s, []byte(tc.msg)), "origin %d: %s", origin, tc.name)
		}
	}
}

// TestSentMessagesKeepsTheLatestOwn: the broker's own latest sentSlots
// messages are all recognised, however many others it passes on meanwhile.
func TestSentMessagesKeepsTheLatestOwn(t *testing.T) {
	m := newSentMessages(1)
	msg := func(seq uint64) []byte { return []byte{byte(seq), byte(seq >> 8), byte(seq >> 16)} }
	for seq := range uint64(3 * sentSlots) {
		m.record(dedup.Stamp{Origin: 1, Epoch: 7, Seq: seq}, msg(seq))
		m.record(dedup.Stamp{Origin: 2, Epoch: 7, Seq: seq}, msg(seq))
	}
	for seq := uint64(2 * sentSlots); seq < 3*sentSlots; seq++ {
		if !m.sent(dedup.Stamp{Origin: 1, Epoch: 7, Seq: seq}, msg(seq)) {
			t.Fatalf("own message %d, among the latest %d, not recognised", seq, sentSlots)
		}
	}
}

// TestUnverifiedHoldIsBounded: the bundles waiting for the routes are
// bounded in count and bytes, so that a neighbour sending forgeries holds
// no more than that; they are taken when the routes change or their time
// is up.
func TestUnverifiedHoldIsBounded(t *testing.T) {
	var h unverifiedHold
	now := time.Unix(1e9, 0)
	for i := range maxUnverified {
		assert.True(t, h.add(unverifiedBundle{raw: make([]byte, 10), until: now.Add(time.Second)}), "bundle %d", i)
	}
	assert.False(t, h.add(unverifiedBundle{raw: make([]byte, 10), until: now.Add(time.Second)}), "the hold is full")
	assert.Empty(t, h.take(nil, now, false), "nothing due on the same routes before its time")
	assert.Len(t, h.take(nil, now.Add(time.Second), false), maxUnverified, "all due at their time")
	assert.False(t, h.add(unverifiedBundle{raw: make([]byte, maxUnverifiedBytes+1), until: now.Add(time.Second)}), "too many bytes")
}
