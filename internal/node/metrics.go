package node

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/dripmesh/drip/internal/buildinfo"
	"github.com/dripmesh/drip/internal/drp"
	"github.com/dripmesh/drip/internal/linkstate"
)

// Metric names and labels are documented in docs/metrics.md; the Grafana
// dashboards depend on them, so treat them as a contract.
const namespace = "drip"

// metrics holds every collector of one node, registered on the registry
// it was given (never the global one).
type metrics struct {
	// Per link, labelled by the neighbour's name: what the routing
	// protocol measures of it (the driver counts its traffic).
	linkRTT  *prometheus.GaugeVec
	linkCost *prometheus.GaugeVec
	// Fast failure detection (linkstate.Config.SuspectMultiplier): how
	// often the link was routed around for its silence, and when last,
	// so that an experiment can measure detection times from outside.
	linkSuspected   *prometheus.CounterVec
	linkSuspectedAt *prometheus.GaugeVec
	adsRefused      *prometheus.CounterVec // reason

	// Per broker.
	published         prometheus.Counter
	unmatched         prometheus.Counter
	delivered         prometheus.Counter
	subscriberDropped prometheus.Counter
	budgetShed        prometheus.Counter
	falsePositives    prometheus.Counter
	destinations      prometheus.Histogram
	matchSeconds      *prometheus.HistogramVec // stage
	// The two stages' children, resolved once: they are observed per message.
	matchExact, matchEncoded prometheus.Observer
	routeDropped             *prometheus.CounterVec // reason
	bounced                  *prometheus.CounterVec // outcome
	bouncedHeld              prometheus.Gauge
	heldForLink              prometheus.Counter
	replayed                 prometheus.Counter
	unsentResent             prometheus.Counter
	marked                   prometheus.Counter
	spfRuns                  prometheus.Counter
	routersKnown             prometheus.Gauge
	lsdbEntries              prometheus.Gauge
	matchAllFilters          prometheus.Gauge
	lsdbDigest               prometheus.Gauge
	advertisements           prometheus.Counter
	adPending                prometheus.Gauge
	localSubs                prometheus.Gauge
	filters                  prometheus.Gauge
	advertised               prometheus.Gauge
	protocolEvents           *prometheus.CounterVec // event
	duplicates               *prometheus.CounterVec // verdict
	dedupOrigins             prometheus.Gauge
	dedupWindows             prometheus.Gauge
	dedupBytes               prometheus.Gauge
	malformedBundles         prometheus.Counter
	bundlesRefused           *prometheus.CounterVec // reason
	// Deadlines and two paths (docs/design.md §11).
	deadlineBundles prometheus.Counter
	deadlineMissed  prometheus.Counter
	secondPathBytes prometheus.Counter
	redundantCopies prometheus.Counter
	// PREDICATES index rebuilds by kind (full, partial), resolved once.
	rebuildFull, rebuildPartial prometheus.Observer
}

// Outcomes of a bounced bundle, the values of drip_bounced_bundles_total's
// label.
const (
	bounceRerouted = "rerouted"  // held until the routes changed, then sent on
	bounceReturned = "returned"  // held bounceHoldFor (or until the broker stopped), then sent as the routes said
	bounceSentBack = "sent_back" // not held: sent back at once
)

// Reasons a bundle from a neighbour is refused, the values of
// drip_bundles_refused_total's label.
const (
	refusedReversePath = "reverse_path"
	refusedEpoch       = "epoch"
)

// refusedLimit is the drip_advertisements_refused_total reason of an
// advertisement over the limits of its size (linkstate.LimitError).
const refusedLimit = "limit"

// routeDropMatchAll is the drip_route_dropped_destinations_total reason of
// destinations the match-all policy left out.
const routeDropMatchAll = "match_all"

// routeDropLinkDown is the drip_route_dropped_destinations_total reason of
// destinations whose next hop's link went down under them; drp's own
// reasons are drp.DropReason's strings.
const routeDropLinkDown = "link_down"

