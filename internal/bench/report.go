package bench

import "time"

// Report is the outcome of a run, written as JSON by drip bench.
type Report struct {
	Config      ReportConfig      `json:"config"`
	Replication Replication       `json:"replication"`
	Series      []Second          `json:"series"`
	Totals      Totals            `json:"totals"`
	Latency     Latency           `json:"latency_ms"`
	Subscribers []SubscriberStats `json:"subscribers"`
	// GapEvents and FailoverEvents list the churn the totals count, each
	// with its time, for measurements that put them beside a fault (driplab
	// churn): the first MaxEvents of each.
	GapEvents      []GapEvent      `json:"gap_events,omitempty"`
	FailoverEvents []FailoverEvent `json:"failover_events,omitempty"`
	// Misses are the first MaxMisses undelivered deliveries, to put
	// beside the brokers' logs: which subscriber, whose message, when.
	Misses []Miss `json:"misses,omitempty"`
	// SendingStarted is the wall-clock time at which sending started
	// (RFC 3339, UTC), the origin of every *_s and at_s field: what puts
	// a miss beside the brokers' logs.
	SendingStarted string  `json:"sending_started,omitempty"`
	SendSeconds    float64 `json:"send_s"`  // how long sending took
	DrainSeconds   float64 `json:"drain_s"` // how long the wait for outstanding deliveries took, settling included
	// Error says why the run stopped early, if it did: the report then
	// holds what was measured until then.
	Error string `json:"error,omitempty"`
}

// Exact reports whether the mesh delivered nothing it should not have: no
// false positive and no duplicate. Undelivered messages are a capacity
// result, not an exactness one.
func (r *Report) Exact() bool { return r.Totals.FalsePositives == 0 && r.Totals.Duplicates == 0 }

// ReportConfig echoes the experiment's parameters.
type ReportConfig struct {
	Brokers      []string       `json:"brokers"`
	WorkloadName string         `json:"workload,omitempty"`
	Workload     WorkloadConfig `json:"workload_config"`
	Subscribers  int            `json:"subscribers"`
	Publishers   int            `json:"publishers"`
	Mode         Mode           `json:"mode"`
	Rate         float64        `json:"rate"`
	RateStart    float64        `json:"rate_start,omitempty"`
	Duration     float64        `json:"duration_s"`
	Warmup       float64        `json:"warmup_s"`
	Drain        float64        `json:"drain_s"`
	Settle       float64        `json:"settle_s"`
}

// WorkloadConfig mirrors workload.Config with JSON names.
type WorkloadConfig struct {
	Seed                int64   `json:"seed"`
	Names               int     `json:"names"`
	AttrsPerMessage     int     `json:"attrs_per_message"`
	StringFraction      float64 `json:"string_fraction"`
	Terms               int     `json:"terms"`
	IntMax              int64   `json:"int_max"`
	FiltersPerPredicate int     `json:"filters_per_predicate"`
	MinConstraints      int     `json:"min_constraints"`
	MaxConstraints      int     `json:"max_constraints"`
}

// Replication is the measured replication of the messages sent (Carzaniga09
// §5.1.4, Fig. 2): the mean number of subscribers and of distinct brokers
// each message had to reach.
type Replication struct {
	Client float64 `json:"client"`
	Broker float64 `json:"broker"`
}

// Second is one second of the run, counted from the start of sending.
// Sent and Ideal count messages sent in that second and the deliveries they
// call for; Delivered counts expected deliveries received in that second;
// Undelivered counts the deliveries called for by the messages sent in that
// second that never arrived (the "undelivered" curve of Carzaniga09 Figs. 4–5).
// Duplicates counts further copies of expected deliveries received in that
// second.
type Second struct {
	T           int    `json:"t"`
	Sent        uint64 `json:"sent"`
	Delivered   uint64 `json:"delivered"`
	Ideal       uint64 `json:"ideal"`
	Undelivered uint64 `json:"undelivered"`
	Duplicates  uint64 `json:"duplicates"`          // further copies received in that second
	Gaps        uint64 `json:"gaps,omitempty"`      // subscriptions installed again after their broker failed
	Failovers   uint64 `json:"failovers,omitempty"` // publishers that moved to another broker
}

