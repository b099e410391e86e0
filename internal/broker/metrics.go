package broker

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/dripmesh/drip/internal/transport"
)

// Metric names and labels are documented in docs/metrics.md; the Grafana
// dashboards depend on them, so treat them as a contract. These are the
// driver's: its links' traffic, its handshakes and its client service; the
// node registers its own (internal/node) on the same registry.
const namespace = "drip"

type metrics struct {
	// Per link, labelled by the neighbour's name.
	linkUp             *prometheus.GaugeVec
	linkSentBytes      *prometheus.CounterVec
	linkSentPlainBytes *prometheus.CounterVec
	linkRecvBytes      *prometheus.CounterVec
	linkSentBundles    *prometheus.CounterVec
	linkRecvBundles    *prometheus.CounterVec
	linkSentControl    *prometheus.CounterVec
	linkSentKeepalives *prometheus.CounterVec
	linkQueueBytes     *prometheus.GaugeVec
	linkDropped        *prometheus.CounterVec // peer, reason
	linkHandshakeFails *prometheus.CounterVec // reason
	// Predicate advertisements sent by form, shared by every link.
	adsWhole, adsDelta, adBytesWhole, adBytesDelta prometheus.Counter
	controlWait                                    prometheus.Histogram

	// The client service.
	publishRejected    prometheus.Counter
	congestionFeedback prometheus.Counter
	authzDenied        *prometheus.CounterVec // op
}

// Authorization operations, the op label of drip_authz_denied_total.
const (
	opPublish   = "publish"
	opSubscribe = "subscribe"
)

// refusedEstablished is the reason of a link claiming the router ID of a
// neighbour whose link is up and talking.
const refusedEstablished = "established"

// handshakeFailureReasons are the reason labels of
// drip_link_handshake_failures_total: transport.IncompatibleError's reasons
// (either side's verdict on the Open frames, "refused" when the other side
// refused ours), "duplicate", a second link to a neighbour already
// linked (both sides dialled), "established", a link claiming the router
// ID of a neighbour whose link is up and talking, "router_id", a peer
// whose router ID is beyond MaxRouterID,
// "tls", a TLS handshake the peer listener refused, and "identity", a
// certificate that does not name the router the peer claims to be.
var handshakeFailureReasons = []string{"version", "mesh", "bloom", "self", "open", "refused", "duplicate", refusedEstablished, "router_id", "tls", "identity"}

