package congestion

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/dripmesh/drip/internal/testbed/systems"
)

// Result is one scenario's run of every variant.
type Result struct {
	Scenario Scenario        `json:"scenario"`
	Config   Config          `json:"config"`
	Variants []VariantResult `json:"variants"`
	// Findings read the paper's quantities against the targets.
	Findings []Finding `json:"findings"`
	// Command is how the run was made (set by the caller).
	Command string `json:"command,omitempty"`
}

// VariantResult is one variant's run. Series have one value per Bin from
// the start of publishing, as rates per second.
type VariantResult struct {
	Variant    Variant           `json:"variant"`
	Info       systems.Info      `json:"system"`
	Bin        time.Duration     `json:"bin_ns"`
	Groups     []GroupResult     `json:"groups"`
	Publishers []PublisherResult `json:"publishers"`
	// Bottleneck is the bytes per second the bottleneck link serialised
	// towards the subscribers (the lab's counter); TCP is the goodput of
	// Fig. 10's TCP flow, bytes per second.
	Bottleneck []float64 `json:"bottleneck_bytes_per_s,omitempty"`
	TCP        []float64 `json:"tcp_bytes_per_s,omitempty"`
	// Brokers are drip's brokers' counters at the end, summed over them:
	// bundles dropped at full link queues (link_queue_full) and ended
	// links (link_down), deliveries dropped at slow subscribers
	// (subscriber_dropped), bundles marked (marked).
	Brokers map[string]float64 `json:"brokers,omitempty"`
}

// GroupResult is what one group of subscribers was sent and received:
// matching messages, counted once per subscriber.
type GroupResult struct {
	Group       string `json:"group"`
	Subscribers int    `json:"subscribers"`
	// Expected matching messages the publishers sent; Delivered of them,
	// Lost the rest; Extra deliveries that matched nothing or came twice.
	Expected  uint64 `json:"expected"`
	Delivered uint64 `json:"delivered"`
	Lost      uint64 `json:"lost"`
	Extra     uint64 `json:"extra"`
	// Per bin: matching messages sent, and of them delivered and lost (by
	// the bin they were sent in), and deliveries by the bin they arrived.
	Sent       []float64 `json:"sent_per_s"`
	Received   []float64 `json:"received_per_s"`
	LostPerBin []float64 `json:"lost_per_s"`
	Arrived    []float64 `json:"arrived_per_s"`
	// Delivery delay of what arrived (ms).
	P50  float64 `json:"p50_ms"`
	P99  float64 `json:"p99_ms"`
	Mean float64 `json:"mean_ms"`
	// Congestion control at the subscriptions (drip with control):
	// feedback and echo requests sent, loss events seen.
	FeedbackSent uint64 `json:"feedback_sent,omitempty"`
	Echoes       uint64 `json:"echoes,omitempty"`
	LossEvents   uint64 `json:"loss_events,omitempty"`
	// Per bin, what the group's first subscriber measured of its first
	// publisher as of the bin's end (drip with control): the smoothed
	// round-trip time (ms), the loss event rate p, and the rate eq. 1
	// allows for them (msg/s; 0 before the first loss event).
	RTTms         []float64 `json:"rtt_ms,omitempty"`
	LossEventRate []float64 `json:"loss_event_rate,omitempty"`
	Allowed       []float64 `json:"allowed_per_s,omitempty"`
}

// PublisherResult is what one publisher did.
type PublisherResult struct {
	Site string `json:"site"`
	// Offered by the schedule, Sent (Publish returned), Skipped: held back
	// so long by congestion control that the schedule moved on.
	Offered uint64    `json:"offered"`
	Sent    uint64    `json:"sent"`
	Skipped uint64    `json:"skipped"`
	Rate    []float64 `json:"sent_per_s"`
	// Error is what a peer system's publisher returned, which ended its
	// sending (drip's publishers fail the run instead).
	Error string `json:"error,omitempty"`
	// Congestion control: messages in limited flows, held for tokens and
	// for how long, feedback messages taken, limited flows at the end.
	Controlled uint64  `json:"controlled,omitempty"`
	Held       uint64  `json:"held,omitempty"`
	WaitedMs   float64 `json:"waited_ms,omitempty"`
	Feedback   uint64  `json:"feedback,omitempty"`
	Flows      int     `json:"flows,omitempty"`
	// Quota is, per bin, the least quota of its limited flows at the
	// bin's end (msg/s; 0 while none is limited).
	Quota []float64 `json:"quota_per_s,omitempty"`
}