// Totals are the run's counts.
type Totals struct {
	Sent            uint64 `json:"sent"`             // messages the bench published
	Accepted        uint64 `json:"accepted"`         // as the brokers' publish summaries say
	BrokerUnmatched uint64 `json:"broker_unmatched"` // accepted messages the brokers found no subscriber for
	Unmatched       uint64 `json:"unmatched"`        // sent messages the oracle found no subscriber for
	Ideal           uint64 `json:"ideal"`            // deliveries the oracle expects
	Delivered       uint64 `json:"delivered"`        // expected deliveries received (first copies)
	Undelivered     uint64 `json:"undelivered"`      // Ideal - Delivered
	FalsePositives  uint64 `json:"false_positives"`  // deliveries to subscribers the message does not match
	Duplicates      uint64 `json:"duplicates"`       // further copies of expected deliveries
	Lost            uint64 `json:"lost"`             // drops the brokers reported to slow subscribers
	Foreign         uint64 `json:"foreign"`          // deliveries of messages this run did not send
	// PublishersCut counts publishers still blocked Drain after sending
	// should have ended, with Config.CutStuckPublishers.
	PublishersCut uint64 `json:"publishers_cut,omitempty"`
	// Churn: subscriptions installed again after their broker failed, the
	// longest time one was without a broker, publishers that moved,
	// messages they resent to another broker (drained, nothing lost) and
	// messages in flight to brokers that failed (each may or may not have
	// been published). ClientSuppressed counts copies the clients dropped
	// by their stamps while subscriptions moved.
	Gaps             uint64  `json:"gaps,omitempty"`
	MaxGapMs         float64 `json:"max_gap_ms,omitempty"`
	Failovers        uint64  `json:"failovers,omitempty"`
	Resent           uint64  `json:"resent,omitempty"`
	InFlightLost     uint64  `json:"in_flight_lost,omitempty"`
	ClientSuppressed uint64  `json:"client_suppressed,omitempty"`
	// Congestion control (docs/design.md §12): messages the publishers
	// sent in flows a subscriber limited, those that waited for tokens and
	// how long in all, the feedback messages publishers took, and the loss
	// events subscriptions saw (with --congestion-feedback) and the
	// messages whose loss they measured by their stamps.
	CongestionControlled uint64  `json:"congestion_controlled,omitempty"`
	CongestionHeld       uint64  `json:"congestion_held,omitempty"`
	CongestionWaitedMs   float64 `json:"congestion_waited_ms,omitempty"`
	CongestionFeedback   uint64  `json:"congestion_feedback,omitempty"`
	CongestionLossEvents uint64  `json:"congestion_loss_events,omitempty"`
	CongestionStamped    uint64  `json:"congestion_stamped,omitempty"`
}

// MaxEvents bounds Report.GapEvents and Report.FailoverEvents, and
// MaxMisses Report.Misses: a run that keeps failing over (a mesh that is
// down) must not grow its report without end. Totals count every event.
const (
	MaxEvents = 4096
	MaxMisses = 1000
)

// GapEvent is one subscription's time without a broker: from when its
// stream ended to when another broker acknowledged it, in seconds since
// sending started (negative: before), and the brokers' names before and
// after (as the brokers call themselves).
type GapEvent struct {
	StartS float64 `json:"start_s"`
	EndS   float64 `json:"end_s"`
	From   string  `json:"from"`
	To     string  `json:"to"`
}

// FailoverEvent is one publisher moving to another broker, at AtS seconds
// since sending started, between addresses: Resent messages the old
// broker said it had not published, InFlight ones it may or may not have.
type FailoverEvent struct {
	AtS      float64 `json:"at_s"`
	From     string  `json:"from"`
	To       string  `json:"to"`
	Resent   int     `json:"resent,omitempty"`
	InFlight uint64  `json:"in_flight,omitempty"`
}

// Miss is one expected delivery that never arrived: message Seq of
// publisher Publisher, sent SentS seconds after sending started (to the
// millisecond), for subscriber Subscriber. The brokers are where each
// first connected; either may have failed over since.
type Miss struct {
	Subscriber       int     `json:"subscriber"`
	SubscriberBroker string  `json:"subscriber_broker"`
	Publisher        int     `json:"publisher"`
	PublisherBroker  string  `json:"publisher_broker"`
	Seq              uint64  `json:"seq"`
	SentS            float64 `json:"sent_s"`
}

// Latency summarises end-to-end latency of expected deliveries, in
// milliseconds, to within 0.8%.
type Latency struct {
	Count uint64  `json:"count"`
	P50   float64 `json:"p50"`
	P90   float64 `json:"p90"`
	P99   float64 `json:"p99"`
	Max   float64 `json:"max"`
}

// SubscriberStats are one subscriber's counts.
type SubscriberStats struct {
	Index          int    `json:"index"`
	Broker         string `json:"broker"`
	Ideal          uint64 `json:"ideal"`
	Delivered      uint64 `json:"delivered"`
	Undelivered    uint64 `json:"undelivered"`
	FalsePositives uint64 `json:"false_positives"`
	Duplicates     uint64 `json:"duplicates"`
	Lost           uint64 `json:"lost"`
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
