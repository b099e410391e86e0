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
func TestSentMessagesRecognisesWhatWasSent(t *testing.T) {
	m := newSentMessages()
	s := dedup.Stamp{Origin: 3, Epoch: 7, Seq: 42}
	m.record(s, []byte("buy"))
	assert.True(t, m.sent(s, []byte("buy")))
	for _, tc := range []struct {
		name string
		s    dedup.Stamp
		msg  string
	}{
		{"other contents", s, "sell"},
		{"other origin", dedup.Stamp{Origin: 4, Epoch: 7, Seq: 42}, "buy"},
		{"other epoch", dedup.Stamp{Origin: 3, Epoch: 8, Seq: 42}, "buy"},
		{"other seq", dedup.Stamp{Origin: 3, Epoch: 7, Seq: 43}, "buy"},
	} {
		assert.False(t, m.sent(tc.s, []byte(tc.msg)), tc.name)
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
