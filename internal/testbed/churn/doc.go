// Package churn measures drip through broker failures with separate broker
// processes on loopback, as a user would see them (`driplab churn`): a
// random 12-broker mesh of 18 links with at least one cut vertex, one
// `drip broker` process per broker, the bench (internal/bench) with its
// clients on 8 brokers, and one fault per run at a fixed time after sending
// starts — kill -9 of a broker that is no cut vertex and a restart 10 s
// later, SIGTERM of the same broker and a restart 5 s later, kill -9 of a
// cut vertex (the mesh partitions) and a restart 10 s later.
//
// The victim always has clients: its subscribers and publishers fail over
// to the next broker of the bench's list (or, on SIGTERM, move before it
// leaves, design §10). A Monitor scrapes every broker's /metrics every
// 100 ms, which times reconvergence (from the fault until the surviving
// brokers agree on the link-state database, and from the restart until all
// twelve do) and sums the brokers' own drop and duplicate counters over
// every incarnation. A Result holds the bench's report, the fault's times,
// the gaps and failovers relative to them, the counters, and the checks
// the run must pass: no duplicate and no false positive reaching the bench,
// a complete report, subscribers back within 2 s of their broker's restart
// (or at once on another broker), and no loss when a broker that is no cut
// vertex leaves gracefully.
//
// Every process is started in its own process group and killed with it on
// every exit path of a run; docs/results/churn.md has the measurements.
package churn
