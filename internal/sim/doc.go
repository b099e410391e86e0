// Package sim runs many linkstate routers in one process over a
// deterministic, in-memory network with virtual time, in the spirit of
// memberlist's MockNetwork and etcd raft's interaction tests. It is how
// drip tests the routing protocol of Carzaniga09 §2.2 (docs/design.md §3) and
// measures its control traffic, and what DRP forwarding tests run on.
//
// A Network holds a priority queue of deliveries ordered by virtual time
// and ticks every router every TickInterval. Each direction of a link has
// a delay and a drop probability; links are ordered streams, so a message
// never overtakes an earlier one on the same link. Operations model what a
// deployment sees:
//
//   - Cut/Heal: the peer stream breaks (both ends get LinkDown at once,
//     messages in flight are lost) and is re-established.
//   - Kill: a router crashes; its neighbours' streams close. Stop: it shuts
//     down gracefully, flooding a withdrawal before its streams close.
//     Restart: a fresh incarnation with an empty LSDB and sequence numbers
//     from 1.
//   - Partition/Merge: packets between groups are lost but no stream
//     closes, so adjacencies die by DeadInterval, as on a WAN.
//   - SetDelay changes measured RTT (and so costs in CostRTT mode),
//     SetDrop loses messages, SetWeight changes a configured cost,
//     SetPredicate a router's advertised filters.
//
// Everything is driven by the seed: the same topology, options and
// operations produce the same run, message for message. RunUntilConverged
// runs until no control message but hellos is in flight, every adjacency
// is up exactly where a link works, and every connected component agrees
// on one LSDB. Per-direction counters record control messages and their
// WireSize bytes by kind.
//
// topology.go has the generators: Line, Ring, Grid, RandomConnected and a
// BRITE-like preferential-attachment generator with geographic placement
// (PaperTopology stands in for the 42-broker topology of Carzaniga09 §5.2.2).
package sim
