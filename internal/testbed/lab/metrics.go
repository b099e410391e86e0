package lab

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// collector exports the lab's link counters; it snapshots the model in the
// daemon's loop at every scrape, so counters and gauges are consistent.
type collector struct {
	d *daemon

	sent, bytes, packets, dropped       *prometheus.Desc
	backlog, bandwidth, delay, loss, up *prometheus.Desc
	unroutable, noRoute                 *prometheus.Desc
}

func newCollector(d *daemon) *collector {
	labels := prometheus.Labels{"lab": d.name}
	desc := func(name, help string, vars ...string) *prometheus.Desc {
		return prometheus.NewDesc("drip_lab_"+name, help, vars, labels)
	}
	dir := []string{"from", "to"}
	return &collector{
		d:          d,
		sent:       desc("link_sent_bytes_total", "Bytes serialised onto the link direction from → to; rate / bandwidth is its utilisation.", dir...),
		bytes:      desc("link_accepted_bytes_total", "Bytes accepted for transmission (queued or sent) on the link direction from → to.", dir...),
		packets:    desc("link_accepted_packets_total", "Packets accepted for transmission (queued or sent) on the link direction from → to.", dir...),
		dropped:    desc("link_dropped_packets_total", "Packets dropped on the link direction from → to, by reason: loss (random), queue (full), cut.", "from", "to", "reason"),
		backlog:    desc("link_queue_bytes", "Bytes waiting to be serialised on the link direction from → to.", dir...),
		bandwidth:  desc("link_bandwidth_bytes_per_second", "Configured rate of the link direction from → to; 0 means unlimited.", dir...),
		delay:      desc("link_delay_seconds", "Configured one-way delay of the link direction from → to.", dir...),
		loss:       desc("link_loss_ratio", "Configured loss probability of the link direction from → to.", dir...),
		up:         desc("link_up", "1 while the link direction from → to carries packets, 0 while it is cut.", dir...),
		unroutable: desc("unroutable_packets_total", "Packets a site sent that were not IPv4 or not addressed to a lab site.", "site"),
		noRoute:    desc("no_route_packets_total", "Packets a site sent to a site its static routes cannot reach.", "site"),
	}
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.sent, c.bytes, c.packets, c.dropped, c.backlog, c.bandwidth, c.delay, c.loss, c.up, c.unroutable, c.noRoute} {
		ch <- d
	}
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var s *Status
	if err := c.d.do(ctx, func() { s = c.d.status() }); err != nil {
		return
	}
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	for _, l := range s.Links {
		counter(c.sent, l.Sent, l.From, l.To)
		counter(c.bytes, l.Bytes, l.From, l.To)
		counter(c.packets, l.Packets, l.From, l.To)
		counter(c.dropped, l.Loss, l.From, l.To, DropLoss.String())
		counter(c.dropped, l.Queue, l.From, l.To, DropQueue.String())
		counter(c.dropped, l.Cut, l.From, l.To, DropCut.String())
		gauge(c.backlog, float64(l.Backlog), l.From, l.To)
		gauge(c.bandwidth, l.Params.Bandwidth, l.From, l.To)
		gauge(c.delay, l.Params.Delay.Seconds(), l.From, l.To)
		gauge(c.loss, l.Params.Loss, l.From, l.To)
		up := 0.0
		if l.Up {
			up = 1
		}
		gauge(c.up, up, l.From, l.To)
	}
	for _, site := range s.Sites {
		counter(c.unroutable, s.Unroutable[site.Name], site.Name)
		counter(c.noRoute, s.NoRoute[site.Name], site.Name)
	}
}