func newMetrics(reg prometheus.Registerer, brokerName string, b *Budget) *metrics {
	f := factory{reg: reg}
	link := []string{"peer"}
	m := &metrics{
		linkRTT:  f.gaugeVec("link_rtt_seconds", "Smoothed round-trip time to the peer measured by hellos.", link),
		linkCost: f.gaugeVec("link_cost", "Cost this broker advertises for the link to the peer.", link),
		linkSuspected: f.counterVec("link_suspected_total",
			"Times nothing arrived from the peer for the silence its keepalives allow, and the link left this broker's routes until the peer was heard again.", link),
		linkSuspectedAt: f.gaugeVec("link_suspected_timestamp_seconds", "When the link to the peer last became suspect (Unix time; 0: never).", link),

		published:         f.counter("published_messages_total", "Messages accepted from local publishers."),
		unmatched:         f.counter("unmatched_messages_total", "Published messages routed nowhere: no local subscriber and no other broker's encoded predicate matched."),
		delivered:         f.counter("delivered_messages_total", "Messages queued to local subscribers (one per subscriber)."),
		subscriberDropped: f.counter("subscriber_dropped_total", "Deliveries dropped because a local subscriber's queue was full."),
		budgetShed: f.counter("subscriber_shed_total",
			"Deliveries dropped to keep the broker's queues within its memory budget: the oldest of the subscriber holding the most bytes, or a new one to that subscriber."),
		falsePositives: f.counter("false_positives_total", "Bundles delivered to this broker that matched no local subscriber exactly (Bloom false positives)."),
		destinations: f.histogram("destinations_per_message", "Remote brokers a published message is routed to (|D| at the ingress).",
			[]float64{0, 1, 2, 4, 8, 16, 32, 64, 128, 256, 512}),
		matchSeconds: f.histogramVec("match_duration_seconds", "Time to match one message, by stage (exact: local subscribers; encoded: PREDICATES table).",
			[]string{"stage"}, prometheus.ExponentialBuckets(1e-7, 4, 10)),
		routeDropped: f.counterVec("route_dropped_destinations_total", "Destinations dropped by forwarding, by reason (no_route, hop_limit).", []string{"reason"}),
		bounced: f.counterVec("bounced_bundles_total",
			"Bundles whose routes here led some destinations straight back to the neighbour they came from (routers disagreeing while link state floods), by outcome: "+
				"rerouted (held until this broker's routes changed, then sent on), returned (held the whole hold time, or until the broker stopped, then sent as the routes said), sent_back (not held: the hold was full, or the bundle has a deadline or is a second copy).",
			[]string{"outcome"}),
		bouncedHeld: f.gauge("bounced_bundles_held", "Bounced bundles waiting for this broker's routes to change (see bounced_bundles_total), and bundles held for a link that had ended (see bundles_held_for_link_total)."),
		heldForLink: f.counter("bundles_held_for_link_total",
			"Bundles whose next hop's link had ended while the routes still led there (the core had not yet heard of the end): held until this broker's routes changed, then decided again."),
		replayed: f.counter("bundles_replayed_total",
			"Bundles a link had taken to send in the moments before it fell silent, sent again around it when it became suspect (duplicates of any that had arrived are suppressed where they are delivered)."),
		unsentResent: f.counter("bundles_unsent_resent_total",
			"Bundles still queued on a link when it ended, never sent, decided again on the routes around it (those the hold had no room for count as link_dropped_bundles_total{reason=\"link_down\"})."),
		marked: f.counter("bundles_marked_total",
			"Bundles this broker marked (congestion experienced) as it queued them on a link whose queue was past --link-mark-bytes; subscriptions with congestion control count a marked delivery as a loss event."),
		spfRuns:      f.counter("spf_runs_total", "Shortest-path computations."),
		routersKnown: f.gauge("routers_known", "Routers reachable from this broker, itself included."),
		lsdbEntries:  f.gauge("lsdb_entries", "Entries in the link-state database (LSAs and predicate advertisements)."),
		matchAllFilters: f.gauge("match_all_filters", "Filters other brokers advertise that match (nearly) every message: an empty Bloom filter (a subscription to 'k exists', or a peer asking for everything), "+
			"or filters of so few bits that together they match a message Bloom a quarter full with a chance of a half."),
		lsdbDigest: f.gauge("lsdb_digest", "The low 48 bits of the link-state database digest hellos carry: "+
			"equal on every broker once the mesh has converged on the same versions of every advertisement."),
		adPending: f.gauge("advertisement_pending",
			"1 while local subscription changes wait for the advertise interval to end before they are advertised, else 0."),
		advertisements: f.counter("predicate_advertisements_total",
			"Times this broker re-advertised its predicate because its clients' subscriptions changed (at most once per advertise interval)."),
		localSubs:      f.gauge("subscriptions", "Subscriptions of local clients."),
		filters:        f.gauge("filters", "Filters of the subscriptions of local clients."),
		advertised:     f.gauge("advertised_filters", "Bloom filters this broker advertises after deduplication and covering."),
		protocolEvents: f.counterVec("linkstate_events_total", "Events of the link-state protocol, by type.", []string{"event"}),
		duplicates: f.counterVec("duplicates_suppressed_total",
			"Copies of messages this broker did not deliver because it had delivered the same ingress stamp before (verdict duplicate: routes disagreed while the mesh changed) "+
				"or could no longer tell (verdict stale: older than the duplicate window).", []string{"verdict"}),
		dedupOrigins: f.gauge("dedup_origins", "Ingress brokers whose recent stamps the duplicate filter remembers."),
		dedupWindows: f.gauge("dedup_windows", "Duplicate windows held, one per ingress broker and boot epoch."),
		dedupBytes:   f.gauge("dedup_bytes", "Memory of the duplicate windows."),
		adsRefused: f.counterVec("advertisements_refused_total", "Router and predicate advertisements from neighbours refused, neither installed nor flooded, by reason: their origin's signature did not check out "+
			"(unsigned, signature, certificate, identity; only with peer identity on), or a predicate advertisement was over the limits of its size (limit).", []string{"reason"}),
		malformedBundles: f.counter("malformed_bundles_total", "Bundles from neighbours dropped because their header or message did not decode or broke a limit."),
		bundlesRefused: f.counterVec("bundles_refused_total",
			"Bundles from neighbours dropped because they could not have come that way, by reason: reverse_path (the neighbour is neither the bundle's source nor on the source's shortest path to this broker), "+
				"epoch (a boot epoch later than the source's incarnation in the link-state database).", []string{"reason"}),
		deadlineBundles: f.counter("deadline_bundles_total",
			"Bundles this broker sent with a delivery deadline, queued by urgency (the part of the latency margin they may spend per link)."),
		deadlineMissed: f.counter("deadline_missed_total",
			"Deliveries queued to local subscribers later than their subscription's deadline, by the time since acceptance the mesh measured along the path."),
		secondPathBytes: f.counter("second_path_bytes_total",
			"Bytes of the second copies of two-path messages this broker sent (ingress and transit): what redundancy costs."),
		redundantCopies: f.counter("redundant_copies_suppressed_total",
			"Copies of two-path messages not delivered because the other copy had arrived first."),
	}
	for _, v := range []string{"duplicate", "stale"} {
		m.duplicates.WithLabelValues(v)
	}
	for _, r := range []string{refusedReversePath, refusedEpoch} {
		m.bundlesRefused.WithLabelValues(r)
	}
	// Every label value the code uses exists from the start at zero, so
	// that dashboards and rate() see a healthy mesh's zeros instead of no
	// data until the first failure.
	for _, r := range append(linkstate.RefusedReasons, refusedLimit) {
		m.adsRefused.WithLabelValues(r)
	}
	for r := range drp.NumDropReasons {
		m.routeDropped.WithLabelValues(drp.DropReason(r).String())
	}
	m.routeDropped.WithLabelValues(routeDropLinkDown)
	m.routeDropped.WithLabelValues(routeDropMatchAll)
	for _, o := range []string{bounceRerouted, bounceReturned, bounceSentBack} {
		m.bounced.WithLabelValues(o)
	}
	// Rare and worth a panel: exported at zero so it shows a zero.
	m.protocolEvents.WithLabelValues(linkstate.EventBudgetViolation.String())
	rebuilds := f.histogramVec("predicate_index_rebuild_duration_seconds",
		"Time each rebuild of the index of other brokers' predicates took on the broker's clock, from its plan to its install, by kind (full: every filter; partial: only the routers changed since the last full build).",
		[]string{"kind"}, prometheus.ExponentialBuckets(1e-4, 4, 9))
	m.rebuildFull, m.rebuildPartial = rebuilds.WithLabelValues("full"), rebuilds.WithLabelValues("partial")
	m.matchExact = m.matchSeconds.WithLabelValues("exact")
	m.matchEncoded = m.matchSeconds.WithLabelValues("encoded")
	// Read at scrape time: the data path only adds to the atomic counter.
	f.must(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: namespace, Name: "memory_budget_used_bytes",
		Help: "Bytes the broker's subscriber and link send queues and the deliveries being sent hold, counted against its memory budget."},
		func() float64 { return float64(b.Used()) }))
	f.must(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: namespace, Name: "memory_budget_sending_bytes",
		Help: "The part of memory_budget_used_bytes that client connections hold for Subscribe streams: deliveries handed to gRPC and not yet written to the socket."},
		func() float64 { return float64(b.InClients()) }))
	f.must(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: namespace, Name: "memory_budget_streams_bytes",
		Help: "The part of memory_budget_used_bytes that open client streams stand for: a fixed cost per stream at rest, more for a publisher's flow-control window."},
		func() float64 { return float64(b.Streams()) }))
	f.must(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: namespace, Name: "memory_budget_tables_bytes",
		Help: "The part of memory_budget_used_bytes that the predicate advertisements in the link-state database stand for, with their part of the predicate index: a fixed cost per filter."},
		func() float64 { return float64(b.Tables()) }))
	f.gauge("memory_budget_bytes", "The part of the broker's memory budget its subscriber and link send queues may hold: half of --memory-budget (0: none).").Set(float64(b.limit))
	info := prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Name: "build_info", Help: "Constant 1, labelled with the broker's version and name."}, []string{"version", "broker"})
	f.must(info)
	info.WithLabelValues(buildinfo.Version, brokerName).Set(1)
	return m
}

