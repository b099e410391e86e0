package netem

import "github.com/prometheus/client_golang/prometheus"

// Error stages, the values of drip_netem_errors_total's label.
const (
	StageTopology  = "topology"  // the topology file could not be read; the last good one is used
	StageResolve   = "resolve"   // a neighbour's name did not resolve; its last addresses are kept
	StagePlan      = "plan"      // the topology cannot be shaped (e.g. a router ID too large)
	StageReconcile = "reconcile" // a netlink operation failed; the next pass retries
	StageCleanup   = "cleanup"   // removing drip's qdiscs failed
)

// Metrics are the sidecar's Prometheus collectors. Their names are a
// contract with the dashboards (deploy/netem/README.md lists them).
type Metrics struct {
	links       prometheus.Gauge
	reconciles  prometheus.Counter
	changes     prometheus.Counter
	errors      *prometheus.CounterVec // stage
	unsupported *prometheus.GaugeVec   // feature
}

// NewMetrics creates the collectors and registers them on reg (nil: not
// registered, for tests that do not look).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		links: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "drip", Subsystem: "netem", Name: "links",
			Help: "Neighbours whose traffic has its own htb class.",
		}),
		reconciles: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "drip", Subsystem: "netem", Name: "reconciles_total",
			Help: "Reconcile passes completed (resolve, plan, bring the device to the plan).",
		}),
		changes: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "drip", Subsystem: "netem", Name: "changes_total",
			Help: "Qdiscs, classes and filters added, changed or deleted; flat while nothing moves.",
		}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "drip", Subsystem: "netem", Name: "errors_total",
			Help: "Failures by stage: topology, resolve, plan, reconcile, cleanup.",
		}, []string{"stage"}),
		unsupported: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "drip", Subsystem: "netem", Name: "unsupported",
			Help: "1 while some link asks for this impairment (delay, jitter, loss) and the kernel lacks netem to apply it.",
		}, []string{"feature"}),
	}
	for _, s := range []string{StageTopology, StageResolve, StagePlan, StageReconcile, StageCleanup} {
		m.errors.WithLabelValues(s)
	}
	for _, f := range Features {
		m.unsupported.WithLabelValues(string(f))
	}
	if reg != nil {
		reg.MustRegister(m.links, m.reconciles, m.changes, m.errors, m.unsupported)
	}
	return m
}