func newMetrics(reg prometheus.Registerer) *metrics {
	f := promauto.With(reg)
	link := []string{"peer"}
	counterVec := func(name, help string, labels ...string) *prometheus.CounterVec {
		return f.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: name, Help: help}, labels)
	}
	gaugeVec := func(name, help string, labels ...string) *prometheus.GaugeVec {
		return f.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Name: name, Help: help}, labels)
	}
	counter := func(name, help string) prometheus.Counter {
		return f.NewCounter(prometheus.CounterOpts{Namespace: namespace, Name: name, Help: help})
	}
	m := &metrics{
		linkUp:             gaugeVec("link_up", "1 while the link to the peer is established; 0 after a configured peer's went down; gone for a peer that dialled in and left.", link...),
		linkSentBytes:      counterVec("link_sent_bytes_total", "Bytes of frames sent to the peer (protobuf encoded size, after compression).", link...),
		linkSentPlainBytes: counterVec("link_sent_uncompressed_bytes_total", "Bytes of the frames sent to the peer before compression (equal to link_sent_bytes_total on an uncompressed link).", link...),
		linkRecvBytes:      counterVec("link_received_bytes_total", "Bytes of frames received from the peer (protobuf encoded size).", link...),
		linkSentBundles:    counterVec("link_sent_bundles_total", "Message bundles sent to the peer.", link...),
		linkRecvBundles:    counterVec("link_received_bundles_total", "Message bundles received from the peer.", link...),
		linkSentControl:    counterVec("link_sent_control_total", "Link-state control messages sent to the peer.", link...),
		linkSentKeepalives: counterVec("link_sent_keepalives_total", "Empty frames sent to the peer because the link had sent nothing for its keepalive interval.", link...),
		linkQueueBytes:     gaugeVec("link_queue_bytes", "Bytes of bundles waiting in the peer's send queue.", link...),
		linkDropped:        counterVec("link_dropped_bundles_total", "Bundles for the peer dropped, by reason (queue_full, link_down).", "peer", "reason"),
		linkHandshakeFails: counterVec("link_handshake_failures_total", "Peer links refused at the handshake, by reason (version, mesh, bloom, self, open, refused, duplicate, established, router_id, tls, identity).", "reason"),
		controlWait: f.NewHistogram(prometheus.HistogramOpts{Namespace: namespace, Name: "control_frame_wait_seconds",
			Help:    "Time the control messages of each frame from a neighbour waited for the broker's control plane, from their arrival to their processing.",
			Buckets: prometheus.ExponentialBuckets(1e-4, 4, 10)}),
		publishRejected: counter("publish_rejected_total", "Messages refused from local publishers as invalid."),
		congestionFeedback: counter("congestion_feedback_messages_total",
			"Published messages that are congestion-control feedback (attribute drip.cc.to): subscriptions asking a publisher to slow down, or for an echo."),
		authzDenied: counterVec("authz_denied_total",
			"Client requests refused by the authorization policy (--authz-policy), by operation: publish (a message outside the client's rule, a rule that allows no publishing, no rule for the client) "+
				"or subscribe (a rule that allows no subscriptions, no rule for the client).", "op"),
	}
	ads := counterVec("predicate_advertisements_sent_total",
		"Predicate advertisements (this broker's and those it floods) sent to neighbours, by form: whole, or a delta against the last one of the same origin sent on the link (both ends offer --peer-predicate-deltas).", "form")
	adBytes := counterVec("predicate_advertisement_sent_bytes_total",
		"Bytes of the predicate advertisements sent to neighbours (protobuf encoded size, before frame compression), by form: whole or delta.", "form")
	m.adsWhole, m.adsDelta = ads.WithLabelValues("whole"), ads.WithLabelValues("delta")
	m.adBytesWhole, m.adBytesDelta = adBytes.WithLabelValues("whole"), adBytes.WithLabelValues("delta")
	// Every label value the code uses exists from the start at zero, so
	// that dashboards and rate() see a healthy mesh's zeros instead of no
	// data until the first failure.
	for _, r := range handshakeFailureReasons {
		m.linkHandshakeFails.WithLabelValues(r)
	}
	for _, op := range []string{opPublish, opSubscribe} {
		m.authzDenied.WithLabelValues(op)
	}
	return m
}

// forLink resolves one link's children of the vectors, so the data path
// does not look labels up per bundle.
func (m *metrics) forLink(peer string) transport.LinkMetrics {
	return transport.LinkMetrics{
		SentBytes:      m.linkSentBytes.WithLabelValues(peer),
		SentPlainBytes: m.linkSentPlainBytes.WithLabelValues(peer),
		RecvBytes:      m.linkRecvBytes.WithLabelValues(peer),
		SentBundles:    m.linkSentBundles.WithLabelValues(peer),
		RecvBundles:    m.linkRecvBundles.WithLabelValues(peer),
		SentControl:    m.linkSentControl.WithLabelValues(peer),
		SentKeepalives: m.linkSentKeepalives.WithLabelValues(peer),
		QueueBytes:     m.linkQueueBytes.WithLabelValues(peer),
		DroppedFull:    m.linkDropped.WithLabelValues(peer, "queue_full"),
		DroppedDown:    m.linkDropped.WithLabelValues(peer, "link_down"),
		AdsWhole:       m.adsWhole,
		AdsDelta:       m.adsDelta,
		AdBytesWhole:   m.adBytesWhole,
		AdBytesDelta:   m.adBytesDelta,
	}
}

// LinkMetrics registers on reg the collectors a Broker registers of its own
// (its links' traffic among them) and returns how one link's counters are
// resolved, so that another driver of a node — the virtual-time harness —
// counts its links as a Broker does.
func LinkMetrics(reg prometheus.Registerer) func(peer string) transport.LinkMetrics {
	return newMetrics(reg).forLink
}
