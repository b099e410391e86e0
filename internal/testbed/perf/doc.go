// Package perf is drip's data-plane benchmark against nats-server and
// Apache ActiveMQ on one machine, the measurement side of issue 12 ("Data
// plane at line rate"): `driplab perf`, `make perf`.
//
// # What runs
//
// Every system runs as its own server processes on loopback, deployed by
// internal/testbed/systems: drip as `drip broker` processes (the drip
// binary beside driplab), nats-server (a 2-server cluster where two
// brokers are needed), ActiveMQ 5.17 for the Henjes07 case. The clients
// run in the driplab process, each on its own connection, with each
// system's own client: drip's client package, nats.go, STOMP with JMS
// selectors. The one exception is content routing, whose subscribers run
// in a child driplab process (`driplab perf subscribers`) so that their
// CPU time — for NATS the client-side filtering that stands in for a
// broker's matching — is a process's own and can be counted.
//
// # Method
//
// A run opens its subscribers and publisher, sends probes until every
// subscriber has had one (interest has reached every broker), then sends
// for a warm-up and a measured window, reads every counter at both ends
// of the window, closes the publisher (drip's summary says what the broker
// accepted; NATS and ActiveMQ accept what they read) and waits a bounded
// time for late deliveries. Rates are over the window; losses over the
// whole run: undelivered = what the accepted messages should have made −
// what arrived, beside the drops the system reports (drip's Lost events
// and drip_subscriber_dropped_total and friends; nats.go's dropped count
// and nats-server's slow consumers). Server CPU is read from
// /proc/PID/stat at both ends of the window. Latency comes from a send
// time in the 16-byte payload, read against the same monotonic clock at
// the subscriber.
//
// Each case runs its systems interleaved (drip, NATS, drip, NATS, ...)
// for Config.Reps repetitions and reports medians, the ratio of the
// medians and the ratio of every interleaved pair, against issue 36's
// targets (issue 12's cases). The machine is shared, so absolute numbers are noisy; the
// ratios of one run are what the targets are about.
//
// # Cases
//
//  1. one-to-one: 1 publisher → 1 subscriber, max rate, drip's clients on
//     their allocation-free path (client.Fields, WithFields); beside it
//     one-to-one-maps, the same with a fresh Attrs map per message, as
//     most users write it;
//  2. fan-out: 1 → 20 subscribers;
//  3. two-brokers: publisher on one broker, subscriber on the other, drip
//     with --peer-compression=false, and once with compression (the
//     default) to show what it costs where the link is fast;
//  4. cpu-per-delivery: the servers' CPU per delivered message, from the
//     runs of 1–3;
//  5. latency: p50/p99/max at a fixed 10,000 msg/s;
//  6. inert-filters: drip alone with 10,000 filters that share every
//     message's attributes and fail on a range, against none;
//  7. content-routing: 100 subscribers with Carzaniga09's single-constraint
//     workload (about 5% replication), drip matching at the broker against
//     NATS delivering everything and filtering in the client;
//  8. henjes07: Henjes07 §4.5's method on one broker, drip against
//     ActiveMQ: received msg/s over a grid of non-matching filters and
//     replication grades, and the model B = t_rcv + n_fltr·t_fltr + r·t_tx
//     fitted to each system's points (FitHenjes).
//
// # Output
//
// perf-CASE.json per case (with every run), perf-summary.json (the
// tables), PNG plots, and a Markdown report (docs/results/perf.md for
// make perf).
package perf
