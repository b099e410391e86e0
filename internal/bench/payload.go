package bench

import (
	"encoding/binary"
	"time"
)

// The payload of a bench message identifies it and carries its send time:
//
//	magic "drbn" | run uint32 | publisher uint32 | seq uint64 | sent int64 ns
//
// big-endian. run distinguishes this run's messages from any other traffic
// in the mesh (an earlier run's stragglers, other publishers). sent is on
// the bench's monotonic clock, relative to the run's start.
const payloadSize = 28

var payloadMagic = [4]byte{'d', 'r', 'b', 'n'}

type stamp struct {
	run, pub uint32
	seq      uint64
	sent     time.Duration
}

func (s stamp) encode() []byte {
	b := make([]byte, payloadSize)
	copy(b, payloadMagic[:])
	binary.BigEndian.PutUint32(b[4:], s.run)
	binary.BigEndian.PutUint32(b[8:], s.pub)
	binary.BigEndian.PutUint64(b[12:], s.seq)
	binary.BigEndian.PutUint64(b[20:], uint64(s.sent))
	return b
}

// decodeStamp reads a payload written by encode; ok is false for anything
// else.
func decodeStamp(b []byte) (s stamp, ok bool) {
	if len(b) != payloadSize || [4]byte(b[:4]) != payloadMagic {
		return stamp{}, false
	}
	return stamp{
		run:  binary.BigEndian.Uint32(b[4:]),
		pub:  binary.BigEndian.Uint32(b[8:]),
		seq:  binary.BigEndian.Uint64(b[12:]),
		sent: time.Duration(binary.BigEndian.Uint64(b[20:])),
	}, true
}