// factory registers what it creates, so each metric is declared once.
type factory struct{ reg prometheus.Registerer }

func (f factory) must(c prometheus.Collector) {
	if f.reg != nil {
		f.reg.MustRegister(c)
	}
}

func (f factory) counter(name, help string) prometheus.Counter {
	c := prometheus.NewCounter(prometheus.CounterOpts{Namespace: namespace, Name: name, Help: help})
	f.must(c)
	return c
}

func (f factory) counterVec(name, help string, labels []string) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: name, Help: help}, labels)
	f.must(c)
	return c
}

func (f factory) gauge(name, help string) prometheus.Gauge {
	g := prometheus.NewGauge(prometheus.GaugeOpts{Namespace: namespace, Name: name, Help: help})
	f.must(g)
	return g
}

func (f factory) gaugeVec(name, help string, labels []string) *prometheus.GaugeVec {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Name: name, Help: help}, labels)
	f.must(g)
	return g
}

func (f factory) histogram(name, help string, buckets []float64) prometheus.Histogram {
	h := prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: namespace, Name: name, Help: help, Buckets: buckets})
	f.must(h)
	return h
}

func (f factory) histogramVec(name, help string, labels []string, buckets []float64) *prometheus.HistogramVec {
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: namespace, Name: name, Help: help, Buckets: buckets}, labels)
	f.must(h)
	return h
}