// account turns the logs into the variant's result.
func account(cfg Config, s Scenario, v Variant, pubs []*pubLog, subs []*subLog, bins int) *VariantResult {
	vr := &VariantResult{Variant: v, Bin: cfg.Bin}
	perSec := 1 / cfg.Bin.Seconds()
	for i, p := range pubs {
		pr := PublisherResult{Site: s.Publishers[i].Site, Offered: p.offered, Sent: uint64(len(p.bins)), Skipped: p.skipped, Rate: make([]float64, bins)}
		if p.err != nil && !errors.Is(p.err, context.Canceled) {
			pr.Error = p.err.Error()
		}
		for _, b := range p.bins {
			if int(b) < bins {
				pr.Rate[b] += perSec
			}
		}
		if p.hasStats {
			c := p.congest
			pr.Controlled, pr.Held, pr.WaitedMs, pr.Feedback, pr.Flows = c.Controlled, c.Held, float64(c.Waited)/float64(time.Millisecond), c.Feedback, len(c.Flows)
		}
		pr.Quota = p.quota
		vr.Publishers = append(vr.Publishers, pr)
	}
	for _, g := range s.Groups() {
		gr := GroupResult{Group: g, Sent: make([]float64, bins), Received: make([]float64, bins), LostPerBin: make([]float64, bins), Arrived: make([]float64, bins)}
		var lat []time.Duration
		for j, sp := range s.Subscribers {
			if sp.Group != g {
				continue
			}
			l := subs[j]
			gr.Subscribers++
			if gr.Subscribers == 1 {
				gr.RTTms, gr.LossEventRate, gr.Allowed = l.rtt, l.lossRate, l.allowed
			}
			gr.Extra += l.extra
			for b, n := range l.arrived {
				gr.Arrived[b] += n * perSec
			}
			lat = append(lat, l.latency...)
			if l.hasStats {
				gr.FeedbackSent += l.congest.FeedbackSent
				gr.Echoes += l.congest.Echoes
				gr.LossEvents += l.congest.LossEvents
			}
			for _, p := range sp.Publishers {
				for n, b := range pubs[p].bins {
					if !sp.Matches(p, uint64(n)) {
						continue
					}
					gr.Expected++
					got := n < len(l.seen[p]) && l.seen[p][n]
					if got {
						gr.Delivered++
					}
					if int(b) >= bins {
						continue
					}
					gr.Sent[b] += perSec
					if got {
						gr.Received[b] += perSec
					} else {
						gr.LostPerBin[b] += perSec
					}
				}
			}
		}
		gr.Lost = gr.Expected - gr.Delivered
		gr.P50, gr.P99, gr.Mean = quantiles(lat)
		vr.Groups = append(vr.Groups, gr)
	}
	return vr
}

// quantiles are the median, 99th percentile and mean of lat in ms.
func quantiles(lat []time.Duration) (p50, p99, mean float64) {
	if len(lat) == 0 {
		return 0, 0, 0
	}
	slices.Sort(lat)
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	var sum time.Duration
	for _, d := range lat {
		sum += d
	}
	return ms(lat[len(lat)/2]), ms(lat[len(lat)*99/100]), ms(sum) / float64(len(lat))
}

func (vr *VariantResult) summary() string {
	var out string
	for _, g := range vr.Groups {
		out += fmt.Sprintf("[%s: %d expected, %d delivered, %d lost, p50 %.0f ms] ", g.Group, g.Expected, g.Delivered, g.Lost, g.P50)
	}
	for i, p := range vr.Publishers {
		out += fmt.Sprintf("[pub %d: %d offered, %d sent, %d feedback, %d flows] ", i, p.Offered, p.Sent, p.Feedback, p.Flows)
	}
	return out
}
