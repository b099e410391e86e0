package node

import (
	"hash/maphash"
	"sync/atomic"

	"github.com/dripmesh/drip/internal/dedup"
)

// A broker's bundles can come back to it: a neighbour whose routes
// disagree sends a bundle back to where it came from once it has waited
// for them (bounce.go), and the bundle's ingress broker may be where it
// came from. Such a bundle fails the reverse-path check (admitSource), yet
// must pass; and a neighbour must not be able to have this broker send
// anything on in another's name, its own included. So a broker remembers
// what it sent to other brokers — a hash of each message, by its stamp —
// and takes a bundle back only with a message it sent under that stamp.

// sentSlots is how many of its latest messages sent on a broker
// recognises when they come back, about: a bundle comes back within a
// bounce hold, and a later message may take its slot sooner than
// sentSlots messages later. One that is not recognised is dropped, as the
// duplicate filter drops stamps beyond its window.
const sentSlots = 1 << 16

// sentMessages remembers the messages a broker sent to other brokers:
// per slot of a stamp, the hash of its message mixed with the stamp.
// Forwarders record concurrently; a slot being overwritten reads as
// unknown, which drops the bundle, the safe side. The broker's own
// messages have slots of their own, in the order of their sequence
// numbers: consecutive messages share cache lines, where a slot at random
// in half a megabyte missed the cache on every message published.
type sentMessages struct {
	seed  maphash.Seed
	self  uint32
	own   []atomic.Uint64 // the messages published here, by Seq
	slots []atomic.Uint64 // the others', by stampKey
}

func newSentMessages(self uint32) *sentMessages {
	return &sentMessages{seed: maphash.MakeSeed(), self: self,
		own: make([]atomic.Uint64, sentSlots), slots: make([]atomic.Uint64, sentSlots)}
}

// slot is where stamp s, whose key is k, is remembered.
func (m *sentMessages) slot(s dedup.Stamp, k uint64) *atomic.Uint64 {
	if s.Origin == m.self {
		return &m.own[s.Seq%sentSlots]
	}
	return &m.slots[k%sentSlots]
}

// stampKey mixes a stamp into a slot index and a value.
func stampKey(s dedup.Stamp) uint64 {
	return mixStamp(uint64(s.Origin)<<32 ^ s.Seq ^ s.Epoch*0xbf58476d1ce4e5b9)
}

func mixStamp(z uint64) uint64 {
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// record notes that message msg, stamped s, was sent to other brokers.
func (m *sentMessages) record(s dedup.Stamp, msg []byte) {
	k := stampKey(s)
	m.slot(s, k).Store(maphash.Bytes(m.seed, msg) ^ k)
}

// sent says whether msg, stamped s, is a message recently sent on.
func (m *sentMessages) sent(s dedup.Stamp, msg []byte) bool {
	k := stampKey(s)
	return m.slot(s, k).Load() == maphash.Bytes(m.seed, msg)^k
}
