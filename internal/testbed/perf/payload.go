package perf

import (
	"encoding/binary"
	"math"
	"time"
)

// PayloadSize is the payload of every message the harness sends: 16
// bytes, the size issue 12 measures at.
//
//	run uint32 | seq uint32 | sent int64 ns
//
// big-endian. run names the run that sent it: a subscriber counts only
// its own run's messages, so that a backlog a system still works through
// from an earlier run (ActiveMQ's, with 10,000 selectors) is never counted
// as the next run's deliveries. sent is the harness's monotonic clock at
// the publish call, so the latency of a delivery is the receiver's reading
// of the same clock minus sent: no synchronised clocks, no broker
// timestamps.
const PayloadSize = 16

// probeSeq marks the probes a run sends before measuring, until every
// subscriber has received one (interest has reached every broker); they
// count as no delivery.
const probeSeq = math.MaxUint32

// Clock is a run's monotonic clock, with its origin at the start of the
// run, and the run's name for its payloads.
type Clock struct {
	origin time.Time
	run    uint32
}

// NewClock starts the clock of run.
func NewClock(run uint32) Clock { return Clock{origin: time.Now(), run: run} }

// Now is the time since the origin (monotonic).
func (c Clock) Now() time.Duration { return time.Since(c.origin) }

// payload returns a fresh payload of message seq of the run, sent now.
// Fresh: drip's publisher keeps a message until the broker acknowledges
// it.
func (c Clock) payload(seq uint64) []byte {
	b := make([]byte, PayloadSize)
	putStamp(b, c.run, uint32(seq), c.Now())
	return b
}

// putStamp writes run, seq and sent into b[:PayloadSize].
func putStamp(b []byte, run, seq uint32, sent time.Duration) {
	binary.BigEndian.PutUint32(b, run)
	binary.BigEndian.PutUint32(b[4:], seq)
	binary.BigEndian.PutUint64(b[8:], uint64(sent))
}

// readStamp reads a payload written by putStamp; ok is false for any
// other payload.
func readStamp(b []byte) (run, seq uint32, sent time.Duration, ok bool) {
	if len(b) != PayloadSize {
		return 0, 0, 0, false
	}
	return binary.BigEndian.Uint32(b), binary.BigEndian.Uint32(b[4:]), time.Duration(binary.BigEndian.Uint64(b[8:])), true
}
