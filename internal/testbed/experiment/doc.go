// Package experiment runs the comparative experiments of Carzaniga09 §5 on
// drip, ActiveMQ and NATS (internal/testbed/systems) and reports them as §5.1.5
// and Figs. 3–5 do.
//
// Each run follows the experimental program of §5.1.4: deploy one broker
// per site of the scenario's topology, place the clients on the sites
// round-robin, have every client install its predicate, wait until the
// system's routing state has settled, then have every client publish as a
// Poisson process at a constant or linearly growing rate, and finally
// collect and clean up. The publishing, the exactness oracle and the
// per-second counts are internal/bench's; this package adds the systems,
// the per-second busiest-link utilisation (from a systems.LinkCounter),
// JSON results with the whole configuration embedded, and PNG plots.
//
// Rates are the paper's per-client rates times Config.Scale, so that a
// scenario keeps its shape (its replication, its ramp) on a machine much
// smaller than the paper's 42-machine testbed. On loopback, without the
// lab's emulated WAN links, links have no capacity limit: the runs measure
// CPU, and link utilisation is computed against the bandwidth the links
// would have.
package experiment
