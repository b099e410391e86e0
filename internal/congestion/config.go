package congestion

import (
	"fmt"
	"math"
	"time"
)

// Config is the protocol's parameters. The zero value is not usable; start
// from DefaultConfig.
type Config struct {
	// RecordSize is k, the messages a publication record summarizes
	// (Malekpour11 §III-B-3). Fig. 5's study found k = 5 close to an ideal
	// receiver and k = 2 too blind; each entry costs the Bloom filter of a
	// message in every header.
	RecordSize int
	// Alpha bounds a limiting subscriber's increase per round to Alpha
	// times the reception rate (Algorithm 1, line 28); Malekpour11 found
	// 0.5 to 1 stable.
	Alpha float64
	// MinRate is the least quota: a subscriber may slow a flow to it, not
	// below, and a filter the publisher has throttled to nothing can still
	// grow from it.
	MinRate float64
	// MinInterval is the shortest round of Algorithm 1 (a round is one RTT
	// otherwise): rates measured over less than this are mostly noise.
	MinInterval time.Duration
	// InitialRTT is the round-trip time assumed until the first echo
	// returns: TFMCC's conservative 500 ms (RFC 4654 §3.2.1).
	InitialRTT time.Duration
	// EchoInterval is how often a subscriber without a round-trip time asks
	// again, and EchoTimeout how long a publisher keeps answering one.
	EchoInterval, EchoTimeout time.Duration
	// FlowTimeout is how long a request lives without feedback from its
	// subscriber (Malekpour11 §III-B-6, stale entries).
	FlowTimeout time.Duration
	// SessionTimeout is how long a subscriber keeps a session with a
	// publisher it hears nothing from.
	SessionTimeout time.Duration
	// BucketDepth is how much of its quota a flow may send at once: a token
	// bucket holds max(1, quota·BucketDepth) tokens.
	BucketDepth time.Duration
	// ShareWindow is how many of a publisher's messages that a flow's
	// Bloom filter matches, seen in publication records, a subscriber
	// averages the flow's share over (the fraction its filter takes; see
	// Subscriber.Receive); MaxQuotaScale bounds the factor 1/share by
	// which it scales the quota it sends, so that a flow whose filter
	// takes almost none of it is not released without bound by an
	// estimate of few samples.
	ShareWindow   int
	MaxQuotaScale float64
	// MaxRequests, MaxEchoes, MaxQueue, MaxTags and MaxSessions bound the
	// publisher's requests, pending echoes, held messages and tags per
	// header, and a subscriber's sessions.
	MaxRequests, MaxEchoes, MaxQueue, MaxTags, MaxSessions int
	// ListenInterval is how long a subscriber waits before it gives a
	// publisher its predicate again (Feedback.Listen) while the publisher's
	// messages come without its stamp; a publisher forgets a listener it
	// has heard nothing from (feedback, echo or predicate) for
	// SessionTimeout.
	ListenInterval time.Duration
	// MaxListeners and MaxListenConstraints bound the publisher's
	// listeners and the constraints of their predicates together: it
	// evaluates them on every message it stamps. MaxStamps bounds the
	// stamps on one message; listeners past it are not stamped for that
	// message, and their counts skip it.
	MaxListeners, MaxListenConstraints, MaxStamps int
}

// DefaultConfig is the paper's k = 5 and α = 0.5 with TFMCC's timers.
func DefaultConfig() Config {
	return Config{
		RecordSize:     5,
		Alpha:          0.5,
		MinRate:        1,
		MinInterval:    100 * time.Millisecond,
		InitialRTT:     500 * time.Millisecond,
		EchoInterval:   time.Second,
		EchoTimeout:    2 * time.Second,
		FlowTimeout:    3 * time.Second,
		SessionTimeout: 30 * time.Second,
		BucketDepth:    50 * time.Millisecond,
		ShareWindow:    1024,
		MaxQuotaScale:  100,
		MaxRequests:    1024,
		MaxEchoes:      64,
		MaxQueue:       256,
		MaxTags:        4,
		MaxSessions:    1024,
		ListenInterval: 10 * time.Second,
		// 256 subscribers of 64 three-constraint filters: the 8-broker
		// overload's 80 subscribers of 20 filters fit (docs/results/congestion.md).
		MaxListeners:         256,
		MaxListenConstraints: 1 << 16,
		MaxStamps:            16,
	}
}

// Validate says which parameter is out of range.
func (c Config) Validate() error {
	positive := []struct {
		name string
		v    time.Duration
	}{
		{"MinInterval", c.MinInterval}, {"InitialRTT", c.InitialRTT},
		{"EchoInterval", c.EchoInterval}, {"EchoTimeout", c.EchoTimeout},
		{"FlowTimeout", c.FlowTimeout}, {"SessionTimeout", c.SessionTimeout},
		{"BucketDepth", c.BucketDepth}, {"ListenInterval", c.ListenInterval},
	}
	for _, p := range positive {
		if p.v <= 0 {
			return fmt.Errorf("congestion: %s %v is not positive", p.name, p.v)
		}
	}
	counts := []struct {
		name string
		v    int
	}{
		{"RecordSize", c.RecordSize}, {"ShareWindow", c.ShareWindow}, {"MaxRequests", c.MaxRequests}, {"MaxEchoes", c.MaxEchoes},
		{"MaxQueue", c.MaxQueue}, {"MaxTags", c.MaxTags}, {"MaxSessions", c.MaxSessions},
		{"MaxListeners", c.MaxListeners}, {"MaxListenConstraints", c.MaxListenConstraints}, {"MaxStamps", c.MaxStamps},
	}
	for _, p := range counts {
		if p.v <= 0 {
			return fmt.Errorf("congestion: %s %d is not positive", p.name, p.v)
		}
	}
	if c.RecordSize > MaxRecordSize {
		return fmt.Errorf("congestion: RecordSize %d is above %d", c.RecordSize, MaxRecordSize)
	}
	if !(c.Alpha > 0 && c.Alpha <= 4) {
		return fmt.Errorf("congestion: Alpha %v is outside (0, 4]", c.Alpha)
	}
	if !(c.MinRate > 0) || math.IsInf(c.MinRate, 0) {
		return fmt.Errorf("congestion: MinRate %v is not a positive rate", c.MinRate)
	}
	if !(c.MaxQuotaScale >= 1) || math.IsInf(c.MaxQuotaScale, 0) {
		return fmt.Errorf("congestion: MaxQuotaScale %v is not a factor of at least 1", c.MaxQuotaScale)
	}
	return nil
}

// MaxRecordSize bounds k: a record is k Bloom filters in every header.
const MaxRecordSize = 256
