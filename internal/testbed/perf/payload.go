package perf

import (
	"encoding/binary"
	"math"
	"time"
)

// PayloadSize is the payload of every message the harness sends: 16
// bytes, the size issue 12 measures at.
//
//	seq uint64 | sent int64 ns
//
// big-endian. sent is the harness's monotonic clock (Clock) at the
// publish call, so the latency of a delivery is the receiver's reading of
// the same clock minus sent: no synchronised clocks, no broker
// timestamps.
const PayloadSize = 16

// probeSeq marks the probes a run sends before measuring, until every
// subscriber has received one (interest has reached every broker); they
// count as no delivery.
const probeSeq = math.MaxUint64

// Clock is a monotonic clock with its origin at the start of a run.
type Clock struct{ origin time.Time }

// NewClock starts a clock.
func NewClock() Clock { return Clock{origin: time.Now()} }

// Now is the time since the origin (monotonic).
func (c Clock) Now() time.Duration { return time.Since(c.origin) }

// putStamp writes seq and sent into b[:PayloadSize].
func putStamp(b []byte, seq uint64, sent time.Duration) {
	binary.BigEndian.PutUint64(b, seq)
	binary.BigEndian.PutUint64(b[8:], uint64(sent))
}

// newPayload returns a fresh payload stamped with seq and sent. Fresh:
// drip's publisher keeps a message until the broker acknowledges it.
func newPayload(seq uint64, sent time.Duration) []byte {
	b := make([]byte, PayloadSize)
	putStamp(b, seq, sent)
	return b
}

// readStamp reads a payload written by putStamp; ok is false for any
// other payload.
func readStamp(b []byte) (seq uint64, sent time.Duration, ok bool) {
	if len(b) != PayloadSize {
		return 0, 0, false
	}
	return binary.BigEndian.Uint64(b), time.Duration(binary.BigEndian.Uint64(b[8:])), true
}
